package integration

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/scheduler/app"
	"github.com/skiff-sh/skiff/internal/scheduler/config"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/simulate"
)

// runScheduler starts a scheduler App against c until the test ends and
// returns it with its metrics registry and a function that stops it.
func schedRunScheduler(t *testing.T, c *cluster, cfg config.Config, identity string) (*app.App, *prometheus.Registry, func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := app.New(c.Config, app.Options{Config: cfg, Registry: plugins.NewInTreeRegistry(), Identity: identity, Metrics: reg,
		SharedInformers: inProcessInformers(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("scheduler %s: %v", identity, err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("scheduler %s stopped: %v", identity, err)
	}
	return a, reg, stop
}

// runSimNodes starts simulated nodes until the test ends and waits until
// they are Ready.
func schedRunSimNodes(t *testing.T, c *cluster, opts simulate.Options) *simulate.Simulator {
	t.Helper()
	sim := simulate.New(c.Clientset(), opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-sim.Ready():
	case err := <-done:
		t.Fatalf("simulator: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("simulated nodes not ready after 60s")
	}
	return sim
}

func schedPod(ns, name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "batch"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
	}
}

func schedCreatePods(t *testing.T, cs kubernetes.Interface, pods ...*corev1.Pod) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
}

// waitPods polls the namespace's pods until cond holds for all of them.
func schedWaitPods(t *testing.T, cs kubernetes.Interface, ns string, want int, timeout time.Duration, what string, cond func(*corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var bad []string
	for {
		list, err := cs.CoreV1().Pods(ns).List(testCtx(t, 10*time.Second), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bad = bad[:0]
		for i := range list.Items {
			if !cond(&list.Items[i]) {
				bad = append(bad, list.Items[i].Name)
			}
		}
		if len(list.Items) == want && len(bad) == 0 {
			return list.Items
		}
		if time.Now().After(deadline) {
			sort.Strings(bad)
			t.Fatalf("after %v, %d/%d pods are not %s (of %d): %v", timeout, len(bad), want, what, len(list.Items), schedHead(bad, 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func schedHead(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func schedRunning(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning
}
func schedBound(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

// podEvents lists the namespace's events by pod name, for one reason.
func schedPodEvents(t *testing.T, cs kubernetes.Interface, ns, reason string) map[string][]corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(testCtx(t, 10*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Event{}
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Pod" {
			out[e.InvolvedObject.Name] = append(out[e.InvolvedObject.Name], e)
		}
	}
	return out
}

// schedWaitEvents polls until every pod in pods has an event with reason
// (events are written asynchronously), then returns them by pod name.
// Before it returns, the leading scheduler places a sentinel pod (in a
// namespace of its own, with the default-scheduler profile) and its
// Scheduled event is seen: each event is sent by a goroutine of its own as
// soon as it is recorded (kube-scheduler's events library), so a duplicate
// recorded before the sentinel was placed has been sent by then unless the
// API server failed it. The sentinel counts in the scheduler's metrics.
func schedWaitEvents(t *testing.T, cs kubernetes.Interface, ns, reason string, pods []string) map[string][]corev1.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := schedPodEvents(t, cs, ns, reason)
		var missing []string
		for _, p := range pods {
			if len(evs[p]) == 0 {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			schedSentinel(t, cs)
			return schedPodEvents(t, cs, ns, reason)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods without a %s event after 30s: %v", reason, schedHead(missing, 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// schedSentinel creates a small pod in a new namespace and waits for its
// Scheduled event: everything the scheduler handled and recorded before
// has been handled and recorded by then.
func schedSentinel(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ns := newNamespace(t, cs)
	schedCreatePods(t, cs, schedPod(ns, "sentinel", "10m"))
	schedWaitFor(t, 30*time.Second, "the sentinel pod's Scheduled event", func() bool {
		return len(schedPodEvents(t, cs, ns, "Scheduled")["sentinel"]) > 0
	})
}

func schedPodNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func schedDefaultSchedulerConfig(leaderElect bool) config.Config {
	cfg := config.Default(plugins.DefaultProfile())
	cfg.LeaderElection.LeaderElect = leaderElect
	return cfg
}

// schedWaitCounter waits until the metric sums to want: a pod's attempt
// is counted just after its binding, which a list may show first.
func schedWaitCounter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := schedCounterSum(t, reg, name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v after 10s, want %v", name, labels, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func schedCounterSum(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if schedMatchLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func schedMatchLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func TestSchedulerBatchLandsOnSimulatedNodes(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 20, Zones: []string{"zone-a", "zone-b"}})
	_, reg, _ := schedRunScheduler(t, c, schedDefaultSchedulerConfig(false), "solo")
	ns := newNamespace(t, cs)

	const n = 100
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, schedPod(ns, fmt.Sprintf("web-%03d", i), "100m"))
	}
	start := time.Now()
	schedCreatePods(t, cs, pods...)
	created := time.Since(start)
	schedWaitPods(t, cs, ns, n, 60*time.Second, "bound", schedBound)
	boundIn := time.Since(start)
	list := schedWaitPods(t, cs, ns, n, 60*time.Second, "Running", schedRunning)
	t.Logf("%d pods created in %v, all bound after %v (%.0f pods/s end to end), Running after %v", n, created, boundIn, n/boundIn.Seconds(), time.Since(start))

	perNode := map[string]int{}
	for _, p := range list {
		perNode[p.Spec.NodeName]++
	}
	// 100 small pods on 20 equal nodes: the scores spread them.
	if len(perNode) < 15 {
		t.Errorf("pods landed on only %d of 20 nodes: %v", len(perNode), perNode)
	}
	for node, k := range perNode {
		if k > 10 {
			t.Errorf("node %s got %d pods; the spreading scores should keep it near 5", node, k)
		}
	}
	// The counters before the events: schedWaitEvents schedules a sentinel.
	schedWaitCounter(t, reg, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled", "profile": "default-scheduler"}, n)
	if got := schedCounterSum(t, reg, "scheduler_pending_pods", nil); got != 0 {
		t.Errorf("scheduler_pending_pods sums to %v after all were placed", got)
	}
	scheduled := schedWaitEvents(t, cs, ns, "Scheduled", schedPodNames(list))
	for _, p := range list {
		evs := scheduled[p.Name]
		want := fmt.Sprintf("Successfully assigned %s/%s to %s", ns, p.Name, p.Spec.NodeName)
		// kube-scheduler's events.k8s.io/v1 event, read as core/v1: no
		// source, the reporting controller and instance instead.
		if len(evs) != 1 || evs[0].Message != want || evs[0].ReportingController != "default-scheduler" || evs[0].Action != "Binding" ||
			!strings.HasPrefix(evs[0].ReportingInstance, "default-scheduler-") || evs[0].Type != corev1.EventTypeNormal {
			t.Errorf("pod %s: Scheduled events %+v, want one %q from default-scheduler", p.Name, evs, want)
			break
		}
	}
}

func TestSchedulerUnschedulableUntilNodeAdded(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 3})
	_, reg, _ := schedRunScheduler(t, c, schedDefaultSchedulerConfig(false), "solo")
	ns := newNamespace(t, cs)
	schedCreatePods(t, cs, schedPod(ns, "big", "10"))

	// FailedScheduling with upstream's message, and the pod condition.
	const wantMsg = "0/3 nodes are available: 3 Insufficient cpu."
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := schedPodEvents(t, cs, ns, "FailedScheduling")["big"]
		if len(evs) > 0 {
			if !strings.HasPrefix(evs[0].Message, wantMsg) || evs[0].Type != corev1.EventTypeWarning || evs[0].ReportingController != "default-scheduler" || evs[0].Action != "Scheduling" {
				t.Fatalf("FailedScheduling event = %s %q from %q (action %q), want Warning %q... from default-scheduler", evs[0].Type, evs[0].Message, evs[0].ReportingController, evs[0].Action, wantMsg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no FailedScheduling event for pod big")
		}
		time.Sleep(100 * time.Millisecond)
	}
	schedWaitPods(t, cs, ns, 1, 10*time.Second, "marked Unschedulable", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable && strings.HasPrefix(cond.Message, wantMsg)
			}
		}
		return false
	})
	if got := schedCounterSum(t, reg, "scheduler_pending_pods", map[string]string{"queue": "unschedulable"}); got != 1 {
		t.Errorf("scheduler_pending_pods{queue=unschedulable} = %v, want 1", got)
	}

	// A node big enough arrives: the pod is moved from the unschedulable
	// pods by the node event (well before the 5-minute flush) and placed.
	start := time.Now()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 1, NamePrefix: "big-node-", CPU: resource.MustParse("16")})
	list := schedWaitPods(t, cs, ns, 1, 30*time.Second, "Running", schedRunning)
	if list[0].Spec.NodeName != "big-node-0" {
		t.Errorf("pod placed on %s, want big-node-0", list[0].Spec.NodeName)
	}
	t.Logf("placed %v after the big node was started", time.Since(start).Round(time.Millisecond))
}

func TestSchedulerLeaderElectionNeverDoubleBinds(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 10})
	first, firstReg, stopFirst := schedRunScheduler(t, c, schedDefaultSchedulerConfig(true), "sched-a")
	schedWaitFor(t, 20*time.Second, "sched-a to lead", first.Leading)
	second, secondReg, _ := schedRunScheduler(t, c, schedDefaultSchedulerConfig(true), "sched-b")

	ns := newNamespace(t, cs)
	var pods []*corev1.Pod
	for i := range 60 {
		pods = append(pods, schedPod(ns, fmt.Sprintf("p-%02d", i), "50m"))
	}
	schedCreatePods(t, cs, pods...)
	list := schedWaitPods(t, cs, ns, 60, 60*time.Second, "bound", schedBound)
	if second.Leading() {
		t.Fatal("both schedulers lead")
	}
	// The counters before the events: schedWaitEvents schedules a sentinel.
	schedWaitCounter(t, firstReg, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}, 60)
	scheduled := schedWaitEvents(t, cs, ns, "Scheduled", schedPodNames(list))
	for _, p := range list {
		evs := scheduled[p.Name]
		// Both schedulers run on this host, and the events' reporting
		// instance is kube-scheduler's, <profile>-<hostname>: the metrics,
		// not the events, tell which scheduler placed a pod.
		count := int32(0)
		for _, e := range evs {
			count += max(e.Count, 1)
			if e.Series != nil {
				count += e.Series.Count - 1
			}
		}
		if count != 1 {
			t.Errorf("pod %s: %d Scheduled events, want exactly 1", p.Name, count)
		}
	}
	if got := schedCounterSum(t, secondReg, "scheduler_schedule_attempts_total", nil); got != 0 {
		t.Errorf("the follower made %v scheduling attempts", got)
	}
	lease, err := cs.CoordinationV1().Leases("kube-system").Get(testCtx(t, 5*time.Second), "kube-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "sched-a" {
		t.Fatalf("lease kube-system/kube-scheduler = %+v, %v; want held by sched-a", lease, err)
	}

	// The leader stops and releases the Lease; the follower takes over.
	stopFirst()
	schedWaitFor(t, 30*time.Second, "sched-b to lead", second.Leading)
	var more []*corev1.Pod
	for i := range 10 {
		more = append(more, schedPod(ns, fmt.Sprintf("q-%02d", i), "50m"))
	}
	schedCreatePods(t, cs, more...)
	all := schedWaitPods(t, cs, ns, 70, 60*time.Second, "bound", schedBound)
	scheduled = schedWaitEvents(t, cs, ns, "Scheduled", schedPodNames(all))
	for _, p := range more {
		if evs := scheduled[p.Name]; len(evs) != 1 {
			t.Errorf("pod %s: Scheduled events %+v, want one", p.Name, evs)
		}
	}
	// The sentinel schedWaitEvents placed counts too.
	schedWaitCounter(t, secondReg, "scheduler_schedule_attempts_total", map[string]string{"result": "scheduled"}, 10+1)
}

func TestSchedulerProfileBySchedulerName(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 4})
	cfg, err := config.Decode([]byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  plugins:
    multiPoint:
      enabled:
      - name: NodeResourcesFit
        weight: 10
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
`), plugins.NewInTreeRegistry(), plugins.DefaultProfile())
	if err != nil {
		t.Fatal(err)
	}
	_, reg, _ := schedRunScheduler(t, c, cfg, "solo")
	ns := newNamespace(t, cs)

	// Bin-packing: one after the other, each lands where the last did.
	for i := range 4 {
		p := schedPod(ns, fmt.Sprintf("packed-%d", i), "500m")
		p.Spec.SchedulerName = "bin-packer"
		schedCreatePods(t, cs, p)
		schedWaitPods(t, cs, ns, i+1, 30*time.Second, "bound", schedBound)
	}
	other := schedPod(ns, "other", "100m")
	other.Spec.SchedulerName = "someone-else"
	schedCreatePods(t, cs, other)

	list, err := cs.CoreV1().Pods(ns).List(testCtx(t, 5*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range list.Items {
		if p.Spec.SchedulerName == "bin-packer" {
			nodes[p.Spec.NodeName] = true
		}
	}
	if len(nodes) != 1 {
		t.Errorf("bin-packer spread its pods over %v, want one node", nodes)
	}
	// schedWaitEvents places a sentinel pod created after "other": once it
	// is scheduled, the scheduler has seen "other" too.
	scheduled := schedWaitEvents(t, cs, ns, "Scheduled", []string{"packed-0"})
	if evs := scheduled["packed-0"]; len(evs) != 1 || evs[0].ReportingController != "bin-packer" {
		t.Errorf("packed-0 Scheduled events %+v, want one from bin-packer", evs)
	}
	if got := schedCounterSum(t, reg, "scheduler_schedule_attempts_total", map[string]string{"profile": "bin-packer", "result": "scheduled"}); got != 4 {
		t.Errorf("bin-packer attempts = %v, want 4", got)
	}
	// A pod for a scheduler we do not run is left alone.
	got, err := cs.CoreV1().Pods(ns).Get(testCtx(t, 5*time.Second), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" || len(got.Status.Conditions) != 0 {
		t.Errorf("pod for someone-else was touched: node %q conditions %+v", got.Spec.NodeName, got.Status.Conditions)
	}
}

func schedWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSchedulerSpeaksProtobuf: like kube-scheduler, a scheduler with its
// own informers (as `skiff scheduler` runs) lists, watches, binds and
// writes events in protobuf unless its configuration names another
// content type.
func TestSchedulerSpeaksProtobuf(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 2})
	type seen struct{ method, path, contentType, accept string }
	var mu sync.Mutex
	var requests []seen
	cfg := rest.CopyConfig(c.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "", "" // the scheduler's configuration decides
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			requests = append(requests, seen{r.Method, r.URL.Path + "?" + r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept")})
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	a, err := app.New(cfg, app.Options{Config: schedDefaultSchedulerConfig(false), Registry: plugins.NewInTreeRegistry(), Identity: "protobuf", Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ns := newNamespace(t, cs)
	schedCreatePods(t, cs, schedPod(ns, "p", "100m"))
	schedWaitPods(t, cs, ns, 1, 60*time.Second, "bound", schedBound)
	schedWaitEvents(t, cs, ns, "Scheduled", []string{"p"})

	const protobuf = "application/vnd.kubernetes.protobuf"
	mu.Lock()
	defer mu.Unlock()
	var binding, event, podWatch bool
	for _, r := range requests {
		switch {
		case r.method == http.MethodPost && strings.HasSuffix(r.path, "/pods/p/binding?"):
			binding = true
			if r.contentType != protobuf || !strings.HasPrefix(r.accept, protobuf) {
				t.Errorf("binding sent as %q, accepting %q; want protobuf", r.contentType, r.accept)
			}
		case r.method == http.MethodPost && strings.Contains(r.path, "/namespaces/"+ns+"/events"):
			event = true
			if r.contentType != protobuf {
				t.Errorf("event sent as %q; want protobuf", r.contentType)
			}
		case r.method == http.MethodGet && strings.HasPrefix(r.path, "/api/v1/pods?") && strings.Contains(r.path, "watch=true"):
			podWatch = true
			if !strings.HasPrefix(r.accept, protobuf) {
				t.Errorf("pods watched accepting %q; want protobuf", r.accept)
			}
		}
	}
	if !binding || !event || !podWatch {
		t.Errorf("requests seen: binding %v, event %v, pod watch %v; want all three", binding, event, podWatch)
	}
}

// TestSchedulerRecordsEveryScheduledEvent: a backlog of thousands of pods
// placed at once gets one Scheduled event each, as from kube-scheduler.
// The core/v1 event broadcaster Skiff used before wrote one event at a time
// and dropped those its queue of 1,000 could not hold: most of a burst's
// events were lost (bench/README.md, session 17).
func TestSchedulerRecordsEveryScheduledEvent(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	schedRunSimNodes(t, c, simulate.Options{Nodes: 40})
	ns := newNamespace(t, cs)
	const n = 4000
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if _, err := cs.CoreV1().Pods(ns).Create(testCtx(t, 60*time.Second), schedPod(ns, fmt.Sprintf("b-%04d", i), "10m"), metav1.CreateOptions{}); err != nil {
					t.Errorf("create pod: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// The scheduler starts with the whole backlog waiting.
	schedRunScheduler(t, c, schedDefaultSchedulerConfig(false), "burst")
	schedWaitPods(t, cs, ns, n, 3*time.Minute, "bound", schedBound)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		list, err := cs.CoreV1().Events(ns).List(testCtx(t, 30*time.Second), metav1.ListOptions{FieldSelector: "reason=Scheduled"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Scheduled events for %d bound pods a minute after the last binding", len(list.Items), n)
		}
	}
}
