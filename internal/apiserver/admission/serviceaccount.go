package admission

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/satoken"
)

// Upstream's names for the token mount.
const (
	// ServiceAccountVolumePrefix prefixes the projected token volume's
	// name ("kube-api-access-" and five random characters).
	ServiceAccountVolumePrefix = "kube-api-access-"
	// ServiceAccountMountPath is where every container sees the token,
	// the cluster CA and the namespace.
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// RootCAConfigMap is published in every namespace by the
	// root-ca-cert-publisher controller.
	RootCAConfigMap = "kube-root-ca.crt"
)

// ServiceAccount is upstream's plugin of that name, for pods:
//   - spec.serviceAccountName defaults to "default";
//   - unless automountServiceAccountToken is false (on the pod, or else on
//     the account), every container and init container without a mount at
//     /var/run/secrets/kubernetes.io/serviceaccount gets one of the
//     projected volume kube-api-access-<5 random>: a serviceAccountToken
//     source (path token, 3607 s, which the kubelet fills by TokenRequest),
//     ca.crt from the kube-root-ca.crt ConfigMap and the namespace from the
//     downward API.
//
// Not done: refusing the pod until its account exists (upstream does; here
// a missing account mounts the token, which the kubelet then cannot get),
// and checking that the pod's secrets are the account's when the account
// says kubernetes.io/enforce-mountable-secrets.
type ServiceAccount struct {
	accounts registry.Reader
	// suffix makes the volume name's random part (tests fix it).
	suffix func() string
}

var _ Mutator = (*ServiceAccount)(nil)

// NewServiceAccount builds the plugin; r reads ServiceAccounts (nil: every
// account automounts).
func NewServiceAccount(r registry.Reader) *ServiceAccount {
	return &ServiceAccount{accounts: r, suffix: func() string { return utilrand.String(5) }}
}

// Name is the upstream name.
func (*ServiceAccount) Name() string { return "ServiceAccount" }

// Handles pod creates.
func (*ServiceAccount) Handles(op Operation) bool { return op == Create }

// Admit fills in spec.serviceAccountName (and its deprecated twin) and
// mounts the account's token.
func (p *ServiceAccount) Admit(ctx context.Context, a *Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Subresource != "" {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = pod.Spec.DeprecatedServiceAccount
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil // mirror pods cannot use the API's accounts
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case p.accounts != nil:
		sa := &corev1.ServiceAccount{}
		err := p.accounts.Get(ctx, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), a.Namespace, pod.Spec.ServiceAccountName, false, sa)
		switch {
		case err == nil && sa.AutomountServiceAccountToken != nil:
			automount = *sa.AutomountServiceAccountToken
		case err != nil && !apierrors.IsNotFound(err):
			return apierrors.NewInternalError(err)
		}
	}
	if automount {
		p.mountToken(pod)
	}
	return nil
}

// mountToken adds the projected token volume and its mounts, as upstream.
func (p *ServiceAccount) mountToken(pod *corev1.Pod) {
	name, have := "", false
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumePrefix) {
			name, have = v.Name, true
			break
		}
	}
	if name == "" {
		name = ServiceAccountVolumePrefix + p.suffix()
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath}
	needed := false
	add := func(cs []corev1.Container) {
		for i := range cs {
			mounted := false
			for _, m := range cs[i].VolumeMounts {
				if m.MountPath == ServiceAccountMountPath {
					mounted = true
					break
				}
			}
			if !mounted {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	if needed && !have {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// TokenVolumeSource is the projected source of the token volume.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](satoken.WarnOnlyExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}
}
