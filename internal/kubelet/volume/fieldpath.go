package volume

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FormatMap renders labels or annotations as the downward API does: one
// key="value" line per entry, sorted by key.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%v=%s", k, strconv.Quote(m[k]))
	}
	return b.String()
}

// ObjectField resolves the metadata field paths the downward API volume
// and env vars share.
func ObjectField(pod *corev1.Pod, path string) (string, error) {
	if strings.HasPrefix(path, "metadata.labels[") || strings.HasPrefix(path, "metadata.annotations[") {
		open := strings.Index(path, "[")
		key := strings.Trim(path[open+1:len(path)-1], `'"`)
		if strings.HasPrefix(path, "metadata.labels") {
			return pod.Labels[key], nil
		}
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// ResourceField resolves a resourceFieldRef: the container's request or
// limit (a missing limit is the node's allocatable), divided by the divisor
// and rounded up.
func ResourceField(pod *corev1.Pod, containerName string, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = containerName
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			c = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			c = &pod.Spec.InitContainers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("container %q not found", name)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	var ok bool
	parts := strings.SplitN(ref.Resource, ".", 2)
	if len(parts) != 2 {
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	res := corev1.ResourceName(parts[1])
	switch parts[0] {
	case "limits":
		q, ok = c.Resources.Limits[res]
		if !ok {
			q, ok = allocatable[res]
		}
	case "requests":
		q, ok = c.Resources.Requests[res]
		if !ok {
			q = resource.Quantity{}
			ok = true
		}
	}
	if !ok {
		return "0", nil
	}
	if res == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
