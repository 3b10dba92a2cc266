package admission

import (
	"context"
	"fmt"
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
//     downward API;
//   - a pod whose account does not exist is refused, 403 `pods "<name>" is
//     forbidden: error looking up service account <ns>/<account>:
//     serviceaccount "<account>" not found` (the serviceaccount controller
//     creates "default" in a new namespace a moment later; a ReplicaSet's
//     pod is created again by its controller's retry). Upstream also waits
//     up to about a second, re-reading, for a missing "default"; here the
//     read goes to etcd when the cache misses, without the wait;
//   - a pod without imagePullSecrets gets the account's.
//
// Not done: checking that the pod's secrets are the account's when the
// account says kubernetes.io/enforce-mountable-secrets, and refusing mirror
// pods that name an account or secrets.
type ServiceAccount struct {
	accounts registry.Reader
	// allowMissing admits pods whose account does not exist (AllowMissing).
	allowMissing bool
	// suffix makes the volume name's random part (tests fix it).
	suffix func() string
}

var _ Mutator = (*ServiceAccount)(nil)

// NewServiceAccount builds the plugin; r reads ServiceAccounts (nil: every
// account automounts and none is required).
func NewServiceAccount(r registry.Reader) *ServiceAccount {
	return &ServiceAccount{accounts: r, suffix: func() string { return utilrand.String(5) }}
}

// AllowMissing makes the plugin admit pods whose account does not exist
// (as before Skiff refused them), for test clusters that run no
// serviceaccount controller; it returns p.
func (p *ServiceAccount) AllowMissing(allow bool) *ServiceAccount {
	p.allowMissing = allow
	return p
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
	var sa *corev1.ServiceAccount
	if p.accounts != nil {
		sa = &corev1.ServiceAccount{}
		err := p.accounts.Get(ctx, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), a.Namespace, pod.Spec.ServiceAccountName, false, sa)
		switch {
		case apierrors.IsNotFound(err) && p.allowMissing:
			sa = nil
		case apierrors.IsNotFound(err):
			err = apierrors.NewNotFound(corev1.Resource("serviceaccount"), pod.Spec.ServiceAccountName)
			fallthrough
		case err != nil:
			name := a.Name
			if name == "" {
				name = pod.GenerateName
			}
			return apierrors.NewForbidden(a.Resource.GroupResource(), name,
				fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
		}
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa != nil && sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if sa != nil && len(pod.Spec.ImagePullSecrets) == 0 {
		for _, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
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
