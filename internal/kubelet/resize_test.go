package kubelet

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestResizeRunningPod: a spec resize reaches the running container
// through UpdateContainerResources (no restart), the status shows the new
// resources and allocation, a memory change under RestartContainer
// restarts the container with the new limit, and a resize beyond the node
// stays pending (Deferred) with the containers left as they were.
func TestResizeRunningPod(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pod := bound("web", corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("35Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30m"), corev1.ResourceMemory: resource.MustParse("45Mi")},
	}
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pod.Generation = 1
	if _, err := h.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("web", "ran", running)
	linux := func() *runtimeapi.LinuxContainerResources {
		for _, c := range h.containers(pod.UID) {
			if c.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return c.Status.Resources.GetLinux()
			}
		}
		return nil
	}
	if l := linux(); l.CpuQuota != 3000 || l.CpuShares != 20 || l.MemoryLimitInBytes != 45<<20 {
		t.Fatalf("created with %v", l)
	}

	resize := func(p *corev1.Pod, gen int64, mutate func(r *corev1.ResourceRequirements)) *corev1.Pod {
		t.Helper()
		p = p.DeepCopy()
		mutate(&p.Spec.Containers[0].Resources)
		p.Generation = gen
		p, err := h.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// cpu: in place.
	p = resize(p, 2, func(r *corev1.ResourceRequirements) {
		r.Requests[corev1.ResourceCPU] = resource.MustParse("25m")
		r.Limits[corev1.ResourceCPU] = resource.MustParse("35m")
	})
	p = h.waitPod("web", "resized", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.ObservedGeneration == 2 && len(cs) == 1 && cs[0].Resources != nil && cs[0].Resources.Limits.Cpu().MilliValue() == 35
	})
	cs := p.Status.ContainerStatuses[0]
	if l := linux(); l.CpuQuota != 3500 || l.CpuShares != 25 || l.MemoryLimitInBytes != 45<<20 {
		t.Errorf("after the cpu resize the runtime has %v", l)
	}
	if cs.RestartCount != 0 || cs.AllocatedResources.Cpu().MilliValue() != 25 || cs.Resources.Requests.Cpu().MilliValue() != 25 {
		t.Errorf("status %+v: want no restart, 25m allocated and reported", cs)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizeInProgress || c.Type == corev1.PodResizePending {
			t.Errorf("condition %v left after the resize", c)
		}
	}

	// memory: its policy restarts the container.
	p = resize(p, 3, func(r *corev1.ResourceRequirements) { r.Limits[corev1.ResourceMemory] = resource.MustParse("50Mi") })
	p = h.waitPod("web", "restarted with the new memory limit", func(p *corev1.Pod) bool {
		return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1 && p.Status.ObservedGeneration == 3
	})
	if l := linux(); l.MemoryLimitInBytes != 50<<20 {
		t.Errorf("after the memory resize the runtime has %v", l)
	}
	if got := p.Status.ContainerStatuses[0].Resources.Limits.Memory().String(); got != "50Mi" {
		t.Errorf("status memory limit %s, want 50Mi", got)
	}

	// Beyond the node: pending, nothing changes.
	p = resize(p, 4, func(r *corev1.ResourceRequirements) {
		r.Requests[corev1.ResourceCPU] = resource.MustParse("100000")
		r.Limits[corev1.ResourceCPU] = resource.MustParse("100000")
	})
	p = h.waitPod("web", "pending", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonDeferred && c.ObservedGeneration == 4 {
				return true
			}
		}
		return false
	})
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending && !strings.HasPrefix(c.Message, "Node didn't have enough resource: cpu, requested: 100000000, used: ") {
			t.Errorf("pending message %q", c.Message)
		}
	}
	if l := linux(); l.CpuQuota != 3500 {
		t.Errorf("a pending resize reached the runtime: %v", l)
	}
	if got := p.Status.ContainerStatuses[0].AllocatedResources.Cpu().MilliValue(); got != 25 {
		t.Errorf("allocated cpu %dm while pending, want 25m", got)
	}
	// The allocation is kept on disk for an agent restart.
	data, err := os.ReadFile(allocationsPath(h.k.opts.RootDir))
	if err != nil || !strings.Contains(string(data), `"50Mi"`) || !strings.Contains(string(data), `"25m"`) {
		t.Errorf("allocations file %s (%v): want the accepted resources", data, err)
	}
}
