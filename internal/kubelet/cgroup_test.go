package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCgroupParent: pods' cgroups go under <cgroup-root>/kubepods by QoS
// class, so agents sharing a host (each with its own root) never meet.
func TestCgroupParent(t *testing.T) {
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod := func(res *corev1.ResourceRequirements) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if res != nil {
			p.Spec.Containers[0].Resources = *res
		}
		return p
	}
	for _, tc := range []struct {
		name, root string
		pod        *corev1.Pod
		want       string
	}{
		{"best effort, default root", "", pod(nil), "/kubepods/besteffort/podu1"},
		{"guaranteed, root /", "/", pod(&corev1.ResourceRequirements{Limits: limits, Requests: limits}), "/kubepods/podu1"},
		{"burstable, a second agent's root", "/skiff-node2", pod(&corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}), "/skiff-node2/kubepods/burstable/podu1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cgroupParent(tc.root, tc.pod); got != tc.want {
				t.Errorf("cgroupParent(%q) = %q, want %q", tc.root, got, tc.want)
			}
		})
	}
}
