package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// ServiceAccount names the namespace's "default" ServiceAccount in a pod
// that names none, as upstream's plugin of that name does. Upstream also
// refuses the pod until that account exists and mounts its token; both
// wait for token issuance (see docs/architecture.md, Admission).
type ServiceAccount struct{}

var _ Mutator = ServiceAccount{}

// NewServiceAccount builds the plugin.
func NewServiceAccount() ServiceAccount { return ServiceAccount{} }

// Name is the upstream name.
func (ServiceAccount) Name() string { return "ServiceAccount" }

// Handles pod creates.
func (ServiceAccount) Handles(op Operation) bool { return op == Create }

// Admit fills in spec.serviceAccountName (and its deprecated twin).
func (ServiceAccount) Admit(ctx context.Context, a *Attributes) error {
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
	return nil
}
