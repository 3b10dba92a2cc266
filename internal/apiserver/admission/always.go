package admission

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AlwaysAdmit is upstream's deprecated AlwaysAdmit: it admits everything
// (a validator that never refuses).
type AlwaysAdmit struct{}

// Name is the upstream name.
func (AlwaysAdmit) Name() string { return "AlwaysAdmit" }

// Handles every operation.
func (AlwaysAdmit) Handles(Operation) bool { return true }

// Validate admits.
func (AlwaysAdmit) Validate(context.Context, *Attributes) error { return nil }

// AlwaysDeny is upstream's AlwaysDeny (for tests): every write is refused
// with "admission control is denying all modifications".
type AlwaysDeny struct{}

// Name is the upstream name.
func (AlwaysDeny) Name() string { return "AlwaysDeny" }

// Handles every operation.
func (AlwaysDeny) Handles(Operation) bool { return true }

// Validate refuses.
func (AlwaysDeny) Validate(_ context.Context, a *Attributes) error {
	return forbidden(a, errors.New("admission control is denying all modifications"))
}

// AlwaysPullImages is upstream's AlwaysPullImages: every container of a
// new pod, and of an update that brings a new image, gets
// imagePullPolicy Always (so a pod can only use an image its pull secrets
// may pull, not one another pod left on the node); the validating phase
// refuses pods where it is not.
type AlwaysPullImages struct{}

var (
	_ Mutator   = AlwaysPullImages{}
	_ Validator = AlwaysPullImages{}
)

// Name is the upstream name.
func (AlwaysPullImages) Name() string { return "AlwaysPullImages" }

// Handles creates and updates.
func (AlwaysPullImages) Handles(op Operation) bool { return op == Create || op == Update }

// pod returns the pod of a request the plugin acts on (the pod itself or
// its ephemeralcontainers subresource), nil otherwise.
func (AlwaysPullImages) pod(a *Attributes) *corev1.Pod {
	if a.Resource.Group != "" || a.Resource.Resource != "pods" || (a.Subresource != "" && a.Subresource != "ephemeralcontainers") {
		return nil
	}
	pod, _ := a.Object.(*corev1.Pod)
	if pod == nil {
		return nil
	}
	if old, ok := a.OldObject.(*corev1.Pod); ok && a.Operation == Update && !newImages(pod, old) {
		return nil
	}
	return pod
}

// Admit sets imagePullPolicy Always.
func (p AlwaysPullImages) Admit(_ context.Context, a *Attributes) error {
	if pod := p.pod(a); pod != nil {
		visitPullPolicies(pod, func(_ *field.Path, policy *corev1.PullPolicy) { *policy = corev1.PullAlways })
	}
	return nil
}

// Validate refuses a pod whose containers do not pull always.
func (p AlwaysPullImages) Validate(_ context.Context, a *Attributes) error {
	pod := p.pod(a)
	if pod == nil {
		return nil
	}
	var errs field.ErrorList
	visitPullPolicies(pod, func(path *field.Path, policy *corev1.PullPolicy) {
		if *policy != corev1.PullAlways {
			errs = append(errs, field.NotSupported(path, *policy, []string{string(corev1.PullAlways)}))
		}
	})
	if len(errs) > 0 {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, fmt.Errorf("%s", errs.ToAggregate().Error()))
	}
	return nil
}

func visitPullPolicies(pod *corev1.Pod, f func(*field.Path, *corev1.PullPolicy)) {
	spec := field.NewPath("spec")
	for i := range pod.Spec.InitContainers {
		f(spec.Child("initContainers").Index(i).Child("imagePullPolicy"), &pod.Spec.InitContainers[i].ImagePullPolicy)
	}
	for i := range pod.Spec.Containers {
		f(spec.Child("containers").Index(i).Child("imagePullPolicy"), &pod.Spec.Containers[i].ImagePullPolicy)
	}
	for i := range pod.Spec.EphemeralContainers {
		f(spec.Child("ephemeralContainers").Index(i).Child("imagePullPolicy"), &pod.Spec.EphemeralContainers[i].ImagePullPolicy)
	}
}

// newImages says whether pod names an image old does not.
func newImages(pod, old *corev1.Pod) bool {
	have := map[string]bool{}
	for _, c := range old.Spec.InitContainers {
		have[c.Image] = true
	}
	for _, c := range old.Spec.Containers {
		have[c.Image] = true
	}
	for _, c := range old.Spec.EphemeralContainers {
		have[c.Image] = true
	}
	found := false
	visit := func(image string) {
		if !have[image] {
			found = true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Image)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Image)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Image)
	}
	return found
}
