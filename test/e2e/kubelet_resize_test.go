package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeletInPlaceResize resizes a running busybox pod as upstream's
// conformance tests "Pod InPlace Resize" do: `kubectl patch --subresource
// resize` raises c1's cpu and memory (resize policy NotRequired: no
// restart) and c2's memory (RestartContainer: one restart); once the
// pod's observedGeneration caught up, no resize condition is left and the
// pod is Ready, the containers' own cgroup files (read from inside, as the
// conformance helpers do) hold the new CFS quota, shares and memory limit,
// and the status reports them as resources and allocatedResources. Then
// client-go's UpdateResize rolls c1 back down.
func TestKubeletInPlaceResize(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-resize")
	ctx := context.Background()

	res := func(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	pod := busyboxPod(ns, "resize", c.image, "sh", "-c", "exec sleep 3600")
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	c1 := pod.Spec.Containers[0]
	c1.Name = "c1"
	c1.Resources = res("20m", "30m", "35Mi", "45Mi")
	c1.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}, {ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired}}
	c2 := *c1.DeepCopy()
	c2.Name = "c2"
	c2.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	// As the conformance test "6 containers": c3 has a memory request only
	// (gets a limit, its request goes down), c4 a cpu request only (gets
	// a limit).
	c3 := *c1.DeepCopy()
	c3.Name, c3.ResizePolicy = "c3", nil
	c3.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("35Mi")}}
	c4 := *c3.DeepCopy()
	c4.Name = "c4"
	c4.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}}
	pod.Spec.Containers = []corev1.Container{c1, c2, c3, c4}
	c.create(t, pod)
	p := c.waitPod(t, ns, "resize", 60*time.Second, "Running and Ready", podRunningReady)

	v2 := strings.TrimSpace(c.exec(t, ns, "resize", "c1", "sh", "-c", "test -e /sys/fs/cgroup/cgroup.controllers && echo v2 || echo v1")) == "v2"
	cgroup := func(container string) (quota, weight, memory string) {
		t.Helper()
		files := []string{"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.shares", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
		if v2 {
			files = []string{"/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu.weight", "/sys/fs/cgroup/memory.max"}
		}
		var vals []string
		for _, f := range files {
			vals = append(vals, strings.TrimSpace(c.exec(t, ns, "resize", container, "head", "-n", "1", f)))
		}
		return vals[0], vals[1], vals[2]
	}
	wantCgroup := func(container string, cpuReqMilli, cpuLimMilli, memLim int64) {
		t.Helper()
		quota, weight, mem := cgroup(container)
		wantQuota := strconv.FormatInt(cpuLimMilli*100, 10)
		if cpuLimMilli == 0 {
			wantQuota = "-1"
			if v2 {
				wantQuota = "max"
			}
		}
		if v2 {
			wantQuota += " 100000"
		}
		if quota != wantQuota || (memLim > 0 && mem != strconv.FormatInt(memLim, 10)) {
			t.Errorf("%s cgroup: cpu quota %q, memory limit %q; want %q, %d", container, quota, mem, wantQuota, memLim)
		}
		w, err := strconv.ParseInt(weight, 10, 64)
		switch {
		case err != nil || w <= 0:
			t.Errorf("%s cgroup cpu weight %q, want a positive number", container, weight)
		case !v2 && w != max(2, cpuReqMilli*1024/1000):
			t.Errorf("%s cgroup cpu.shares %d, want %d", container, w, max(2, cpuReqMilli*1024/1000))
		}
	}
	wantStatus := func(p *corev1.Pod, name string, want corev1.ResourceRequirements, restarts int32) {
		t.Helper()
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != name {
				continue
			}
			if cs.Resources == nil || !equalResources(*cs.Resources, want) || !equalList(cs.AllocatedResources, want.Requests) {
				t.Errorf("%s status resources %v allocated %v, want %v", name, cs.Resources, cs.AllocatedResources, want)
			}
			if cs.RestartCount != restarts {
				t.Errorf("%s restarted %d times, want %d", name, cs.RestartCount, restarts)
			}
		}
	}
	wantStatus(p, "c1", c1.Resources, 0)
	wantStatus(p, "c3", c3.Resources, 0)
	wantCgroup("c1", 20, 30, 45<<20)
	wantCgroup("c3", 0, 0, 0)
	wantCgroup("c4", 20, 0, 0)

	// Up, as `kubectl patch --subresource resize`.
	patch := `{"spec":{"containers":[` +
		`{"name":"c1","resources":{"requests":{"cpu":"25m","memory":"40Mi"},"limits":{"cpu":"35m","memory":"50Mi"}}},` +
		`{"name":"c2","resources":{"requests":{"memory":"40Mi"},"limits":{"memory":"50Mi"}}},` +
		`{"name":"c3","resources":{"requests":{"memory":"30Mi"},"limits":{"memory":"50Mi"}}},` +
		`{"name":"c4","resources":{"requests":{"cpu":"25m"},"limits":{"cpu":"35m"}}}]}}`
	kubectl(t, c.kubeconfig, "-n", ns, "patch", "pod", "resize", "--subresource", "resize", "--type", "strategic", "-p", patch)
	p = waitResized(t, c, ns, "resize")
	wantStatus(p, "c1", res("25m", "35m", "40Mi", "50Mi"), 0)
	wantStatus(p, "c2", res("20m", "30m", "40Mi", "50Mi"), 1)
	wantCgroup("c1", 25, 35, 50<<20)
	wantCgroup("c2", 20, 30, 50<<20)
	wantStatus(p, "c3", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("30Mi")},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("50Mi")}}, 0)
	wantCgroup("c3", 0, 0, 50<<20)
	wantStatus(p, "c4", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("25m")},
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("35m")}}, 0)
	wantCgroup("c4", 25, 35, 0)
	if p.Generation != 2 || p.Status.ObservedGeneration != 2 {
		t.Errorf("generation %d observed %d, want 2", p.Generation, p.Status.ObservedGeneration)
	}
	if !c.hasEvent(ns, "resize", "ResizeCompleted", "Pod resize completed") {
		t.Errorf("no ResizeCompleted event:\n%s", c.events(ns, "resize"))
	}

	// Down again through client-go's UpdateResize.
	p.Spec.Containers[0].Resources = res("15m", "25m", "30Mi", "40Mi")
	if _, err := c.client.CoreV1().Pods(ns).UpdateResize(ctx, "resize", p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateResize: %v", err)
	}
	p = waitResized(t, c, ns, "resize")
	wantStatus(p, "c1", res("15m", "25m", "30Mi", "40Mi"), 0)
	wantCgroup("c1", 15, 25, 40<<20)
}

// waitResized waits as upstream's WaitForPodResizeActuation: the
// observed generation caught up, no PodResizePending or
// PodResizeInProgress condition, the pod Ready.
func waitResized(t *testing.T, c *agentCluster, ns, name string) *corev1.Pod {
	t.Helper()
	return c.waitPod(t, ns, name, 90*time.Second, "resized", func(p *corev1.Pod) bool {
		if p.Status.ObservedGeneration < p.Generation {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodResizePending || cond.Type == corev1.PodResizeInProgress {
				return false
			}
		}
		return podRunningReady(p)
	})
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if w, ok := b[n]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	return equalList(a.Requests, b.Requests) && equalList(a.Limits, b.Limits)
}

// exec runs a command in a container with kubectl exec.
func (c *agentCluster) exec(t *testing.T, ns, pod, container string, cmd ...string) string {
	t.Helper()
	return kubectl(t, c.kubeconfig, append([]string{"-n", ns, "exec", pod, "-c", container, "--"}, cmd...)...)
}
