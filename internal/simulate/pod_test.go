package simulate

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIPPool(t *testing.T) {
	p, err := newIPPool("10.43.7.0/24")
	if err != nil {
		t.Fatal(err)
	}
	alloc := func(key string) string {
		t.Helper()
		ip, err := p.allocate(key)
		if err != nil {
			t.Fatalf("allocate(%s): %v", key, err)
		}
		return ip.String()
	}
	got := []string{alloc("a"), alloc("b"), alloc("a")}
	if diff := cmp.Diff([]string{"10.43.7.2", "10.43.7.3", "10.43.7.2"}, got); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	p.release("a")
	if ip := alloc("c"); ip != "10.43.7.4" {
		t.Errorf("after release, c got %s; want 10.43.7.4 (no immediate reuse)", ip)
	}
	if !p.reserve("d", netip.MustParseAddr("10.43.7.9")) {
		t.Error("reserve of a free IP failed")
	}
	for _, tc := range []struct {
		ip  string
		why string
	}{{"10.43.7.9", "held by d"}, {"10.43.8.9", "other subnet"}, {"10.43.7.1", "gateway"}, {"10.43.7.255", "broadcast"}} {
		if p.reserve("e", netip.MustParseAddr(tc.ip)) {
			t.Errorf("reserve(%s) succeeded, want refused (%s)", tc.ip, tc.why)
		}
	}
	// Fill the pool: 253 usable addresses, 3 held (b, c and d), so 250
	// more fit and the next fails.
	for i := range 250 {
		alloc(fmt.Sprintf("k%d", i))
	}
	if _, err := p.allocate("overflow"); err == nil {
		t.Error("allocate on a full pool succeeded")
	}
	if _, err := newIPPool("10.42.0.0/25"); err == nil {
		t.Error("newIPPool accepted a /25")
	}
}

func TestRunningAndSucceededStatus(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(created.Add(time.Second))
	later := metav1.NewTime(created.Add(time.Minute))
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Generation: 1},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}, {Name: "sidecar", Image: "proxy", RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx:1"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPending,
			QOSClass:   corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created}},
		},
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, reason string, at metav1.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, ObservedGeneration: 1, LastTransitionTime: at}
	}
	running := func(name, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Image: image, ImageID: "simulated://sha256:" + hash(image), ContainerID: "simulated://" + hash("u1/"+name),
			Ready: true, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}
	}
	initDone := running("init", "busybox")
	initDone.Started = new(false)
	initDone.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: initDone.ContainerID}}

	want := corev1.PodStatus{
		Phase:              corev1.PodRunning,
		ObservedGeneration: 1,
		QOSClass:           corev1.PodQOSBestEffort,
		HostIP:             "172.16.0.1", HostIPs: []corev1.HostIP{{IP: "172.16.0.1"}},
		PodIP: "10.42.0.2", PodIPs: []corev1.PodIP{{IP: "10.42.0.2"}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionTrue, "", created), // transition time kept
			cond(podReadyToStartContainers, corev1.ConditionTrue, "", now),
			cond(corev1.PodInitialized, corev1.ConditionTrue, "", now),
			cond(corev1.PodReady, corev1.ConditionTrue, "", now),
			cond(corev1.ContainersReady, corev1.ConditionTrue, "", now),
		},
		InitContainerStatuses: []corev1.ContainerStatus{initDone, running("sidecar", "proxy")},
		ContainerStatuses:     []corev1.ContainerStatus{running("app", "nginx:1")},
	}
	got := runningStatus(pod, "172.16.0.1", "10.42.0.2", now)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("runningStatus (-want +got):\n%s", diff)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Error("runningStatus changed its input")
	}

	pod.Status = got
	done := succeededStatus(pod, later)
	if done.Phase != corev1.PodSucceeded {
		t.Errorf("phase = %s", done.Phase)
	}
	wantConds := []corev1.PodCondition{
		cond(corev1.PodScheduled, corev1.ConditionTrue, "", created),
		cond(podReadyToStartContainers, corev1.ConditionFalse, "", later),
		cond(corev1.PodInitialized, corev1.ConditionTrue, "", now),
		cond(corev1.PodReady, corev1.ConditionFalse, "PodCompleted", later),
		cond(corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", later),
	}
	if diff := cmp.Diff(wantConds, done.Conditions); diff != "" {
		t.Errorf("succeeded conditions (-want +got):\n%s", diff)
	}
	wantState := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: later, ContainerID: want.ContainerStatuses[0].ContainerID}}
	if diff := cmp.Diff(wantState, done.ContainerStatuses[0].State); diff != "" {
		t.Errorf("succeeded container state (-want +got):\n%s", diff)
	}

	// simulate.skiff.sh/exit-code: 3 ends the pod Failed with that code.
	pod.Annotations = map[string]string{ExitCodeAnnotation: "3"}
	failed := finishedStatus(pod, later, exitCode(pod))
	wantState.Terminated.ExitCode, wantState.Terminated.Reason = 3, "Error"
	if failed.Phase != corev1.PodFailed {
		t.Errorf("phase with exit code 3 = %s, want Failed", failed.Phase)
	}
	if diff := cmp.Diff(wantState, failed.ContainerStatuses[0].State); diff != "" {
		t.Errorf("failed container state (-want +got):\n%s", diff)
	}
}

func TestRunFor(t *testing.T) {
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"never", corev1.RestartPolicyNever, "2", 2 * time.Second, true},
		{"on failure, fraction", corev1.RestartPolicyOnFailure, "0.25", 250 * time.Millisecond, true},
		{"always runs forever", corev1.RestartPolicyAlways, "2", 0, false},
		{"no annotation", corev1.RestartPolicyNever, "", 0, false},
		{"garbage", corev1.RestartPolicyNever, "soon", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy}}
			if tc.value != "" {
				pod.Annotations = map[string]string{RunSecondsAnnotation: tc.value}
			}
			got, ok := runFor(pod)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("runFor = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
