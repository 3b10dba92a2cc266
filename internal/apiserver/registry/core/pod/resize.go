package pod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubectl/pkg/util/qos"
)

type resizeUpdateKey struct{}

// WithResizeUpdate marks ctx as a pods/resize update: the pod strategy
// then keeps only the resource changes (PrepareForUpdate) and checks them
// with the resize rules instead of the update rules (ValidateUpdate), as
// upstream's podResizeStrategy does.
func WithResizeUpdate(ctx context.Context) context.Context {
	return context.WithValue(ctx, resizeUpdateKey{}, true)
}

func isResizeUpdate(ctx context.Context) bool {
	marked, _ := ctx.Value(resizeUpdateKey{}).(bool)
	return marked
}

// dropNonResizeUpdates returns the old pod with only what a resize may
// change taken from pod: the resources and resizePolicy of each container
// and init container, and the pod-level resources. Labels, annotations,
// finalizers, owner references and the status stay the old ones. A
// request that adds, removes, renames or reorders containers is returned
// as it is, for validation to refuse.
func dropNonResizeUpdates(pod, old *corev1.Pod) {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return
	}
	containers, ok1 := takeResources(pod.Spec.Containers, old.Spec.Containers)
	initContainers, ok2 := takeResources(pod.Spec.InitContainers, old.Spec.InitContainers)
	if !ok1 || !ok2 {
		return
	}
	podResources := pod.Spec.Resources
	pod.Spec = *old.Spec.DeepCopy()
	pod.Spec.Containers, pod.Spec.InitContainers = containers, initContainers
	pod.Spec.Resources = podResources
	if pod.Spec.Resources == nil && old.Spec.Resources != nil {
		// A client unaware of pod-level resources keeps them.
		pod.Spec.Resources = old.Spec.Resources.DeepCopy()
	}
	pod.Status = old.Status
	pod.Labels, pod.Annotations = old.Labels, old.Annotations
	pod.Finalizers, pod.OwnerReferences = old.Finalizers, old.OwnerReferences
}

// takeResources is old's containers with the resources and resize policy
// of want's; false when a container was renamed or reordered.
func takeResources(want, old []corev1.Container) ([]corev1.Container, bool) {
	if len(old) == 0 {
		return nil, true
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		if want[i].Name != old[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources = *want[i].Resources.DeepCopy()
		out[i].ResizePolicy = append([]corev1.ContainerResizePolicy(nil), want[i].ResizePolicy...)
	}
	return out, true
}

// validatePodResize checks a pods/resize update as upstream's
// ValidatePodResize (v1.37): the new spec must be valid; static and
// Windows pods cannot be resized; the QoS class may not change; containers
// may not be added, removed, renamed or reordered; requests and limits may
// be changed or added but not removed, and only cpu and memory ones; init
// containers may be resized (upstream's InPlacePodVerticalScalingInitContainers
// is GA) but one that is not a sidecar not when its resize policy says
// RestartContainer; nothing else in the spec may change.
func validatePodResize(pod, old *corev1.Pod) field.ErrorList {
	if _, ok := old.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	specPath := field.NewPath("spec")
	errs := allowExistingInitRestart(ValidatePodSpec(&pod.Spec, specPath), old)

	oldQOS := old.Status.QOSClass
	if oldQOS == "" {
		oldQOS = qos.ComputePodQOS(old)
	}
	if qos.ComputePodQOS(pod) != oldQOS {
		errs = append(errs, field.Invalid(specPath, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(old) {
		errs = append(errs, field.Forbidden(specPath, "Pod running on node without support for resize"))
	}

	// The rest compares containers index by index.
	var orderErrs field.ErrorList
	if len(pod.Spec.Containers) != len(old.Spec.Containers) {
		orderErrs = append(orderErrs, field.Forbidden(specPath.Child("containers"), "containers may not be added or removed on resize"))
	} else {
		for i := range old.Spec.Containers {
			if pod.Spec.Containers[i].Name != old.Spec.Containers[i].Name {
				orderErrs = append(orderErrs, field.Forbidden(specPath.Child("containers").Index(i).Child("name"), "containers may not be renamed or reordered on resize"))
			}
		}
	}
	if len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		orderErrs = append(orderErrs, field.Forbidden(specPath.Child("initContainers"), "initContainers may not be added or removed on resize"))
	} else {
		for i := range old.Spec.InitContainers {
			if pod.Spec.InitContainers[i].Name != old.Spec.InitContainers[i].Name {
				orderErrs = append(orderErrs, field.Forbidden(specPath.Child("initContainers").Index(i).Child("name"), "initContainers may not be renamed or reordered on resize"))
			}
		}
	}
	if len(orderErrs) > 0 {
		return append(errs, orderErrs...)
	}

	if podLevelResourcesSet(old) || podLevelResourcesSet(pod) {
		errs = append(errs, validatePodLevelResize(pod, old, specPath)...)
	}

	for i := range old.Spec.InitContainers {
		errs = append(errs, resourcesNotRemoved(&pod.Spec.InitContainers[i].Resources, &old.Spec.InitContainers[i].Resources, specPath.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i := range old.Spec.Containers {
		errs = append(errs, resourcesNotRemoved(&pod.Spec.Containers[i].Resources, &old.Spec.Containers[i].Resources, specPath.Child("containers").Index(i).Child("resources"))...)
	}

	// Only cpu and memory may change, for containers and init containers.
	masked := pod.Spec.DeepCopy()
	for i := range masked.Containers {
		c := &masked.Containers[i]
		keepOldCPUMemory(c, &old.Spec.Containers[i])
		if !apiequality.Semantic.DeepEqual(*c, old.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
		}
	}
	for i := range masked.InitContainers {
		c := &masked.InitContainers[i]
		changed := !apiequality.Semantic.DeepEqual(pod.Spec.InitContainers[i], old.Spec.InitContainers[i])
		keepOldCPUMemory(c, &old.Spec.InitContainers[i])
		if !apiequality.Semantic.DeepEqual(*c, old.Spec.InitContainers[i]) {
			errs = append(errs, field.Forbidden(specPath.Child("initContainers").Index(i), "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		if changed && !isSidecar(c) {
			for _, p := range c.ResizePolicy {
				if p.RestartPolicy == corev1.RestartContainer {
					errs = append(errs, field.Forbidden(specPath.Child("initContainers").Index(i), "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
				}
			}
		}
	}
	if !apiequality.Semantic.DeepEqual(pod.Spec.Volumes, old.Spec.Volumes) {
		errs = append(errs, field.Forbidden(specPath.Child("volumes"), "volumes are immutable on resize when InPlacePodVerticalScalingMemoryBackedVolumes feature gate is disabled"))
	}
	if len(errs) > 0 {
		return errs
	}
	masked.Resources = old.Spec.Resources // checked above
	if !apiequality.Semantic.DeepEqual(*masked, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable"))
	}
	return errs
}

// resizeSupported is upstream's isPodResizeRequestSupported: a pod whose
// first running container reports no resources in its status runs on a
// node that cannot resize.
func resizeSupported(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

func podLevelResourcesSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests)+len(pod.Spec.Resources.Limits) > 0
}

// validatePodLevelResize checks a change of spec.resources: none removed,
// only cpu and memory changed.
func validatePodLevelResize(pod, old *corev1.Pod, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if old.Spec.Resources != nil && pod.Spec.Resources == nil {
		return field.ErrorList{field.Forbidden(specPath.Child("resources"), "pod-level resources cannot be removed")}
	}
	if old.Spec.Resources != nil {
		if removed(pod.Spec.Resources.Requests, old.Spec.Resources.Requests) {
			errs = append(errs, field.Forbidden(specPath.Child("resources").Child("requests"), "pod-level resource requests cannot be removed"))
		}
		if removed(pod.Spec.Resources.Limits, old.Spec.Resources.Limits) {
			errs = append(errs, field.Forbidden(specPath.Child("resources").Child("limits"), "pod-level resource limits cannot be removed"))
		}
	}
	var oldRes corev1.ResourceRequirements
	if old.Spec.Resources != nil {
		oldRes = *old.Spec.Resources
	}
	newRes := pod.Spec.Resources.DeepCopy()
	newRes.Requests = withOldCPUMemory(newRes.Requests, oldRes.Requests)
	newRes.Limits = withOldCPUMemory(newRes.Limits, oldRes.Limits)
	var masked *corev1.ResourceRequirements = newRes
	if old.Spec.Resources == nil && len(newRes.Requests) == 0 && len(newRes.Limits) == 0 && len(newRes.Claims) == 0 {
		masked = nil
	}
	if !apiequality.Semantic.DeepEqual(masked, old.Spec.Resources) {
		errs = append(errs, field.Forbidden(specPath, "only cpu and memory resources are mutable at pod-level"))
	}
	return errs
}

func resourcesNotRemoved(r, old *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if removed(r.Requests, old.Requests) {
		errs = append(errs, field.Forbidden(path.Child("requests"), "resource requests cannot be removed"))
	}
	if removed(r.Limits, old.Limits) {
		errs = append(errs, field.Forbidden(path.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func removed(list, old corev1.ResourceList) bool {
	for name := range old {
		if _, ok := list[name]; !ok {
			return true
		}
	}
	return false
}

// keepOldCPUMemory puts old's cpu and memory requests and limits back into
// c, so that c differs from old only by what a resize may not change.
func keepOldCPUMemory(c, old *corev1.Container) {
	c.Resources.Limits = withOldCPUMemory(c.Resources.Limits, old.Resources.Limits)
	c.Resources.Requests = withOldCPUMemory(c.Resources.Requests, old.Resources.Requests)
}

func withOldCPUMemory(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for name, q := range list {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out[name] = q
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

var (
	resizeResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	resizePolicies  = []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}
)

// validateResizePolicy checks a container's resizePolicy as upstream:
// each of cpu and memory at most once, NotRequired or RestartContainer,
// and only NotRequired in a pod whose restartPolicy is Never.
func validateResizePolicy(policies []corev1.ContainerResizePolicy, podRestart corev1.RestartPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.ResourceName]()
	for i, p := range policies {
		if seen.Has(p.ResourceName) {
			errs = append(errs, field.Duplicate(path.Index(i), p.ResourceName))
		}
		seen.Insert(p.ResourceName)
		switch p.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, p.ResourceName, resizeResources))
		}
		switch p.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, p.RestartPolicy, resizePolicies))
		}
		if podRestart == corev1.RestartPolicyNever && p.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(path, p.RestartPolicy, "must be 'NotRequired' when pod `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

// allowExistingInitRestart drops the errors about a RestartContainer
// resize policy of a non-sidecar init container that the old pod already
// had (upstream's AllowExistingRestartContainerForNonSidecarInitContainer:
// such pods were valid before v1.37).
func allowExistingInitRestart(errs field.ErrorList, old *corev1.Pod) field.ErrorList {
	had := sets.New[string]()
	for i, c := range old.Spec.InitContainers {
		for j, p := range c.ResizePolicy {
			if p.RestartPolicy == corev1.RestartContainer {
				had.Insert(field.NewPath("spec", "initContainers").Index(i).Child("resizePolicy").Index(j).Child("restartPolicy").String())
			}
		}
	}
	if had.Len() == 0 {
		return errs
	}
	var out field.ErrorList
	for _, e := range errs {
		if e.Type == field.ErrorTypeInvalid && had.Has(e.Field) {
			continue
		}
		out = append(out, e)
	}
	return out
}
