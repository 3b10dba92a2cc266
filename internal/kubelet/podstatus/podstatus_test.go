package podstatus

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
	"github.com/skiff-sh/skiff/internal/kubelet/prober"
)

var (
	now     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	started = time.Date(2026, 12, 1, 11, 59, 0, 0, time.UTC)
	sb      = podstate.Sandbox{ID: "sb1", Ready: true, IPs: []string{"10.42.0.7"}}
)

func newPod(policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Generation: 1},
		Spec:       corev1.PodSpec{RestartPolicy: policy, Containers: containers},
	}
}

type condSummary struct {
	Type    corev1.PodConditionType
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

func conditions(s corev1.PodStatus) []condSummary {
	var out []condSummary
	for _, c := range s.Conditions {
		out = append(out, condSummary{c.Type, c.Status, c.Reason, c.Message})
	}
	return out
}

func TestGenerate(t *testing.T) {
	probeFail := func(kind prober.Kind, id string) (prober.Result, bool) { return prober.Unknown, false }
	readyOK := func(kind prober.Kind, id string) (prober.Result, bool) { return prober.Success, true }
	withProbe := corev1.Container{Name: "web", Image: "busybox", ReadinessProbe: &corev1.Probe{}}
	plain := corev1.Container{Name: "app", Image: "busybox"}
	runningApp := podstate.Container{ID: "c1", ContainerID: "containerd://c1", Name: "app", SandboxID: "sb1",
		State: podstate.Running, StartedAt: started, Image: "busybox", ImageRef: "sha256:abc"}

	cases := []struct {
		name       string
		pod        *corev1.Pod
		state      *podstate.Pod
		reasons    map[string]Reason
		probes     func(prober.Kind, string) (prober.Result, bool)
		terminal   bool
		phase      corev1.PodPhase
		conditions []condSummary
		container  corev1.ContainerStatus
	}{{
		name:  "nothing created yet",
		pod:   newPod(corev1.RestartPolicyAlways, plain),
		phase: corev1.PodPending,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionFalse, "PodSandboxNotReady", "no pod sandbox exists"},
			{corev1.PodInitialized, corev1.ConditionTrue, "", ""},
			{corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
			{corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "app", Image: "busybox", Started: new(bool),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}, {
		name:  "running and ready",
		pod:   newPod(corev1.RestartPolicyAlways, plain),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{runningApp}},
		phase: corev1.PodRunning,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""},
			{corev1.PodInitialized, corev1.ConditionTrue, "", ""},
			{corev1.PodReady, corev1.ConditionTrue, "", ""},
			{corev1.ContainersReady, corev1.ConditionTrue, "", ""},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "app", Image: "busybox", ImageID: "sha256:abc", ContainerID: "containerd://c1",
			Ready: true, Started: ptr(true), Resources: &corev1.ResourceRequirements{},
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
	}, {
		name: "readiness probe without a result: running, not ready",
		pod:  newPod(corev1.RestartPolicyAlways, withProbe),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{{ID: "c2", ContainerID: "containerd://c2",
			Name: "web", SandboxID: "sb1", State: podstate.Running, StartedAt: started, Image: "busybox"}}},
		probes: probeFail,
		phase:  corev1.PodRunning,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""},
			{corev1.PodInitialized, corev1.ConditionTrue, "", ""},
			{corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [web]"},
			{corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [web]"},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "web", Image: "busybox", ContainerID: "containerd://c2", Started: ptr(true),
			Resources: &corev1.ResourceRequirements{},
			State:     corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
	}, {
		name: "crash loop: waiting with the back-off, last termination kept",
		pod:  newPod(corev1.RestartPolicyAlways, plain),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{{ID: "c3", ContainerID: "containerd://c3",
			Name: "app", SandboxID: "sb1", Attempt: 2, State: podstate.Exited, ExitCode: 1, Reason: "Error",
			StartedAt: started, FinishedAt: now, Image: "busybox"}}},
		reasons: map[string]Reason{"app": {"CrashLoopBackOff", "back-off 20s restarting failed container=app pod=p_ns(u1)"}},
		probes:  readyOK,
		phase:   corev1.PodRunning,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""},
			{corev1.PodInitialized, corev1.ConditionTrue, "", ""},
			{corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
			{corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "app", Image: "busybox", ContainerID: "containerd://c3", RestartCount: 2,
			Started: new(bool), Resources: &corev1.ResourceRequirements{},
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: "back-off 20s restarting failed container=app pod=p_ns(u1)"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(now), ContainerID: "containerd://c3"}}},
	}, {
		name: "failed with restartPolicy Never",
		pod:  newPod(corev1.RestartPolicyNever, plain),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{{ID: "c4", ContainerID: "containerd://c4",
			Name: "app", SandboxID: "sb1", State: podstate.Exited, ExitCode: 3, Reason: "Error", StartedAt: started, FinishedAt: now, Image: "busybox"}}},
		phase: corev1.PodFailed,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""},
			{corev1.PodInitialized, corev1.ConditionTrue, "", ""},
			{corev1.PodReady, corev1.ConditionFalse, "PodFailed", ""},
			{corev1.ContainersReady, corev1.ConditionFalse, "PodFailed", ""},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "app", Image: "busybox", ContainerID: "containerd://c4", Started: new(bool),
			Resources: &corev1.ResourceRequirements{},
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error",
				StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(now), ContainerID: "containerd://c4"}}},
	}, {
		name: "deleted pod whose container stopped cleanly: Succeeded",
		pod:  newPod(corev1.RestartPolicyAlways, plain),
		state: &podstate.Pod{Sandboxes: []podstate.Sandbox{{ID: "sb1", IPs: []string{"10.42.0.7"}}}, Containers: []podstate.Container{{ID: "c5", ContainerID: "containerd://c5",
			Name: "app", SandboxID: "sb1", State: podstate.Exited, ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now, Image: "busybox"}}},
		terminal: true,
		phase:    corev1.PodSucceeded,
		conditions: []condSummary{
			{corev1.PodReadyToStartContainers, corev1.ConditionFalse, "PodSandboxNotReady", "pod sandbox is not ready"},
			{corev1.PodInitialized, corev1.ConditionTrue, "PodCompleted", ""},
			{corev1.PodReady, corev1.ConditionFalse, "PodCompleted", ""},
			{corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", ""},
			{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
		},
		container: corev1.ContainerStatus{Name: "app", Image: "busybox", ContainerID: "containerd://c5", Started: new(bool),
			Resources: &corev1.ResourceRequirements{},
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(now), ContainerID: "containerd://c5"}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Generate(Input{Pod: tc.pod, State: tc.state, Reasons: tc.reasons, Probes: tc.probes,
				HostIPs: []string{"192.168.1.2"}, Terminal: tc.terminal, Now: now})
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if diff := cmp.Diff(tc.conditions, conditions(s)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if len(s.ContainerStatuses) != 1 {
				t.Fatalf("%d container statuses, want 1", len(s.ContainerStatuses))
			}
			if diff := cmp.Diff(tc.container, s.ContainerStatuses[0]); diff != "" {
				t.Errorf("container status (-want +got):\n%s", diff)
			}
			if s.HostIP != "192.168.1.2" || s.QOSClass != corev1.PodQOSBestEffort || s.StartTime == nil || s.ObservedGeneration != 1 {
				t.Errorf("hostIP %q qos %q startTime %v observedGeneration %d", s.HostIP, s.QOSClass, s.StartTime, s.ObservedGeneration)
			}
			if tc.state != nil && s.PodIP != "10.42.0.7" {
				t.Errorf("podIP %q, want the sandbox's", s.PodIP)
			}
		})
	}
}

func TestTransitionTimesKept(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, corev1.Container{Name: "app"})
	first := Generate(Input{Pod: pod, Now: now})
	pod.Status = first
	second := Generate(Input{Pod: pod, Now: now.Add(time.Minute)})
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("an unchanged pod's status changed (-first +second):\n%s", diff)
	}
}

func TestQOSClass(t *testing.T) {
	res := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	cpuMem := corev1.ResourceList{corev1.ResourceCPU: mustQ("100m"), corev1.ResourceMemory: mustQ("64Mi")}
	cpu := corev1.ResourceList{corev1.ResourceCPU: mustQ("100m")}
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want corev1.PodQOSClass
	}{
		{"none", corev1.Container{}, corev1.PodQOSBestEffort},
		{"requests only", res(cpu, nil), corev1.PodQOSBurstable},
		{"equal limits", res(cpuMem, cpuMem), corev1.PodQOSGuaranteed},
		{"cpu limit only", res(cpu, cpu), corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(newPod(corev1.RestartPolicyAlways, tc.c)); got != tc.want {
				t.Errorf("QOS %s, want %s", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

func TestGenerateInitContainers(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, corev1.Container{Name: "app", Image: "busybox"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	st := &podstate.Pod{Sandboxes: []podstate.Sandbox{sb}, Containers: []podstate.Container{{ID: "i1", ContainerID: "containerd://i1",
		Name: "init", SandboxID: "sb1", State: podstate.Running, StartedAt: started, Image: "busybox"}}}
	s := Generate(Input{Pod: pod, State: st, Now: now})
	if s.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", s.Phase)
	}
	want := []condSummary{
		{corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", ""},
		{corev1.PodInitialized, corev1.ConditionFalse, "ContainersNotInitialized", "containers with incomplete status: [init]"},
		{corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
		{corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "containers with unready status: [app]"},
		{corev1.PodScheduled, corev1.ConditionTrue, "", ""},
	}
	if diff := cmp.Diff(want, conditions(s)); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "PodInitializing" {
		t.Errorf("app state %+v, want waiting PodInitializing", s.ContainerStatuses[0].State)
	}

	// The init container succeeded and the app runs: initialized, and the
	// init container is ready (it exited 0).
	st.Containers = []podstate.Container{
		{ID: "a1", ContainerID: "containerd://a1", Name: "app", SandboxID: "sb1", State: podstate.Running, StartedAt: now, Image: "busybox"},
		{ID: "i1", ContainerID: "containerd://i1", Name: "init", SandboxID: "sb1", State: podstate.Exited, Reason: "Completed",
			StartedAt: started, FinishedAt: started, Image: "busybox"},
	}
	s = Generate(Input{Pod: pod, State: st, Now: now})
	if s.Phase != corev1.PodRunning || !s.InitContainerStatuses[0].Ready || !s.ContainerStatuses[0].Ready {
		t.Errorf("phase %s, init ready %v, app ready %v", s.Phase, s.InitContainerStatuses[0].Ready, s.ContainerStatuses[0].Ready)
	}
	for _, c := range s.Conditions {
		if c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s is %s (%s)", c.Type, c.Status, c.Message)
		}
	}
}

func TestEphemeralContainerStatuses(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
			EphemeralContainers: []corev1.EphemeralContainer{
				{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug-b", Image: "busybox"}},
				{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug-a", Image: "busybox"}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	started := time.Unix(1000, 0)
	st := &podstate.Pod{
		Sandboxes: []podstate.Sandbox{{ID: "sb", Ready: true, IPs: []string{"10.42.0.9"}}},
		Containers: []podstate.Container{
			{ID: "d1", ContainerID: "containerd://d1", Name: "debug-b", SandboxID: "sb", State: podstate.Running, StartedAt: started, Image: "busybox", ImageRef: "sha256:b"},
			{ID: "a1", ContainerID: "containerd://a1", Name: "app", SandboxID: "sb", State: podstate.Running, StartedAt: started, Image: "nginx", ImageRef: "sha256:n"},
		},
	}
	s := Generate(Input{Pod: pod, State: st, Now: started.Add(time.Minute)})
	if s.Phase != corev1.PodRunning || len(s.ContainerStatuses) != 1 {
		t.Fatalf("phase %s, %d container statuses: ephemeral containers must not count", s.Phase, len(s.ContainerStatuses))
	}
	yes, no := true, false
	want := []corev1.ContainerStatus{
		{Name: "debug-b", Image: "busybox", ImageID: "sha256:b", ContainerID: "containerd://d1", Started: &yes,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}},
		{Name: "debug-a", Image: "busybox", Started: &no,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonContainerCreating}}},
	}
	if diff := cmp.Diff(want, s.EphemeralContainerStatuses); diff != "" {
		t.Errorf("ephemeral statuses (-want +got):\n%s", diff)
	}
}
