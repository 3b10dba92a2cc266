package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/storage"
)

// admit runs the built-in admission plugins; webhooks of the security
// issue plug in here too. op is "create" or "update".
func (s *Server) admit(ctx context.Context, h *resourceHandler, obj, old runtime.Object, op string) error {
	if pod, ok := obj.(*corev1.Pod); ok && op == "create" {
		admitPodServiceAccount(pod)
		return s.admitPodPriority(ctx, pod)
	}
	return nil
}

// admitPodServiceAccount names the namespace's default ServiceAccount
// when a pod names none, as upstream's ServiceAccount admission does.
// Upstream also refuses the pod until that account exists and mounts its
// token; both wait for token issuance (the security work), see
// docs/architecture.md.
func admitPodServiceAccount(pod *corev1.Pod) {
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = pod.Spec.DeprecatedServiceAccount
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = "default"
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName
}

// admitPodPriority resolves a pod's priority from its PriorityClass (or the
// global default class), as upstream's Priority admission plugin does.
func (s *Server) admitPodPriority(ctx context.Context, pod *corev1.Pod) error {
	h := s.handlers[schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")]
	if h == nil {
		return nil
	}
	podsGR := schema.GroupResource{Resource: "pods"}
	var class *schedulingv1.PriorityClass
	if pod.Spec.PriorityClassName == "" {
		list := &schedulingv1.PriorityClassList{}
		if err := h.store.List(ctx, h.prefix(), storage.ListOptions{ResourceVersion: "0"}, list); err != nil {
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
		err := h.store.GetRV(ctx, h.key("", pod.Spec.PriorityClassName), "0", pc)
		if storage.IsNotFound(err) {
			err = h.store.Get(ctx, h.key("", pod.Spec.PriorityClassName), pc)
		}
		if storage.IsNotFound(err) {
			return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("no PriorityClass with name %s was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		class = pc
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != class.Value && pod.Spec.PriorityClassName != "" {
		return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, class.Value))
	}
	value := class.Value
	pod.Spec.Priority = &value
	pod.Spec.PriorityClassName = class.Name
	policy := corev1.PreemptLowerPriority
	if class.PreemptionPolicy != nil {
		policy = *class.PreemptionPolicy
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy && pod.Spec.PriorityClassName != "" {
		return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy))
	}
	pod.Spec.PreemptionPolicy = &policy
	return nil
}
