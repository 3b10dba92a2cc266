package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFits(t *testing.T) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods: resource.MustParse("2")}
	withReq := func(cpu, mem string) *corev1.Pod {
		req := corev1.ResourceList{}
		if cpu != "" {
			req[corev1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			req[corev1.ResourceMemory] = resource.MustParse(mem)
		}
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}}}}
	}
	withPort := func(port int32, ip string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{ContainerPort: port, HostPort: port, HostIP: ip, Protocol: corev1.ProtocolTCP}}}}}}
	}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		others      []*corev1.Pod
		reason, msg string
	}{
		{"fits", withReq("1", "100Mi"), []*corev1.Pod{withReq("500m", "")}, "", ""},
		{"too much cpu", withReq("3", ""), nil, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{"cpu taken by others", withReq("1500m", ""), []*corev1.Pod{withReq("1", "")}, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{"too much memory", withReq("", "2Gi"), nil, "OutOfmemory", "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"},
		{"too many pods", withReq("", ""), []*corev1.Pod{withReq("", ""), withReq("", "")}, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"},
		{"host port held", withPort(21017, ""), []*corev1.Pod{withPort(21017, "")}, "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"host port held on one address", withPort(21017, "10.0.0.1"), []*corev1.Pod{withPort(21017, "")}, "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"host port on other addresses", withPort(21017, "10.0.0.1"), []*corev1.Pod{withPort(21017, "10.0.0.2")}, "", ""},
		{"other host port", withPort(21017, ""), []*corev1.Pod{withPort(21018, "")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := fits(tc.pod, tc.others, alloc)
			if reason != tc.reason || msg != tc.msg {
				t.Errorf("got %q %q, want %q %q", reason, msg, tc.reason, tc.msg)
			}
		})
	}
}
