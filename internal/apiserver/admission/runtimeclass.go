package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var runtimeClassesGVR = nodev1.SchemeGroupVersion.WithResource("runtimeclasses")

// RuntimeClass applies a new pod's RuntimeClass, as upstream's plugin of
// that name does: the class's overhead becomes spec.overhead (a
// different overhead set by hand is refused), its scheduling
// nodeSelector is merged into the pod's (a conflicting value is refused)
// and its tolerations are added. A pod naming a class that does not
// exist, or setting an overhead without a class that defines one, is
// refused (403).
type RuntimeClass struct{ r registry.Reader }

var (
	_ Mutator   = RuntimeClass{}
	_ Validator = RuntimeClass{}
)

// NewRuntimeClass reads RuntimeClasses through r.
func NewRuntimeClass(r registry.Reader) RuntimeClass { return RuntimeClass{r: r} }

// Name is the upstream name.
func (RuntimeClass) Name() string { return "RuntimeClass" }

// Handles creates.
func (RuntimeClass) Handles(op Operation) bool { return op == Create }

func (rc RuntimeClass) class(ctx context.Context, a *Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Subresource != "" {
		return nil, nil, nil
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	c := &nodev1.RuntimeClass{}
	err := rc.r.Get(ctx, runtimeClassesGVR, "", *pod.Spec.RuntimeClassName, false, c)
	if apierrors.IsNotFound(err) {
		return pod, nil, forbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", *pod.Spec.RuntimeClassName))
	}
	if err != nil {
		return pod, nil, apierrors.NewInternalError(err)
	}
	return pod, c, nil
}

// Admit sets the overhead and merges the scheduling rules.
func (rc RuntimeClass) Admit(ctx context.Context, a *Attributes) error {
	pod, c, err := rc.class(ctx, a)
	if err != nil || pod == nil || c == nil {
		return err
	}
	if c.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(c.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		pod.Spec.Overhead = c.Overhead.PodFixed.DeepCopy()
	}
	if c.Scheduling == nil {
		return nil
	}
	keys := make([]string, 0, len(c.Scheduling.NodeSelector))
	for k := range c.Scheduling.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want := c.Scheduling.NodeSelector[k]
		if have, ok := pod.Spec.NodeSelector[k]; ok && have != want {
			return forbidden(a, fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, want, k, have))
		}
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		pod.Spec.NodeSelector[k] = want
	}
	for _, t := range c.Scheduling.Tolerations {
		if !hasToleration(pod.Spec.Tolerations, t) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
		}
	}
	return nil
}

// Validate checks the overhead matches the class's.
func (rc RuntimeClass) Validate(ctx context.Context, a *Attributes) error {
	pod, c, err := rc.class(ctx, a)
	if err != nil || pod == nil {
		return err
	}
	if c != nil && c.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(c.Overhead.PodFixed, pod.Spec.Overhead) {
			return forbidden(a, errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"))
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return forbidden(a, errors.New("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"))
	}
	return nil
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if apiequality.Semantic.DeepEqual(x, t) {
			return true
		}
	}
	return false
}
