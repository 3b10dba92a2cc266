package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var priorityClassesGVR = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")

// Priority resolves a new pod's priority and preemption policy from its
// PriorityClass, or from the global default class when it names none, as
// upstream's plugin of that name does.
type Priority struct {
	classes registry.Reader
}

var _ Mutator = Priority{}

// NewPriority reads PriorityClasses through r.
func NewPriority(r registry.Reader) Priority { return Priority{classes: r} }

// Name is the upstream name.
func (Priority) Name() string { return "Priority" }

// Handles pod creates.
func (Priority) Handles(op Operation) bool { return op == Create }

// Admit sets spec.priority, spec.priorityClassName and
// spec.preemptionPolicy, refusing values that contradict the class.
func (p Priority) Admit(ctx context.Context, a *Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || a.Subresource != "" || p.classes == nil {
		return nil
	}
	gr := a.Resource.GroupResource()
	var class *schedulingv1.PriorityClass
	if pod.Spec.PriorityClassName == "" {
		list := &schedulingv1.PriorityClassList{}
		if err := p.classes.List(ctx, priorityClassesGVR, "", false, list); err != nil {
			return apierrors.NewInternalError(err)
		}
		for i := range list.Items {
			if list.Items[i].GlobalDefault && (class == nil || list.Items[i].Value < class.Value) {
				class = &list.Items[i]
			}
		}
		if class == nil {
			return nil // priority 0, set by the pod defaults
		}
		if pod.Spec.Priority != nil && *pod.Spec.Priority != 0 {
			return nil
		}
	} else {
		pc := &schedulingv1.PriorityClass{}
		err := p.classes.Get(ctx, priorityClassesGVR, "", pod.Spec.PriorityClassName, false, pc)
		if apierrors.IsNotFound(err) {
			return apierrors.NewForbidden(gr, pod.Name, fmt.Errorf("no PriorityClass with name %s was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		class = pc
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != class.Value && pod.Spec.PriorityClassName != "" {
		return apierrors.NewForbidden(gr, pod.Name, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, class.Value))
	}
	value := class.Value
	pod.Spec.Priority = &value
	pod.Spec.PriorityClassName = class.Name
	policy := corev1.PreemptLowerPriority
	if class.PreemptionPolicy != nil {
		policy = *class.PreemptionPolicy
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy && pod.Spec.PriorityClassName != "" {
		return apierrors.NewForbidden(gr, pod.Name, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy))
	}
	pod.Spec.PreemptionPolicy = &policy
	return nil
}
