package resourcemetrics

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// fakeKubelets answers /metrics/resource the way the kubelet does, for
// one node whose counters advance with every scrape by what the test set.
type fakeKubelets struct {
	mu      sync.Mutex
	scrapes int
	// at is the sample time of scrape n; cpu the cumulative core-seconds
	// of each container ("ns/pod/container") at it.
	at  func(n int) time.Time
	cpu func(n int) map[string]float64
}

func (f *fakeKubelets) Nodes(context.Context) ([]string, error) { return []string{"node-a"}, nil }

func (f *fakeKubelets) Scrape(_ context.Context, node string) (io.ReadCloser, error) {
	f.mu.Lock()
	n := f.scrapes
	f.scrapes++
	f.mu.Unlock()
	ts := f.at(n).UnixMilli()
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", float64(n)*1.5, ts)
	fmt.Fprintf(&b, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes 1.073741824e+09 %d\n", ts)
	b.WriteString("# TYPE container_cpu_usage_seconds_total counter\n")
	for key, v := range f.cpu(n) {
		p := strings.Split(key, "/")
		fmt.Fprintf(&b, "container_cpu_usage_seconds_total{container=%q,namespace=%q,pod=%q} %g %d\n", p[2], p[0], p[1], v, ts)
	}
	b.WriteString("# TYPE container_memory_working_set_bytes gauge\n")
	for key := range f.cpu(n) {
		p := strings.Split(key, "/")
		fmt.Fprintf(&b, "container_memory_working_set_bytes{container=%q,namespace=%q,pod=%q} 2.097152e+07 %d\n", p[2], p[0], p[1], ts)
	}
	return io.NopCloser(strings.NewReader(b.String())), nil
}

func TestPipelineRates(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeKubelets{
		// Samples two seconds apart in the kubelet's time.
		at: func(n int) time.Time { return base.Add(time.Duration(n) * 2 * time.Second) },
		cpu: func(n int) map[string]float64 {
			m := map[string]float64{
				"default/web/app":   float64(n) * 0.5, // a quarter of a core
				"default/web/proxy": float64(n) * 0.1, // 50 millicores
				"other/db/db":       float64(n) * 2,   // one core
			}
			if n >= 1 {
				// A container that appears only in the second scrape has no
				// rate yet: its pod is left out.
				m["default/late/app"] = 1
			}
			return m
		},
	}
	p := New(src, clock.RealClock{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)

	nodes := p.Nodes(ctx)
	if len(nodes) != 1 || nodes[0].Name != "node-a" {
		t.Fatalf("nodes = %+v, want node-a", nodes)
	}
	if got := nodes[0].CPU.MilliValue(); got != 750 {
		t.Errorf("node cpu = %dm, want 750m (1.5 core-seconds over 2 s)", got)
	}
	if got := nodes[0].Memory.Value(); got != 1<<30 {
		t.Errorf("node memory = %d, want 1Gi", got)
	}
	if nodes[0].Window != 2*time.Second {
		t.Errorf("window = %v, want 2s", nodes[0].Window)
	}

	all := p.Pods(ctx, "")
	var got []string
	for _, pod := range all {
		for _, c := range pod.Containers {
			got = append(got, fmt.Sprintf("%s/%s/%s=%dm", pod.Namespace, pod.Name, c.Name, c.CPU.MilliValue()))
		}
	}
	want := "default/web/app=250m default/web/proxy=50m other/db/db=1000m"
	if strings.Join(got, " ") != want {
		t.Errorf("pods = %v, want %s", got, want)
	}
	if only := p.Pods(ctx, "other"); len(only) != 1 || only[0].Name != "db" {
		t.Errorf("pods in other = %+v, want db alone", only)
	}
}

func TestSeriesIgnoresACounterThatWentBack(t *testing.T) {
	s := &series{}
	s.push(sample{cpu: 10, cpuAt: time.Unix(100, 0), ok: true})
	s.push(sample{cpu: 2, cpuAt: time.Unix(102, 0), ok: true}) // the container restarted
	if _, _, _, ok := s.usage(); ok {
		t.Fatal("a counter that went back gave a rate")
	}
	s.push(sample{cpu: 4, cpuAt: time.Unix(104, 0), ok: true})
	u, _, w, ok := s.usage()
	if !ok || u.CPU.MilliValue() != 1000 || w != 2*time.Second {
		t.Fatalf("after the restart usage = %v over %v (ok %v), want 1000m over 2s", u.CPU.String(), w, ok)
	}
	// The same sample again changes nothing.
	s.push(sample{cpu: 4, cpuAt: time.Unix(104, 0), ok: true})
	if u, _, _, ok := s.usage(); !ok || u.CPU.MilliValue() != 1000 {
		t.Fatalf("a repeated sample changed the rate to %v", u.CPU.String())
	}
}
