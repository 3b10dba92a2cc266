package eviction

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signals of local ephemeral storage limit evictions (upstream's
// kubelet_evictions labels for them).
const (
	SignalEmptyDirFsLimit           = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// LocalUsage is what a pod uses of the node's disk: each disk-backed
// emptyDir volume by name, each container's writable layer plus logs by
// name, and the pod's total (containers, emptyDirs, its own files).
type LocalUsage struct {
	Volumes    map[string]int64
	Containers map[string]int64
	Total      int64
}

// LocalStorageViolation reports, as upstream's local storage eviction,
// the first limit the pod's usage breaks: a disk-backed emptyDir over its
// sizeLimit, the pod over the sum of its containers' ephemeral-storage
// limits, or a container (regular or sidecar) over its own; with the
// eviction message and the signal it is counted under.
func LocalStorageViolation(pod *corev1.Pod, u LocalUsage) (message, signal string, ok bool) {
	for _, v := range pod.Spec.Volumes {
		ed := v.EmptyDir
		if ed == nil || ed.Medium == corev1.StorageMediumMemory || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		if used, found := u.Volumes[v.Name]; found && used > ed.SizeLimit.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, ed.SizeLimit.String()), SignalEmptyDirFsLimit, true
		}
	}
	var limits []corev1.Container
	limits = append(limits, pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			limits = append(limits, c)
		}
	}
	total, limited := resource.Quantity{Format: resource.BinarySI}, false
	for _, c := range limits {
		if l, found := c.Resources.Limits[corev1.ResourceEphemeralStorage]; found {
			total.Add(l)
			limited = true
		}
	}
	if limited && u.Total > total.Value() {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", total.String()), SignalEphemeralPodFsLimit, true
	}
	for _, c := range limits {
		l, found := c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if !found || l.IsZero() {
			continue
		}
		if used, seen := u.Containers[c.Name]; seen && used > l.Value() {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.Name, l.String()), SignalEphemeralContainerFsLimit, true
		}
	}
	return "", "", false
}

// HasLocalStorageLimits reports whether a pod has any limit
// LocalStorageViolation checks (so usage need not be measured otherwise).
func HasLocalStorageLimits(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if ed := v.EmptyDir; ed != nil && ed.Medium != corev1.StorageMediumMemory && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			if _, found := c.Resources.Limits[corev1.ResourceEphemeralStorage]; found {
				return true
			}
		}
	}
	return false
}
