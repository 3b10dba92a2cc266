package kubelet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

const mib = 1 << 20

// fakeStats gives the node's signals from observe (plenty of everything
// when nil) and the pods' usage from pods.
type fakeStats struct {
	mu      sync.Mutex
	observe func() eviction.Observations
	pods    map[types.UID]*eviction.PodStats
	local   map[types.UID]*eviction.LocalUsage
}

func (f *fakeStats) Observe(context.Context) (eviction.Observations, error) {
	f.mu.Lock()
	obs := f.observe
	f.mu.Unlock()
	if obs != nil {
		return obs(), nil
	}
	return eviction.Observations{
		eviction.SignalMemoryAvailable:  {Available: 3000 * mib, Capacity: 4096 * mib},
		eviction.SignalNodeFsAvailable:  {Available: 50 << 30, Capacity: 100 << 30},
		eviction.SignalImageFsAvailable: {Available: 50 << 30, Capacity: 100 << 30},
		eviction.SignalPIDAvailable:     {Available: 30000, Capacity: 32768},
	}, nil
}

func (f *fakeStats) PodStats(context.Context, bool) (map[types.UID]*eviction.PodStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods, nil
}

func (f *fakeStats) LocalStorage(_ context.Context, pod *corev1.Pod) (*eviction.LocalUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.local[pod.UID], nil
}

func (f *fakeStats) setLocal(uid types.UID, u *eviction.LocalUsage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.local == nil {
		f.local = map[types.UID]*eviction.LocalUsage{}
	}
	f.local[uid] = u
}

func (f *fakeStats) set(observe func() eviction.Observations, pods map[types.UID]*eviction.PodStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observe, f.pods = observe, pods
}

// countingMetrics keeps what the kubelet reports.
type countingMetrics struct {
	mu        sync.Mutex
	starts    int
	sliStarts int
	workers   map[string]int
	evictions map[string]int
	imageGC   map[string]int
}

func newCountingMetrics() *countingMetrics {
	return &countingMetrics{workers: map[string]int{}, evictions: map[string]int{}, imageGC: map[string]int{}}
}

func (m *countingMetrics) ObservePodStart(time.Duration) { m.mu.Lock(); m.starts++; m.mu.Unlock() }
func (m *countingMetrics) ObservePodStartSLI(time.Duration) {
	m.mu.Lock()
	m.sliStarts++
	m.mu.Unlock()
}
func (m *countingMetrics) ObservePodWorker(op string, _ time.Duration) {
	m.mu.Lock()
	m.workers[op]++
	m.mu.Unlock()
}
func (m *countingMetrics) IncEviction(s string) { m.mu.Lock(); m.evictions[s]++; m.mu.Unlock() }
func (m *countingMetrics) IncImageGC(r string)  { m.mu.Lock(); m.imageGC[r]++; m.mu.Unlock() }

func (m *countingMetrics) snapshot() (int, int, map[string]int, map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts, m.sliStarts, copyMap(m.evictions), copyMap(m.imageGC)
}

func copyMap(in map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range in {
		out[k] = v
	}
	return out
}

func (h *harness) waitNode(what string, ok func(*corev1.Node) bool) *corev1.Node {
	h.t.Helper()
	var last *corev1.Node
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := h.client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
		if err == nil {
			last = n
			if ok(n) {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("node never %s; conditions: %+v", what, last.Status.Conditions)
	return nil
}

func (h *harness) waitEvent(reason, object string) *corev1.Event {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs, _ := h.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		for i := range evs.Items {
			if evs.Items[i].Reason == reason && evs.Items[i].InvolvedObject.Name == object {
				return &evs.Items[i]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("no %s event for %s", reason, object)
	return nil
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func (h *harness) runningContainers(uid types.UID) int {
	n := 0
	for _, c := range h.containers(uid) {
		if c.Status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			n++
		}
	}
	return n
}

// TestEvictionUnderMemoryPressure: the node's memory falls under the hard
// threshold because of one pod; the kubelet reports MemoryPressure,
// evicts that pod (the one over its request) with upstream's status,
// condition and event, leaves the other running, and refuses a new
// BestEffort pod while the pressure lasts.
func TestEvictionUnderMemoryPressure(t *testing.T) {
	stats := &fakeStats{}
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) {
		o.Stats = stats
		o.Metrics = metrics
		o.EvictionInterval = 20 * time.Millisecond
		o.Eviction.PressureTransitionPeriod = time.Minute
	})
	hog := bound("hog", corev1.RestartPolicyAlways)
	modest := bound("modest", corev1.RestartPolicyAlways)
	modest.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	for _, p := range []*corev1.Pod{hog, modest} {
		if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitPod("hog", "ran", running)
	h.waitPod("modest", "ran", running)

	// The hog uses 3900Mi while it runs: 46Mi of 4Gi are left, under 100Mi.
	stats.set(func() eviction.Observations {
		used := int64(150 * mib)
		if h.runningContainers(hog.UID) > 0 {
			used += 3900 * mib
		}
		return eviction.Observations{
			eviction.SignalMemoryAvailable: {Available: 4096*mib - used, Capacity: 4096 * mib},
			eviction.SignalNodeFsAvailable: {Available: 50 << 30, Capacity: 100 << 30},
		}
	}, map[types.UID]*eviction.PodStats{
		hog.UID:    {Memory: 3900 * mib, Containers: []eviction.ContainerStats{{Name: "app", Memory: 3900 * mib}}},
		modest.UID: {Memory: 150 * mib, Containers: []eviction.ContainerStats{{Name: "app", Memory: 150 * mib}}},
	})

	p := h.waitPod("hog", "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 46Mi. " +
		"Container app was using 3900Mi, request is 0, has larger consumption of memory. "
	if p.Status.Reason != "Evicted" || p.Status.Message != wantMsg {
		t.Errorf("status reason %q message %q, want Evicted %q", p.Status.Reason, p.Status.Message, wantMsg)
	}
	var dt *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
			dt = &p.Status.Conditions[i]
		}
	}
	if dt == nil || dt.Status != corev1.ConditionTrue || dt.Reason != corev1.PodReasonTerminationByKubelet || dt.Message != wantMsg {
		t.Errorf("DisruptionTarget condition %+v", dt)
	}
	if n := h.runningContainers(hog.UID); n != 0 {
		t.Errorf("%d containers of the evicted pod still run", n)
	}
	if ev := h.waitEvent("Evicted", "hog"); ev.Type != corev1.EventTypeWarning || ev.Message != wantMsg {
		t.Errorf("event %s %q", ev.Type, ev.Message)
	}
	h.waitEvent("EvictionThresholdMet", "node1")

	n := h.waitNode("under memory pressure", func(n *corev1.Node) bool {
		return nodeCondition(n, corev1.NodeMemoryPressure).Status == corev1.ConditionTrue
	})
	c := nodeCondition(n, corev1.NodeMemoryPressure)
	if c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" {
		t.Errorf("MemoryPressure %q %q", c.Reason, c.Message)
	}
	if d := nodeCondition(n, corev1.NodeDiskPressure); d.Status != corev1.ConditionFalse || d.Reason != "KubeletHasNoDiskPressure" {
		t.Errorf("DiskPressure %+v", d)
	}

	// While the pressure condition holds, a BestEffort pod is refused and
	// a Burstable one admitted.
	late := bound("late", corev1.RestartPolicyAlways)
	lateBurstable := bound("late-burstable", corev1.RestartPolicyAlways)
	lateBurstable.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Mi")}
	for _, p := range []*corev1.Pod{late, lateBurstable} {
		if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p = h.waitPod("late", "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "Evicted" || p.Status.Message != "Pod was rejected: The node had condition: [MemoryPressure]. " {
		t.Errorf("rejected pod: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	h.waitPod("late-burstable", "ran", running)
	if got := h.waitPod("modest", "still running", running); got.Status.Reason != "" {
		t.Errorf("modest pod reason %q", got.Status.Reason)
	}
	_, _, evictions, _ := metrics.snapshot()
	if diff := cmp.Diff(map[string]int{"memory.available": 1}, evictions); diff != "" {
		t.Errorf("evictions metric (-want +got):\n%s", diff)
	}
}

// TestDiskPressureReclaimsImagesFirst: under disk pressure the kubelet
// removes unused images (not the one in use, not the pinned sandbox
// image) and, as that relieves the pressure, evicts no pod.
func TestDiskPressureReclaimsImagesFirst(t *testing.T) {
	stats := &fakeStats{}
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) {
		o.Stats = stats
		o.Metrics = metrics
		o.EvictionInterval = 20 * time.Millisecond
		o.GC = GCOptions{ImageMinimumAge: time.Nanosecond, ContainerPeriod: 20 * time.Millisecond}
	})
	h.images.Pinned["pause"] = true
	for _, im := range []string{"pause", "old-image"} {
		h.images.Pullable[im] = true
		if _, err := h.images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: im}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "ran", running)
	stats.set(func() eviction.Observations {
		avail := int64(50 << 30)
		if h.images.Present("old-image") {
			avail = 5 << 30 // under 10%
		}
		return eviction.Observations{
			eviction.SignalMemoryAvailable: {Available: 3000 * mib, Capacity: 4096 * mib},
			eviction.SignalNodeFsAvailable: {Available: avail, Capacity: 100 << 30},
		}
	}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for h.images.Present("old-image") {
		if time.Now().After(deadline) {
			t.Fatal("the unused image was not removed under disk pressure")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !h.images.Present("busybox") || !h.images.Present("pause") {
		t.Errorf("busybox present %v, pause present %v: in-use and pinned images must stay", h.images.Present("busybox"), h.images.Present("pause"))
	}
	h.waitNode("under disk pressure", func(n *corev1.Node) bool {
		c := nodeCondition(n, corev1.NodeDiskPressure)
		return c.Status == corev1.ConditionTrue && c.Reason == "KubeletHasDiskPressure" && c.Message == "kubelet has disk pressure"
	})
	if p := h.waitPod("web", "still running", running); p.Status.Reason != "" {
		t.Errorf("pod reason %q", p.Status.Reason)
	}
	_, _, evictions, imageGC := metrics.snapshot()
	if len(evictions) != 0 || imageGC["space"] != 1 {
		t.Errorf("evictions %v, image GC %v; want none and space:1", evictions, imageGC)
	}
}

// TestDiskMinimumReclaimEvicts: with --eviction-minimum-reclaim, removing
// the unused images is not enough when it leaves less than the threshold
// plus the minimum reclaim available (15 of 100 Gi; 10 % + 10Gi asked), so
// the pod is evicted too.
func TestDiskMinimumReclaimEvicts(t *testing.T) {
	stats := &fakeStats{}
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) {
		o.Stats = stats
		o.Metrics = metrics
		o.EvictionInterval = 20 * time.Millisecond
		o.GC = GCOptions{ImageMinimumAge: time.Nanosecond, ContainerPeriod: 20 * time.Millisecond}
		ths, err := eviction.Parse("memory.available<100Mi,nodefs.available<10%", "", "")
		if err == nil {
			err = eviction.SetMinimumReclaim(ths, "nodefs.available=10Gi")
		}
		if err != nil {
			t.Fatal(err)
		}
		o.Eviction.Thresholds = ths
	})
	h.images.Pinned["pause"] = true
	for _, im := range []string{"pause", "old-image"} {
		h.images.Pullable[im] = true
		if _, err := h.images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: im}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "ran", running)
	stats.set(func() eviction.Observations {
		avail := int64(15 << 30)
		if h.images.Present("old-image") {
			avail = 5 << 30
		}
		return eviction.Observations{
			eviction.SignalMemoryAvailable: {Available: 3000 * mib, Capacity: 4096 * mib},
			eviction.SignalNodeFsAvailable: {Available: avail, Capacity: 100 << 30},
		}
	}, nil)
	p := h.waitPod("web", "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "Evicted" {
		t.Errorf("status reason %q, want Evicted", p.Status.Reason)
	}
	if h.images.Present("old-image") {
		t.Error("the unused image was not removed before the eviction")
	}
	_, _, evictions, _ := metrics.snapshot()
	if evictions["nodefs.available"] != 1 {
		t.Errorf("evictions %v, want nodefs.available:1", evictions)
	}
}

// TestImageGCAtHighThreshold: image GC removes unused images once the
// image filesystem is 85 % full, and keeps those in use and pinned.
func TestImageGCAtHighThreshold(t *testing.T) {
	stats := &fakeStats{}
	h := newHarness(t, func(o *Options) {
		o.Stats = stats
		o.GC = GCOptions{ImagePeriod: 20 * time.Millisecond, ContainerPeriod: 20 * time.Millisecond, ImageMinimumAge: time.Nanosecond}
	})
	h.images.Pinned["pause"] = true
	for _, im := range []string{"pause", "old-image"} {
		h.images.Pullable[im] = true
		if _, err := h.images.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: im}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "ran", running)
	stats.set(func() eviction.Observations {
		avail := int64(500)
		if h.images.Present("old-image") {
			avail = 100 // 90 % used, over the 85 % high threshold
		}
		return eviction.Observations{eviction.SignalImageFsAvailable: {Available: avail, Capacity: 1000}}
	}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for h.images.Present("old-image") {
		if time.Now().After(deadline) {
			t.Fatal("the unused image was not removed at the high threshold")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !h.images.Present("busybox") || !h.images.Present("pause") {
		t.Errorf("busybox present %v, pause present %v", h.images.Present("busybox"), h.images.Present("pause"))
	}
}

// TestContainerGCKeepsPrevious: of a container's dead instances only the
// newest stays (what `kubectl logs --previous` reads); the running one
// is untouched.
func TestContainerGCKeepsPrevious(t *testing.T) {
	h := newHarness(t)
	pod := bound("web", corev1.RestartPolicyAlways)
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "ran", running)
	cs := h.containers(pod.UID)
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	live := cs[0]
	older := h.runtime.AddExited(live.SandboxID, live.Config, time.Now().Add(-2*time.Hour))
	newer := h.runtime.AddExited(live.SandboxID, live.Config, time.Now().Add(-time.Hour))
	h.k.collectContainers(context.Background())
	var left []string
	for _, c := range h.containers(pod.UID) {
		left = append(left, c.Status.Id)
	}
	want := map[string]bool{live.Status.Id: true, newer: true}
	if len(left) != 2 || !want[left[0]] || !want[left[1]] {
		t.Errorf("containers left %v, want the running %s and the newest dead %s (not %s)", left, live.Status.Id, newer, older)
	}
}

// TestPodStartMetrics: a pod that starts is counted once in the pod start
// histograms; pod syncs are counted by operation.
func TestPodStartMetrics(t *testing.T) {
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) { o.Metrics = metrics })
	pod := bound("web", corev1.RestartPolicyAlways)
	pod.CreationTimestamp = metav1.Now()
	if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitPod("web", "ran", running)
	deadline := time.Now().Add(5 * time.Second)
	for {
		starts, sli, _, _ := metrics.snapshot()
		if starts == 1 && sli == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod starts %d, SLI %d; want 1 and 1", starts, sli)
		}
		time.Sleep(20 * time.Millisecond)
	}
	metrics.mu.Lock()
	create := metrics.workers["create"]
	metrics.mu.Unlock()
	if create != 1 {
		t.Errorf("create syncs %d, want 1", create)
	}
}

// TestEvictionForEmptyDirSizeLimit: a pod whose emptyDir outgrows its
// sizeLimit is evicted at once with upstream's message, without a
// DisruptionTarget condition; a pod within its limits stays.
func TestEvictionForEmptyDirSizeLimit(t *testing.T) {
	stats := &fakeStats{}
	metrics := newCountingMetrics()
	h := newHarness(t, func(o *Options) {
		o.Stats = stats
		o.Metrics = metrics
		o.EvictionInterval = 20 * time.Millisecond
	})
	size := resource.MustParse("10Mi")
	mk := func(name string) *corev1.Pod {
		p := bound(name, corev1.RestartPolicyAlways)
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}}
		return p
	}
	filler, tidy := mk("filler"), mk("tidy")
	for _, p := range []*corev1.Pod{filler, tidy} {
		if _, err := h.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitPod("filler", "ran", running)
	h.waitPod("tidy", "ran", running)
	stats.setLocal(tidy.UID, &eviction.LocalUsage{Volumes: map[string]int64{"scratch": 9 * mib}, Total: 9 * mib})
	stats.setLocal(filler.UID, &eviction.LocalUsage{Volumes: map[string]int64{"scratch": 11 * mib}, Total: 11 * mib})
	p := h.waitPod("filler", "evicted", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if want := `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `; p.Status.Reason != "Evicted" || p.Status.Message != want {
		t.Errorf("status %q %q, want Evicted %q", p.Status.Reason, p.Status.Message, want)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			t.Errorf("DisruptionTarget condition on a local storage eviction: %+v", c)
		}
	}
	h.waitEvent("Evicted", "filler")
	if p := h.waitPod("tidy", "still running", running); p.Status.Reason != "" {
		t.Errorf("tidy pod reason %q", p.Status.Reason)
	}
	_, _, evictions, _ := metrics.snapshot()
	if diff := cmp.Diff(map[string]int{"emptydirfs.limit": 1}, evictions); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
}
