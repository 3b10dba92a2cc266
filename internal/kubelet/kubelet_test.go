package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/testing/fakecri"
)

// harness is a kubelet on a fake CRI runtime (which keeps its containers'
// state) and a fake clientset.
type harness struct {
	t       *testing.T
	client  *fake.Clientset
	runtime *fakecri.Runtime
	images  *fakecri.Images
	k       *Kubelet
}

// newHarness starts the kubelet; mutate adjusts its options (the node's
// stats are fixed and plentiful unless a test gives its own).
func newHarness(t *testing.T, mutate ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, client: fake.NewClientset(), runtime: fakecri.NewRuntime(), images: fakecri.NewImages("busybox")}
	opts := Options{
		NodeName: "node1", RootDir: t.TempDir(), PodLogsDir: t.TempDir(), NodeIP: "192.0.2.10",
		RelistPeriod: 20 * time.Millisecond, ResyncInterval: 200 * time.Millisecond,
		NodeLabels: map[string]string{"tier": "test"},
		Stats:      &fakeStats{},
	}
	for _, m := range mutate {
		m(&opts)
	}
	h.k = New(h.client, h.runtime, h.images, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.k.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	select {
	case <-h.k.Ready():
	case err := <-done:
		t.Fatalf("kubelet stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("kubelet not ready")
	}
	return h
}

func (h *harness) waitPod(name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	h.t.Helper()
	var last *corev1.Pod
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p, err := h.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("pod %s never %s; last status: %+v", name, what, last.Status)
	return nil
}

func (h *harness) containers(uid types.UID) []fakecri.Container {
	return h.runtime.Containers(map[string]string{labelPodUID: string(uid)})
}

// exit makes the pod's running container exit with code.
func (h *harness) exit(uid types.UID, code int32) {
	if h.runtime.Exit(map[string]string{labelPodUID: string(uid)}, code) == 0 {
		h.t.Fatalf("no running container of pod %s to exit", uid)
	}
}

func bound(name string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node1", RestartPolicy: policy, Containers: []corev1.Container{{
			Name: "app", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "GREETING", Value: "hi $(POD)"}},
		}}},
	}
}

func running(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
		p.Status.ContainerStatuses[0].State.Running != nil && p.Status.ContainerStatuses[0].Ready
}

func TestNodeRegistration(t *testing.T) {
	h := newHarness(t)
	node, err := h.client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"kubernetes.io/hostname": "node1", "kubernetes.io/os": "linux", "tier": "test"} {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	if node.Status.Capacity.Pods().Value() != 110 || node.Status.Allocatable.Memory().Cmp(*node.Status.Capacity.Memory()) >= 0 {
		t.Errorf("capacity %v allocatable %v: want 110 pods and memory minus the eviction threshold", node.Status.Capacity, node.Status.Allocatable)
	}
	if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Address != "192.0.2.10" {
		t.Errorf("addresses %v", node.Status.Addresses)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady" {
			ready = true
		}
	}
	if !ready {
		t.Errorf("conditions %v: not Ready", node.Status.Conditions)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := h.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "node1", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no node Lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPodRunsAndCrashLoops(t *testing.T) {
	h := newHarness(t)
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("web", "ran", running)
	if p.Status.PodIP == "" || p.Status.HostIP != "192.0.2.10" || p.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("podIP %q hostIP %q qos %q", p.Status.PodIP, p.Status.HostIP, p.Status.QOSClass)
	}
	cs := h.containers(pod.UID)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	env := map[string]string{}
	for _, kv := range cs[0].Config.Envs {
		env[kv.Key] = string(kv.Value)
	}
	if env["GREETING"] != "hi web" {
		t.Errorf("GREETING=%q, want %q", env["GREETING"], "hi web")
	}

	// The first exit restarts at once; the second waits for the back-off.
	h.exit(pod.UID, 1)
	h.waitPod("web", "restarted", func(p *corev1.Pod) bool {
		return running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	h.exit(pod.UID, 1)
	p = h.waitPod("web", "in CrashLoopBackOff", func(p *corev1.Pod) bool {
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	cs0 := p.Status.ContainerStatuses[0]
	if cs0.LastTerminationState.Terminated == nil || cs0.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("last termination %+v, want exit code 1", cs0.LastTerminationState)
	}
	want := fmt.Sprintf("back-off 10s restarting failed container=app pod=web_default(%s)", pod.UID)
	if cs0.State.Waiting.Message != want {
		t.Errorf("waiting message %q, want %q", cs0.State.Waiting.Message, want)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionFalse {
			t.Errorf("Ready is %s during the back-off", c.Status)
		}
	}
}

func TestNeverPodSucceeds(t *testing.T) {
	h := newHarness(t)
	pod := bound("job", corev1.RestartPolicyNever)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("job", "ran", running)
	h.exit(pod.UID, 0)
	p := h.waitPod("job", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if t0 := p.Status.ContainerStatuses[0].State.Terminated; t0 == nil || t0.ExitCode != 0 {
		t.Errorf("state %+v, want terminated 0", p.Status.ContainerStatuses[0].State)
	}
	// The sandbox is stopped once the pod is done.
	deadline := time.Now().Add(5 * time.Second)
	for {
		readySandboxes := 0
		for _, s := range h.runtime.SandboxStates(map[string]string{labelPodUID: string(pod.UID)}) {
			if s == runtimeapi.PodSandboxState_SANDBOX_READY {
				readySandboxes++
			}
		}
		if readySandboxes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox of a finished pod still runs")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDeletedPodIsCleanedUp(t *testing.T) {
	h := newHarness(t)
	pod := bound("gone", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("gone", "ran", running)
	if err := h.client.CoreV1().Pods("default").Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.containers(pod.UID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("containers of a deleted pod were not removed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The sandbox is stopped once (the kill); its removal needs no second
	// stop: RemovePodSandbox stops it anyway, and every stop is a CNI DEL
	// of all the network's plugins in containerd.
	if n := h.runtime.SandboxStops(); n != 1 {
		t.Errorf("StopPodSandbox called %d times for one deleted pod, want 1", n)
	}
}

func TestRejectedPod(t *testing.T) {
	h := newHarness(t)
	pod := bound("huge", corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resourceMust("1000")}
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("huge", "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "OutOfcpu" {
		t.Errorf("reason %q, want OutOfcpu (message %q)", p.Status.Reason, p.Status.Message)
	}
	if n := len(h.containers(pod.UID)); n != 0 {
		t.Errorf("%d containers for a rejected pod", n)
	}
}

func resourceMust(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// TestGetPodByNameSeesOwnStatus: the kubelet's API (logs, exec) finds a
// pod with the status the kubelet wrote even while its informer lags, and a
// StatefulSet's replacement rather than the same-named pod being deleted.
func TestGetPodByNameSeesOwnStatus(t *testing.T) {
	h := newHarness(t)
	pod := bound("db-0", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("db-0", "ran", running)

	// The informer's copies as they could be: the new pod not yet with its
	// status, and the one it replaces still terminating.
	lagging := pod.DeepCopy()
	lagging.CreationTimestamp = metav1.Now()
	old := bound("db-0", corev1.RestartPolicyAlways)
	old.UID = "uid-db-0-before"
	old.CreationTimestamp = metav1.NewTime(lagging.CreationTimestamp.Add(-time.Hour))
	old.DeletionTimestamp = &lagging.CreationTimestamp
	h.k.mu.Lock()
	h.k.pods[pod.UID] = lagging
	h.k.pods[old.UID] = old
	h.k.mu.Unlock()

	got, ok := h.k.GetPodByName("default", "db-0")
	if !ok {
		t.Fatal("db-0 not found")
	}
	if got.UID != pod.UID {
		t.Errorf("found pod %s, want the replacement %s", got.UID, pod.UID)
	}
	if !running(got) {
		t.Errorf("status %+v, want the running status the kubelet wrote", got.Status)
	}
	if len(lagging.Status.ContainerStatuses) != 0 {
		t.Error("the informer's copy was modified")
	}
}

// TestActiveDeadlineSeconds: a running pod past spec.activeDeadlineSeconds
// (here lowered on the running pod, as the conformance test does) is killed
// and ends Failed with reason DeadlineExceeded.
func TestActiveDeadlineSeconds(t *testing.T) {
	h := newHarness(t)
	pod := bound("deadline", corev1.RestartPolicyAlways)
	long := int64(3600)
	pod.Spec.ActiveDeadlineSeconds = &long
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("deadline", "ran", running)
	short := int64(1)
	p.Spec.ActiveDeadlineSeconds = &short
	if _, err := h.client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = h.waitPod("deadline", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	for _, c := range h.containers(pod.UID) {
		if c.Status.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still running", c.Config.Metadata.Name)
		}
	}
}

// TestStatusKeepsOthersConditions: a condition another component put on
// the pod's status (the eviction API's DisruptionTarget) survives the
// kubelet's later status writes, as upstream's status manager keeps the
// conditions it does not own; before, the kubelet rebuilt them from its
// own last write and its patch deleted it, so a Job's podFailurePolicy
// never saw the eviction.
func TestStatusKeepsOthersConditions(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	pod := bound("evicted", corev1.RestartPolicyNever)
	if _, err := h.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := h.waitPod("evicted", "ran", running)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"})
	if _, err := h.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the informer sees the condition
	h.exit(pod.UID, 137)
	p = h.waitPod("evicted", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	time.Sleep(500 * time.Millisecond) // and a few more syncs
	p, err := h.client.CoreV1().Pods("default").Get(ctx, "evicted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			found = true
		}
	}
	if !found {
		t.Errorf("DisruptionTarget gone after the kubelet's writes: %+v", p.Status.Conditions)
	}
}

// TestStatusPatchCarriesUID: every status the kubelet writes names the
// pod's uid, so that the API server refuses it for a pod deleted and
// created again under the same name (a StatefulSet's) instead of giving
// the new pod the old one's status.
func TestStatusPatchCarriesUID(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var patches []string
	h.client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetSubresource() == "status" {
			mu.Lock()
			patches = append(patches, string(p.GetPatch()))
			mu.Unlock()
		}
		return false, nil, nil
	})
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "running", running)
	mu.Lock()
	defer mu.Unlock()
	if len(patches) == 0 {
		t.Fatal("no status patch written")
	}
	for _, p := range patches {
		var body struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(p), &body); err != nil || body.Metadata.UID != pod.UID {
			t.Errorf("status patch %s: uid %q (%v), want %q", p, body.Metadata.UID, err, pod.UID)
		}
	}
}
