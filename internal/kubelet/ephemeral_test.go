package kubelet

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEphemeralContainer: an ephemeral container added to a running pod
// starts once in its sandbox, in the target's process namespace, shows in
// ephemeralContainerStatuses, and is not restarted when it exits.
func TestEphemeralContainer(t *testing.T) {
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) { o.Metrics = metrics })
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("web", "ran", running)
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{TargetContainerName: "app", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, Stdin: true, TTY: true}}}
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ephemeralState := func(p *corev1.Pod) corev1.ContainerState {
		if len(p.Status.EphemeralContainerStatuses) != 1 {
			return corev1.ContainerState{}
		}
		return p.Status.EphemeralContainerStatuses[0].State
	}
	p = h.waitPod("web", "ran its ephemeral container", func(p *corev1.Pod) bool { return ephemeralState(p).Running != nil })
	if !running(p) {
		t.Errorf("the pod's own container stopped: %+v", p.Status.ContainerStatuses)
	}
	var app, debugger *runtimeapi.ContainerStatus
	var debugCfg *runtimeapi.ContainerConfig
	for _, c := range h.containers(pod.UID) {
		switch c.Status.Metadata.Name {
		case "app":
			app = c.Status
		case "debugger":
			debugger, debugCfg = c.Status, c.Config
		}
	}
	if app == nil || debugger == nil {
		t.Fatalf("containers: app %v debugger %v", app, debugger)
	}
	ns := debugCfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app.Id {
		t.Errorf("debugger PID namespace %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), app.Id)
	}
	if !debugCfg.Stdin || !debugCfg.Tty || debugCfg.Labels[labelContainerType] != "ephemeral" {
		t.Errorf("debugger config stdin %v tty %v type %q", debugCfg.Stdin, debugCfg.Tty, debugCfg.Labels[labelContainerType])
	}

	// It exits: terminated, and not started again.
	if err := h.runtime.StopContainer(context.Background(), debugger.Id, 0); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "saw the ephemeral container exit", func(p *corev1.Pod) bool { return ephemeralState(p).Terminated != nil })
	// Two more syncs of the pod (a positive signal), then nothing may have
	// started it again.
	syncs := func() int { metrics.mu.Lock(); defer metrics.mu.Unlock(); return metrics.workers["sync"] }
	after := syncs()
	deadline := time.Now().Add(10 * time.Second)
	for syncs() < after+2 {
		if time.Now().After(deadline) {
			t.Fatal("the pod was not synced again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := 0
	for _, c := range h.containers(pod.UID) {
		if c.Status.Metadata.Name == "debugger" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d debugger instances, want 1 (ephemeral containers are not restarted)", n)
	}
}
