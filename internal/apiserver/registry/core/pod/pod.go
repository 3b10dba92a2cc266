// Package pod holds the registry rules of core/v1 pods: defaults (including
// the default tolerations upstream adds by admission), validation, the
// status and binding subresources, graceful deletion, field selectors and
// the table kubectl prints. Its DefaultPodSpec and ValidatePodSpec are
// shared with every workload that carries a pod template.
package pod

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubectl/pkg/util/qos"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 pods.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "pods",
		Kind:                "Pod",
		ListKind:            "PodList",
		SingularName:        "pod",
		ShortNames:          []string{"po"},
		Categories:          []string{"all"},
		Namespaced:          true,
		StoragePrefix:       "pods",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.Pod{} },
		NewList:             func() runtime.Object { return &corev1.PodList{} },
		Strategy:            Strategy{},
		Subresources: map[string]registry.Subresource{
			"status": registry.StatusSubresource(), "binding": registry.BindingSubresource(), "eviction": registry.EvictionSubresource(),
			"log": registry.ConnectSubresource("", "get"), "exec": registry.ConnectSubresource("PodExecOptions", "create", "get"), "attach": registry.ConnectSubresource("PodAttachOptions", "create", "get"), "portforward": registry.ConnectSubresource("PodPortForwardOptions", "create", "get"),
			"ephemeralcontainers": registry.EphemeralContainersSubresource(), "resize": registry.ResizeSubresource(), "proxy": registry.ProxySubresource("PodProxyOptions"),
		},
	}
}

// Strategy is the registry strategy of pods.
type Strategy struct {
	registry.DefaultStrategy
}

var (
	_ registry.Strategy        = Strategy{}
	_ registry.GracefulDeleter = Strategy{}
)

// PrepareForCreate resets the status to Pending with the pod's QoS class,
// sets generation 1, applies defaults and the default tolerations, and adds
// the SchedulingGated condition when the pod has scheduling gates.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	pod.Generation = 1
	DefaultPod(pod)
	applyAdmissionDefaults(pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	pod.Status.QOSClass = qos.ComputePodQOS(pod)
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type:    corev1.PodScheduled,
			Status:  corev1.ConditionFalse,
			Reason:  corev1.PodReasonSchedulingGated,
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		})
	}
}

// applyAdmissionDefaults does what upstream's always-on admission plugins
// do to a new pod: the default not-ready/unreachable tolerations and the
// priority of a pod without a priority class.
func applyAdmissionDefaults(pod *corev1.Pod) {
	AddDefaultTolerations(pod)
	if pod.Spec.Priority == nil && pod.Spec.PriorityClassName == "" {
		pod.Spec.Priority = ptr(int32(0))
	}
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = ptr(corev1.PreemptLowerPriority)
	}
}

// PrepareForUpdate keeps the old status, applies defaults (and the default
// tolerations) and bumps the generation when the spec changed. A pods/resize
// update (WithResizeUpdate) keeps only the resource changes.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	if isResizeUpdate(ctx) {
		dropNonResizeUpdates(pod, oldPod)
	}
	pod.Status = oldPod.Status
	DefaultPod(pod)
	// Upstream's DefaultTolerationSeconds admits updates too: an update
	// that replaces the tolerations gets the default ones back (and so
	// passes the rule that existing tolerations stay).
	AddDefaultTolerations(pod)
	if !apiequality.Semantic.DeepEqual(pod.Spec, oldPod.Spec) {
		pod.Generation = oldPod.Generation + 1
	} else {
		pod.Generation = oldPod.Generation
	}
}

// PrepareForStatusUpdate keeps the spec, owner references and deletion
// timestamp of the old pod, and the QoS class and observed generations when
// the client leaves them out.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	pod.Spec = oldPod.Spec
	syncIPs(&pod.Status)
	pod.DeletionTimestamp = oldPod.DeletionTimestamp
	pod.OwnerReferences = oldPod.OwnerReferences
	if pod.Status.QOSClass == "" {
		pod.Status.QOSClass = oldPod.Status.QOSClass
	}
	if pod.Status.ObservedGeneration == 0 {
		pod.Status.ObservedGeneration = oldPod.Status.ObservedGeneration
	}
	oldGens := map[corev1.PodConditionType][]int64{}
	for _, c := range oldPod.Status.Conditions {
		oldGens[c.Type] = append(oldGens[c.Type], c.ObservedGeneration)
	}
	for i, c := range pod.Status.Conditions {
		gens := oldGens[c.Type]
		if len(gens) == 0 {
			continue
		}
		oldGens[c.Type] = gens[1:]
		if c.ObservedGeneration == 0 {
			pod.Status.Conditions[i].ObservedGeneration = gens[0]
		}
	}
}

// syncIPs keeps the singular and plural IP fields of a status in step, as
// upstream's v1 conversion does: the plural list wins when both are set.
func syncIPs(s *corev1.PodStatus) {
	if len(s.PodIPs) == 0 && s.PodIP != "" {
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	if len(s.HostIPs) == 0 && s.HostIP != "" {
		s.HostIPs = []corev1.HostIP{{IP: s.HostIP}}
	}
	if len(s.HostIPs) > 0 {
		s.HostIP = s.HostIPs[0].IP
	}
}

// Validate checks a new pod.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks a pod update: only images, activeDeadlineSeconds,
// added tolerations and a few more may change; a pods/resize update
// (WithResizeUpdate) is checked by the resize rules instead.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if isResizeUpdate(ctx) {
		return validatePodResize(obj.(*corev1.Pod), old.(*corev1.Pod))
	}
	return append(validatePodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod)), ephemeralContainersUnchanged(ctx, obj.(*corev1.Pod), old.(*corev1.Pod))...)
}

// ValidateStatusUpdate checks an update through pods/status.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validatePodStatusUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}

// FieldSet returns the fields upstream lets a field selector name.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	pod := obj.(*corev1.Pod)
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             podIP,
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}

// CheckGracefulDelete picks the grace period of a pod delete: the one asked
// for, else spec.terminationGracePeriodSeconds; zero for a pod that is not
// scheduled or already terminal; a negative one becomes 1. It writes the
// choice into options.GracePeriodSeconds and reports whether it is above 0.
func (Strategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	grace := GracePeriod(pod, options.GracePeriodSeconds)
	options.GracePeriodSeconds = &grace
	return grace > 0
}

// GracePeriod returns the grace period for deleting pod given the one a
// client asked for (nil when none).
func GracePeriod(pod *corev1.Pod, requested *int64) int64 {
	var grace int64
	switch {
	case requested != nil:
		grace = *requested
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || isTerminal(pod.Status.Phase) {
		grace = 0
	}
	if grace < 0 {
		grace = 1
	}
	return grace
}

// ApplyBinding binds pod to the node named in b, as a POST to pods/binding
// does: it sets spec.nodeName, merges the binding's annotations, and adds
// the PodScheduled=True condition. It fails when the pod is already bound
// or is being deleted; the handler reports that as 409 Conflict.
func ApplyBinding(pod *corev1.Pod, b *corev1.Binding) error {
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return fmt.Errorf("binding target kind must be Node, not %q", b.Target.Kind)
	}
	if b.Target.Name == "" {
		return fmt.Errorf("binding target name must be set")
	}
	if pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name)
	}
	if pod.Spec.NodeName != "" {
		return fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName)
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		return fmt.Errorf("pod %s has non-empty .spec.schedulingGates", pod.Name)
	}
	pod.Spec.NodeName = b.Target.Name
	if len(b.Annotations) > 0 && pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for k, v := range b.Annotations {
		pod.Annotations[k] = v
	}
	setCondition(&pod.Status, corev1.PodCondition{
		Type:               corev1.PodScheduled,
		Status:             corev1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		ObservedGeneration: pod.Generation,
	})
	return nil
}

func setCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = status.Conditions[i].LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
