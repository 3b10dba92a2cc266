package scheduler_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/scheduler"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/metrics"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/simulate"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

var (
	flagScale = flag.Int("scale", 1, "divide the node and pod counts of every workload by this (for quick runs)")
	// A kubelet moves bound pods to Running; upstream's scheduler_perf has
	// no kubelets, so by default the simulated nodes wait this long before
	// they do, i.e. not during the measurement.
	flagPodStart    = flag.Duration("pod-start", time.Hour, "delay before simulated nodes move bound pods to Running")
	flagCreators    = flag.Int("creators", 16, "goroutines creating pods")
	flagParallelism = flag.Int("parallelism", 16, "scheduler Filter/Score workers")
	flagTimeout     = flag.Duration("phase-timeout", 10*time.Minute, "how long a phase may take")
)

const protobuf = "application/vnd.kubernetes.protobuf"

// client returns a clientset on its own connection with client-side rate
// limiting off.
func client(b *testing.B, cfg *rest.Config) kubernetes.Interface {
	b.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

func BenchmarkScheduling(b *testing.B) {
	for _, w := range workloads(*flagScale) {
		b.Run(w.name, func(b *testing.B) {
			for range b.N {
				r := runWorkload(b, w)
				b.ReportMetric(r.podsPerSec, "pods/s")
				b.ReportMetric(ms(r.attemptAvg), "attempt_avg_ms")
				b.ReportMetric(ms(r.attemptP50), "attempt_p50_ms")
				b.ReportMetric(ms(r.attemptP90), "attempt_p90_ms")
				b.ReportMetric(ms(r.attemptP99), "attempt_p99_ms")
				b.ReportMetric(ms(r.cycleP50), "cycle_p50_ms")
				b.ReportMetric(ms(r.cycleP99), "cycle_p99_ms")
				b.ReportMetric(ms(r.e2eP50), "e2e_p50_ms")
				b.ReportMetric(ms(r.e2eP99), "e2e_p99_ms")
				b.ReportMetric(r.schedHeapMiB, "sched_heap_MiB")
				b.ReportMetric(r.peakHeapMiB, "proc_peak_heap_MiB")
				b.ReportMetric(peakRSS(), "proc_peak_rss_MiB")
				b.ReportMetric(r.attempts, "attempts")
				b.ReportMetric(r.cpuPerPod, "proc_cpu_ms/pod")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type result struct {
	podsPerSec                                     float64
	attemptAvg, attemptP50, attemptP90, attemptP99 time.Duration
	cycleP50, cycleP99                             time.Duration
	e2eP50, e2eP99                                 time.Duration
	schedHeapMiB, peakHeapMiB                      float64
	attempts                                       float64
	// cpuPerPod is the CPU time of the whole process (API server, etcd,
	// simulator, scheduler, clients) during the measured phase, in ms per
	// measured pod: less sensitive to a shared machine than pods/s.
	cpuPerPod float64
}

func runWorkload(b *testing.B, w workload) result {
	b.Helper()
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testapiserver.StartWithOptions(b, testapiserver.Options{
		Configure: func(cfg *apiserver.Config) { cfg.CompactionInterval = -1 },
	})
	admin := client(b, c.Config)
	for name, value := range w.priorityClasses {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := admin.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	// Nodes.
	start := time.Now()
	opts := simulate.Options{
		Nodes: w.nodes, Zones: w.zones, Pods: 110,
		Memory: resource.MustParse("32Gi"), CPU: resource.MustParse(cmpOr(w.nodeCPU, "4")),
		// Leases renewed every 15 minutes and no status heartbeat: the
		// nodes' background writes stay out of the measurement.
		LeaseDuration: time.Hour, StatusUpdateFrequency: time.Hour,
		PodStartLatency: *flagPodStart,
	}
	sim := simulate.New(client(b, c.Config), opts)
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Start(ctx) }()
	select {
	case <-sim.Ready():
	case err := <-simDone:
		b.Fatalf("simulator: %v", err)
	case <-time.After(*flagTimeout):
		b.Fatalf("%d nodes not ready after %v", w.nodes, *flagTimeout)
	}
	b.Logf("%s: %d nodes ready in %v", w.name, w.nodes, time.Since(start).Round(time.Millisecond))

	// Watch bindings.
	bound := newBindTracker()
	watchCS := client(b, c.Config)
	wf := informers.NewSharedInformerFactoryWithOptions(watchCS, 0, informers.WithNamespace("default"))
	if _, err := wf.Core().V1().Pods().Informer().AddEventHandler(bound); err != nil {
		b.Fatal(err)
	}
	wf.Start(ctx.Done())
	wf.WaitForCacheSync(ctx.Done())

	// The scheduler, in process, with a probe plugin timing each cycle.
	probe := newProbe()
	registry := plugins.NewInTreeRegistry()
	registry[probeName] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return probe, nil }
	profile := plugins.DefaultProfile()
	profile.Plugins.PreFilter.Enabled = []fwruntime.PluginRef{{Name: probeName}}
	profile.Plugins.Reserve.Enabled = []fwruntime.PluginRef{{Name: probeName}}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		b.Fatal(err)
	}
	schedCS := client(b, c.Config)
	factory := informers.NewSharedInformerFactory(schedCS, 0)
	sctx, stopSched := context.WithCancel(ctx)
	sched, err := scheduler.New(sctx, schedCS, factory, scheduler.Options{
		Profiles: []fwruntime.Profile{profile}, Registry: registry,
		Parallelism: *flagParallelism, Metrics: m,
	})
	if err != nil {
		b.Fatal(err)
	}
	schedDone := make(chan error, 1)
	go func() { schedDone <- sched.Run(sctx) }()

	// Initial pods.
	creator := client(b, c.Config)
	start = time.Now()
	createPods(b, ctx, creator, w.initPods, w.initPod, nil)
	bound.waitFor(b, namePrefix(w.initPod), w.initPods, *flagTimeout)
	b.Logf("%s: %d initial pods bound in %v", w.name, w.initPods, time.Since(start).Round(time.Millisecond))

	// Measured pods.
	probe.reset()
	attemptsBefore := histogram(b, reg, "scheduler_scheduling_attempt_duration_seconds")
	peak := watchHeap(ctx)
	created := &sync.Map{}
	b.StartTimer()
	cpu0 := processCPU()
	t0 := time.Now()
	createPods(b, ctx, creator, w.measuredPods, w.measuredPod, created)
	last := bound.waitFor(b, namePrefix(w.measuredPod), w.measuredPods, *flagTimeout)
	b.StopTimer()
	cpuUsed := processCPU() - cpu0
	elapsed := last.Sub(t0)
	attemptsAfter := histogram(b, reg, "scheduler_scheduling_attempt_duration_seconds")

	r := result{podsPerSec: float64(w.measuredPods) / elapsed.Seconds(), cpuPerPod: ms(cpuUsed) / float64(w.measuredPods)}
	count := attemptsAfter.GetSampleCount() - attemptsBefore.GetSampleCount()
	if count > 0 {
		r.attemptAvg = time.Duration((attemptsAfter.GetSampleSum() - attemptsBefore.GetSampleSum()) / float64(count) * float64(time.Second))
		r.attempts = float64(count)
		r.attemptP50 = histQuantile(attemptsBefore, attemptsAfter, 0.50)
		r.attemptP90 = histQuantile(attemptsBefore, attemptsAfter, 0.90)
		r.attemptP99 = histQuantile(attemptsBefore, attemptsAfter, 0.99)
	}
	cycles := probe.durations()
	r.cycleP50, r.cycleP99 = percentile(cycles, 50), percentile(cycles, 99)
	var e2e []time.Duration
	created.Range(func(k, v any) bool {
		if t, ok := bound.boundAt(k.(string)); ok {
			e2e = append(e2e, t.Sub(v.(time.Time)))
		}
		return true
	})
	r.e2eP50, r.e2eP99 = percentile(e2e, 50), percentile(e2e, 99)
	r.peakHeapMiB = float64(peak()) / (1 << 20)

	// The scheduler's heap: in use with it running, less in use once it
	// (its informers, cache and queue) is gone.
	runtime.GC()
	var withSched runtime.MemStats
	runtime.ReadMemStats(&withSched)
	stopSched()
	if err := <-schedDone; err != nil {
		b.Errorf("scheduler: %v", err)
	}
	// Drop the references before measuring.
	sched, factory = nil, nil
	_, _ = sched, factory
	runtime.GC()
	runtime.GC()
	var without runtime.MemStats
	runtime.ReadMemStats(&without)
	r.schedHeapMiB = (float64(withSched.HeapInuse) - float64(without.HeapInuse)) / (1 << 20)

	b.Logf("%s: %d pods in %v: %.0f pods/s; attempts %d avg %v p50 %v p90 %v p99 %v (histogram); cycle p50 %v p99 %v; e2e p50 %v p99 %v; scheduler heap %.0f MiB, process peak heap %.0f MiB; process CPU %.2f ms/pod",
		w.name, w.measuredPods, elapsed.Round(time.Millisecond), r.podsPerSec, count, r.attemptAvg.Round(time.Microsecond),
		r.attemptP50.Round(time.Microsecond), r.attemptP90.Round(time.Microsecond), r.attemptP99.Round(time.Microsecond),
		r.cycleP50.Round(time.Microsecond), r.cycleP99.Round(time.Microsecond), r.e2eP50.Round(time.Millisecond), r.e2eP99.Round(time.Millisecond),
		r.schedHeapMiB, r.peakHeapMiB, r.cpuPerPod)
	cancel()
	if err := <-simDone; err != nil {
		b.Errorf("simulator: %v", err)
	}
	return r
}

// namePrefix is the name of template's pods up to and with the last dash.
func namePrefix(template func(int) *v1.Pod) string {
	n := template(0).Name
	return n[:strings.LastIndex(n, "-")+1]
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// createPods creates n pods from template with the creator goroutines,
// recording each pod's creation start in created (when not nil).
func createPods(b *testing.B, ctx context.Context, cs kubernetes.Interface, n int, template func(int) *v1.Pod, created *sync.Map) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *flagCreators)
	for range *flagCreators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				p := template(i)
				if created != nil {
					created.Store(p.Name, time.Now())
				}
				if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create pod %s: %w", p.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// bindTracker records when each pod was first seen bound.
type bindTracker struct {
	mu    sync.Mutex
	at    map[string]time.Time
	uids  map[types.UID]bool
	count int
	last  time.Time
	cond  *sync.Cond
}

func newBindTracker() *bindTracker {
	t := &bindTracker{at: map[string]time.Time{}, uids: map[types.UID]bool{}}
	t.cond = sync.NewCond(&t.mu)
	return t
}

func (t *bindTracker) observe(obj any) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.uids[p.UID] {
		return
	}
	t.uids[p.UID] = true
	if _, seen := t.at[p.Name]; !seen {
		t.at[p.Name] = now
	}
	t.count++
	t.last = now
	t.cond.Broadcast()
}

func (t *bindTracker) OnAdd(obj any, _ bool) { t.observe(obj) }
func (t *bindTracker) OnUpdate(_, obj any)   { t.observe(obj) }
func (t *bindTracker) OnDelete(any)          {}
func (t *bindTracker) boundAt(name string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.at[name]
	return v, ok
}

var _ toolscache.ResourceEventHandler = (*bindTracker)(nil)

// waitFor waits until n pods whose names start with prefix are bound and
// returns when the last was seen.
func (t *bindTracker) waitFor(b *testing.B, prefix string, n int, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { t.mu.Lock(); t.cond.Broadcast(); t.mu.Unlock() })
	defer timer.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		got := 0
		var last time.Time
		for name, at := range t.at {
			if strings.HasPrefix(name, prefix) {
				got++
				if at.After(last) {
					last = at
				}
			}
		}
		if got >= n {
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s*: %d of %d pods bound after %v", prefix, got, n, timeout)
		}
		t.cond.Wait()
	}
}

// probe is a PreFilter and Reserve plugin that times each successful
// scheduling cycle from PreFilter to Reserve.
type probe struct {
	mu      sync.Mutex
	started map[types.UID]time.Time
	took    []time.Duration
}

const probeName = "BenchProbe"

var (
	_ framework.PreFilterPlugin = (*probe)(nil)
	_ framework.ReservePlugin   = (*probe)(nil)
)

func newProbe() *probe { return &probe{started: map[types.UID]time.Time{}} }

func (*probe) Name() string { return probeName }

func (p *probe) PreFilter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	p.mu.Lock()
	p.started[pod.UID] = time.Now()
	p.mu.Unlock()
	return nil, nil
}

func (*probe) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func (p *probe) Reserve(_ context.Context, _ *framework.CycleState, pod *v1.Pod, _ string) *framework.Status {
	now := time.Now()
	p.mu.Lock()
	if t, ok := p.started[pod.UID]; ok {
		p.took = append(p.took, now.Sub(t))
		delete(p.started, pod.UID)
	}
	p.mu.Unlock()
	return nil
}

func (*probe) Unreserve(context.Context, *framework.CycleState, *v1.Pod, string) {}

func (p *probe) reset() {
	p.mu.Lock()
	p.took = nil
	p.mu.Unlock()
}

func (p *probe) durations() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.took...)
}

// histogram reads one (label-summed) histogram from the registry.
func histogram(b *testing.B, reg *prometheus.Registry, name string) *dto.Histogram {
	b.Helper()
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := &dto.Histogram{}
	var count uint64
	var sum float64
	buckets := map[float64]uint64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
			for _, bk := range h.GetBucket() {
				buckets[bk.GetUpperBound()] += bk.GetCumulativeCount()
			}
		}
	}
	out.SampleCount, out.SampleSum = &count, &sum
	var bounds []float64
	for ub := range buckets {
		bounds = append(bounds, ub)
	}
	sort.Float64s(bounds)
	for _, ub := range bounds {
		c := buckets[ub]
		out.Bucket = append(out.Bucket, &dto.Bucket{UpperBound: &ub, CumulativeCount: &c})
	}
	return out
}

// histQuantile estimates the q-quantile of the observations made between
// two readings of a histogram, interpolating linearly inside a bucket as
// Prometheus's histogram_quantile does.
func histQuantile(before, after *dto.Histogram, q float64) time.Duration {
	prev := map[float64]uint64{}
	for _, bk := range before.GetBucket() {
		prev[bk.GetUpperBound()] = bk.GetCumulativeCount()
	}
	total := float64(after.GetSampleCount() - before.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, lowerCount := 0.0, 0.0
	for _, bk := range after.GetBucket() {
		ub := bk.GetUpperBound()
		c := float64(bk.GetCumulativeCount() - prev[ub])
		if c >= rank {
			frac := 0.0
			if c > lowerCount {
				frac = (rank - lowerCount) / (c - lowerCount)
			}
			return time.Duration((lower + (ub-lower)*frac) * float64(time.Second))
		}
		lower, lowerCount = ub, c
	}
	return time.Duration(lower * float64(time.Second))
}

// percentile is the nearest-rank percentile.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// watchHeap samples the process's heap in use every 100 ms until ctx is
// done; the returned function gives the peak so far.
func watchHeap(ctx context.Context) func() uint64 {
	var peak atomic.Uint64
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peak.Load() {
			peak.Store(m.HeapInuse)
		}
	}
	sample()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 { sample(); return peak.Load() }
}

// peakRSS is the process's peak resident set (VmHWM), in MiB, or 0.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
