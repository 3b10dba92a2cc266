package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
	"github.com/skiff-sh/skiff/internal/kubelet/prober"
)

func pod(policy corev1.RestartPolicy, inits []corev1.Container, names ...string) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy, InitContainers: inits}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func sidecar(name string) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{Name: name, Image: "busybox", RestartPolicy: &always}
}

func withEphemeral(p *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox"}})
	}
	return p
}

var sb = podstate.Sandbox{ID: "sb1", Ready: true, IPs: []string{"10.42.0.5"}}

func running(name string) podstate.Container {
	return podstate.Container{ID: name + "-id", Name: name, SandboxID: "sb1", State: podstate.Running}
}

func exited(name string, code int32) podstate.Container {
	return podstate.Container{ID: name + "-id", Name: name, SandboxID: "sb1", State: podstate.Exited, ExitCode: code,
		FinishedAt: time.Unix(100, 0)}
}

func TestCompute(t *testing.T) {
	inits := []corev1.Container{{Name: "i0"}, {Name: "i1"}}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		state  *podstate.Pod
		probes ProbeLookup
		want   Actions
	}{{
		name: "new pod: sandbox, then every container",
		pod:  pod(corev1.RestartPolicyAlways, nil, "a", "b"),
		want: Actions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}},
	}, {
		name: "new pod with init containers: the first init container only",
		pod:  pod(corev1.RestartPolicyAlways, inits, "a"),
		want: Actions{KillPod: true, CreateSandbox: true, InitContainersToStart: []int{0}},
	}, {
		name:  "first init container succeeded: the next one",
		pod:   pod(corev1.RestartPolicyAlways, inits, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("i0", 0)}},
		want:  Actions{SandboxID: "sb1", InitContainersToStart: []int{1}},
	}, {
		name:  "init container running: wait",
		pod:   pod(corev1.RestartPolicyAlways, inits, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("i1"), exited("i0", 0)}},
		want:  Actions{SandboxID: "sb1"},
	}, {
		name:  "init containers done: the regular containers",
		pod:   pod(corev1.RestartPolicyAlways, inits, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("i1", 0), exited("i0", 0)}},
		want:  Actions{SandboxID: "sb1", ContainersToStart: []int{0}},
	}, {
		name:  "failed init container with restartPolicy Never: kill the pod",
		pod:   pod(corev1.RestartPolicyNever, inits, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("i0", 2)}},
		want:  Actions{SandboxID: "sb1", KillPod: true},
	}, {
		name:  "failed init container with OnFailure: run it again",
		pod:   pod(corev1.RestartPolicyOnFailure, inits, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("i0", 2)}},
		want:  Actions{SandboxID: "sb1", InitContainersToStart: []int{0}},
	}, {
		name:  "sidecar started: the next init container while it runs",
		pod:   pod(corev1.RestartPolicyAlways, []corev1.Container{sidecar("s"), {Name: "i1"}}, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("s")}},
		want:  Actions{SandboxID: "sb1", InitContainersToStart: []int{1}},
	}, {
		name: "sidecar exited after initialization: restart it, keep the app",
		pod:  pod(corev1.RestartPolicyNever, []corev1.Container{sidecar("s")}, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb},
			Containers: []podstate.Container{running("a"), exited("s", 1)}},
		want: Actions{SandboxID: "sb1", InitContainersToStart: []int{0}},
	}, {
		name:  "exited container with Always: start it again",
		pod:   pod(corev1.RestartPolicyAlways, nil, "a", "b"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("a", 0), running("b")}},
		want:  Actions{SandboxID: "sb1", ContainersToStart: []int{0}},
	}, {
		name:  "succeeded container with OnFailure, nothing else running: kill the pod",
		pod:   pod(corev1.RestartPolicyOnFailure, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("a", 0)}},
		want:  Actions{SandboxID: "sb1", KillPod: true},
	}, {
		name:  "failed container with Never: kill the pod",
		pod:   pod(corev1.RestartPolicyNever, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("a", 1)}},
		want:  Actions{SandboxID: "sb1", KillPod: true},
	}, {
		name:  "sandbox died under a Never pod that ran: no new sandbox",
		pod:   pod(corev1.RestartPolicyNever, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{{ID: "sb1", IPs: []string{"x"}}}, Containers: []podstate.Container{exited("a", 0)}},
		want:  Actions{SandboxID: "sb1", Attempt: 1, KillPod: true},
	}, {
		name:  "sandbox died under an Always pod: a new one, attempt 1",
		pod:   pod(corev1.RestartPolicyAlways, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{{ID: "sb1", IPs: []string{"x"}}}, Containers: []podstate.Container{exited("a", 137)}},
		want:  Actions{SandboxID: "sb1", Attempt: 1, KillPod: true, CreateSandbox: true, ContainersToStart: []int{0}},
	}, {
		name:  "failed liveness probe: kill and start again",
		pod:   pod(corev1.RestartPolicyAlways, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("a")}},
		probes: func(k prober.Kind, id string) (prober.Result, bool) {
			return prober.Failure, k == prober.Liveness && id == "a-id"
		},
		want: Actions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: []Kill{{ID: "a-id", Name: "a",
			Reason: KillReasonLiveness, Message: "Container a failed liveness probe, will be restarted"}}},
	}, {
		name:  "failed liveness probe with Never: kill only",
		pod:   pod(corev1.RestartPolicyNever, nil, "a"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("a")}},
		probes: func(k prober.Kind, id string) (prober.Result, bool) {
			return prober.Failure, k == prober.Liveness
		},
		want: Actions{SandboxID: "sb1", KillPod: true, ContainersToKill: []Kill{{ID: "a-id", Name: "a",
			Reason: KillReasonLiveness, Message: "Container a failed liveness probe"}}},
	}, {
		name:  "ephemeral containers: the new one starts, the one that ran does not again",
		pod:   withEphemeral(pod(corev1.RestartPolicyAlways, nil, "a"), "debug-1", "debug-2"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("a"), exited("debug-1", 0)}},
		want:  Actions{SandboxID: "sb1", EphemeralContainersToStart: []int{1}},
	}, {
		name:  "ephemeral container while the pod initializes",
		pod:   withEphemeral(pod(corev1.RestartPolicyAlways, inits, "a"), "debug"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{running("i0")}},
		want:  Actions{SandboxID: "sb1", EphemeralContainersToStart: []int{0}},
	}, {
		name:  "no ephemeral container once the pod is done",
		pod:   withEphemeral(pod(corev1.RestartPolicyNever, nil, "a"), "debug"),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{exited("a", 0)}},
		want:  Actions{SandboxID: "sb1", KillPod: true},
	}, {
		name: "no ephemeral container in a new sandbox",
		pod:  withEphemeral(pod(corev1.RestartPolicyAlways, nil, "a"), "debug"),
		want: Actions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(tc.pod, tc.state, tc.probes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShouldRestartRules(t *testing.T) {
	never := corev1.ContainerRestartPolicyNever
	c := corev1.Container{Name: "a", RestartPolicy: &never, RestartPolicyRules: []corev1.ContainerRestartRule{{
		Action:    corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}}
	spec := &corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}
	if !ShouldRestart(&c, spec, 42) || ShouldRestart(&c, spec, 1) {
		t.Fatal("restart rules: want a restart for 42 only")
	}
}
