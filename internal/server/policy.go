package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
)

// reconcilePolicy writes the bootstrap RBAC policy (upstream's default
// roles and bindings and Skiff's agent bindings) once the API server is
// up, keeping what users changed; see bootstrappolicy.Reconcile.
//
// sharedControllerIdentity (--use-service-account-credentials=false) binds
// every controller role to system:kube-controller-manager. Otherwise such
// bindings, left by an earlier start or an older Skiff, are deleted, so
// that the controller manager's own identity keeps only
// system:kube-controller-manager (unless a user protected one with
// rbac.authorization.kubernetes.io/autoupdate: "false").
func reconcilePolicy(ctx context.Context, client kubernetes.Interface, timeout time.Duration, sharedControllerIdentity bool) error {
	p, err := bootstrappolicy.Load()
	if err != nil {
		return err
	}
	if sharedControllerIdentity {
		p.ShareControllerIdentity()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := bootstrappolicy.Reconcile(ctx, client, p); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	if sharedControllerIdentity {
		return nil
	}
	if err := removeSharedControllerBindings(ctx, client); err != nil {
		return fmt.Errorf("bootstrap RBAC policy: %w", err)
	}
	return nil
}

// removeSharedControllerBindings deletes the bootstrap policy's
// skiff:controller:* bindings.
func removeSharedControllerBindings(ctx context.Context, client kubernetes.Interface) error {
	stale := func(m metav1.ObjectMeta) bool {
		return strings.HasPrefix(m.Name, bootstrappolicy.SharedControllerPrefix) &&
			m.Labels["kubernetes.io/bootstrapping"] == "rbac-defaults" &&
			m.Annotations[bootstrappolicy.AutoUpdateAnnotation] != "false"
	}
	crbs, err := client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range crbs.Items {
		if stale(b.ObjectMeta) {
			if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	rbs, err := client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range rbs.Items {
		if stale(b.ObjectMeta) {
			if err := client.RbacV1().RoleBindings(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
