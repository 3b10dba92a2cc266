// Package resourcemetrics is the resource metrics pipeline behind
// metrics.k8s.io: what upstream's metrics-server does as a separate
// deployment, Skiff's API server does in process. It scrapes every node's
// kubelet at /metrics/resource, keeps the last two samples of each node and
// container, and answers with CPU rates (cores over the window between the
// samples) and working-set memory, which `kubectl top` and the horizontal
// pod autoscaler read.
//
// The pipeline runs only while someone reads it: the first read starts it
// (two scrapes a second apart, so that it answers with rates at once), and
// it stops after Idle without a read. A cluster nobody asks about, or one
// made of simulated nodes without kubelets, costs nothing.
package resourcemetrics

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Source reaches the nodes.
type Source interface {
	// Nodes lists the names of the nodes to scrape.
	Nodes(ctx context.Context) ([]string, error)
	// Scrape reads the kubelet's /metrics/resource on node.
	Scrape(ctx context.Context, node string) (io.ReadCloser, error)
}

// Usage is CPU and memory over a window ending at Timestamp.
type Usage struct {
	CPU    resource.Quantity // cores, as upstream's metrics-server reports them
	Memory resource.Quantity // working-set bytes
}

// NodeUsage is one node's usage.
type NodeUsage struct {
	Name      string
	Timestamp time.Time
	Window    time.Duration
	Usage
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

// PodUsage is one pod's usage, container by container.
type PodUsage struct {
	Namespace, Name string
	Timestamp       time.Time
	Window          time.Duration
	Containers      []ContainerUsage
}

// Pipeline scrapes and remembers.
type Pipeline struct {
	src   Source
	clock clock.Clock
	// Resolution is the time between scrapes (metrics-server's
	// --metric-resolution, 15 s). Idle is how long it keeps scraping after
	// the last read.
	Resolution, Idle time.Duration

	mu       sync.Mutex
	lastRead time.Time
	wake     chan struct{}
	ready    chan struct{} // closed once a run has two samples
	nodes    map[string]*series
	pods     map[podKey]map[string]*series // by container
	podSeen  map[podKey]time.Time
}

type podKey struct{ namespace, name string }

// series holds the last two samples of one node or container.
type series struct {
	prev, last sample
	seen       time.Time // the scrape that last reported it
}

type sample struct {
	cpu    float64 // cumulative core-seconds
	cpuAt  time.Time
	memory float64
	ok     bool
}

// New returns a pipeline that reads from src; Run must be running.
func New(src Source, c clock.Clock) *Pipeline {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Pipeline{
		src: src, clock: c, Resolution: 15 * time.Second, Idle: 10 * time.Minute,
		wake: make(chan struct{}, 1), ready: make(chan struct{}),
		nodes: map[string]*series{}, pods: map[podKey]map[string]*series{}, podSeen: map[podKey]time.Time{},
	}
}

// Run scrapes while the pipeline is read, until ctx ends.
func (p *Pipeline) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.scrapeAll(ctx)
		if !p.sleep(ctx, time.Second) {
			return
		}
		p.scrapeAll(ctx)
		p.mu.Lock()
		close(p.ready)
		p.mu.Unlock()
		for p.active() {
			if !p.sleep(ctx, p.Resolution) {
				return
			}
			p.scrapeAll(ctx)
		}
		p.mu.Lock()
		p.ready = make(chan struct{})
		p.nodes, p.pods, p.podSeen = map[string]*series{}, map[podKey]map[string]*series{}, map[podKey]time.Time{}
		p.mu.Unlock()
		klog.V(2).InfoS("resource metrics pipeline idle: stopped scraping", "idle", p.Idle)
	}
}

func (p *Pipeline) sleep(ctx context.Context, d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func (p *Pipeline) active() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clock.Since(p.lastRead) < p.Idle
}

// read marks a read and, when the pipeline was asleep, wakes it and waits
// (at most until ctx ends or five seconds pass) for its first rates.
func (p *Pipeline) read(ctx context.Context) {
	p.mu.Lock()
	p.lastRead = p.clock.Now()
	ready := p.ready
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	t := p.clock.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C():
	}
}

// scrapeAll scrapes every node, eight at a time, each within the resolution.
func (p *Pipeline) scrapeAll(ctx context.Context) {
	nodes, err := p.src.Nodes(ctx)
	if err != nil {
		klog.ErrorS(err, "resource metrics: listing nodes")
		return
	}
	type result struct {
		node     string
		families map[string]*dto.MetricFamily
	}
	results := make(chan result, len(nodes))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sctx, cancel := context.WithTimeout(ctx, min(p.Resolution, 10*time.Second))
			defer cancel()
			fams, err := p.scrape(sctx, n)
			if err != nil {
				klog.V(2).InfoS("resource metrics: scraping a node failed", "node", n, "err", err)
				return
			}
			results <- result{n, fams}
		}()
	}
	wg.Wait()
	close(results)
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	live := map[string]bool{}
	for r := range results {
		live[r.node] = true
		p.store(r.node, r.families, now)
	}
	for n := range p.nodes {
		if !live[n] {
			delete(p.nodes, n)
		}
	}
	// Pods not seen in two rounds are gone (or their node is).
	for k, seen := range p.podSeen {
		if now.Sub(seen) > 2*p.Resolution+time.Second {
			delete(p.podSeen, k)
			delete(p.pods, k)
		}
	}
}

func (p *Pipeline) scrape(ctx context.Context, node string) (map[string]*dto.MetricFamily, error) {
	body, err := p.src.Scrape(ctx, node)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics/resource: %w", err)
	}
	return fams, nil
}

// store records one node's scrape (p.mu held).
func (p *Pipeline) store(node string, fams map[string]*dto.MetricFamily, now time.Time) {
	at := func(m *dto.Metric) time.Time {
		if m.TimestampMs != nil {
			return time.UnixMilli(m.GetTimestampMs())
		}
		return now
	}
	if f := fams["node_cpu_usage_seconds_total"]; f != nil && len(f.Metric) > 0 {
		s := p.nodes[node]
		if s == nil {
			s = &series{}
			p.nodes[node] = s
		}
		m := f.Metric[0]
		next := sample{cpu: value(m), cpuAt: at(m), ok: true}
		if mf := fams["node_memory_working_set_bytes"]; mf != nil && len(mf.Metric) > 0 {
			next.memory = value(mf.Metric[0])
		}
		s.push(next)
	}
	memory := map[[3]string]float64{}
	if f := fams["container_memory_working_set_bytes"]; f != nil {
		for _, m := range f.Metric {
			memory[containerLabels(m)] = value(m)
		}
	}
	if f := fams["container_cpu_usage_seconds_total"]; f != nil {
		for _, m := range f.Metric {
			l := containerLabels(m)
			k := podKey{namespace: l[0], name: l[1]}
			byContainer := p.pods[k]
			if byContainer == nil {
				byContainer = map[string]*series{}
				p.pods[k] = byContainer
			}
			s := byContainer[l[2]]
			if s == nil {
				s = &series{}
				byContainer[l[2]] = s
			}
			s.push(sample{cpu: value(m), cpuAt: at(m), memory: memory[l], ok: true})
			s.seen = now
			p.podSeen[k] = now
		}
	}
}

func (s *series) push(next sample) {
	if s.last.ok && !next.cpuAt.After(s.last.cpuAt) {
		s.last.memory = next.memory // the same CPU sample again
		return
	}
	s.prev, s.last = s.last, next
}

// usage is the rate between the two samples, if there are two and the
// counter did not go back (a restarted container starts again).
func (s *series) usage() (Usage, time.Time, time.Duration, bool) {
	if !s.prev.ok || !s.last.ok || s.last.cpu < s.prev.cpu {
		return Usage{}, time.Time{}, 0, false
	}
	window := s.last.cpuAt.Sub(s.prev.cpuAt)
	if window <= 0 {
		return Usage{}, time.Time{}, 0, false
	}
	cores := (s.last.cpu - s.prev.cpu) / window.Seconds()
	return Usage{
		CPU:    *resource.NewScaledQuantity(int64(cores*1e9), resource.Nano),
		Memory: *resource.NewQuantity(int64(s.last.memory), resource.BinarySI),
	}, s.last.cpuAt, window, true
}

func containerLabels(m *dto.Metric) [3]string {
	var out [3]string
	for _, l := range m.Label {
		switch l.GetName() {
		case "namespace":
			out[0] = l.GetValue()
		case "pod":
			out[1] = l.GetValue()
		case "container":
			out[2] = l.GetValue()
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Nodes returns every node with a usage, by name.
func (p *Pipeline) Nodes(ctx context.Context) []NodeUsage {
	p.read(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []NodeUsage
	for name, s := range p.nodes {
		if u, ts, w, ok := s.usage(); ok {
			out = append(out, NodeUsage{Name: name, Timestamp: ts, Window: w, Usage: u})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pods returns the usage of every pod in namespace ("" for all) whose
// containers all have one, by namespace and name.
func (p *Pipeline) Pods(ctx context.Context, namespace string) []PodUsage {
	p.read(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []PodUsage
	for k, byContainer := range p.pods {
		if namespace != "" && k.namespace != namespace {
			continue
		}
		pu := PodUsage{Namespace: k.namespace, Name: k.name}
		complete := len(byContainer) > 0
		for name, s := range byContainer {
			if s.seen.Before(p.podSeen[k]) {
				continue // a container the pod no longer runs
			}
			u, ts, w, ok := s.usage()
			if !ok {
				complete = false
				break
			}
			if ts.After(pu.Timestamp) {
				pu.Timestamp = ts
			}
			pu.Window = max(pu.Window, w)
			pu.Containers = append(pu.Containers, ContainerUsage{Name: name, Usage: u})
		}
		if !complete {
			continue
		}
		sort.Slice(pu.Containers, func(i, j int) bool { return pu.Containers[i].Name < pu.Containers[j].Name })
		out = append(out, pu)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Start runs the pipeline until ctx ends (the API server's loops are
// started through Start).
func (p *Pipeline) Start(ctx context.Context) error {
	p.Run(ctx)
	return nil
}
