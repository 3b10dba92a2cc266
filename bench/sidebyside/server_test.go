package sidebyside_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var (
	memSides      = flag.String("sides", "skiff,upstream", "control planes of BenchmarkServerMemory, comma-separated (skiff, upstream)")
	memConfigMaps = flag.Int("configmaps", 5000, "ConfigMaps BenchmarkServerMemory creates (1 KiB of data each)")
	memPods       = flag.Int("mempods", 10000, "pods BenchmarkServerMemory creates, naming a scheduler that does not run")
	memIdle       = flag.Duration("idle", 30*time.Second, "how long BenchmarkServerMemory lets each control plane idle, and settle after the writes, before reading its memory")
)

// sample is one control plane's memory at one moment, summed over its
// processes, with each process's own figures for the record.
type sample struct {
	rss, hwm, anon int64         // bytes: VmRSS, VmHWM (peak), RssAnon
	cpu            time.Duration // user + system CPU since the start
	procs          []string
}

func (s sample) String() string {
	return fmt.Sprintf("RSS %4d MiB (anon %4d MiB) peak %4d MiB CPU %v  [%s]", s.rss>>20, s.anon>>20, s.hwm>>20, s.cpu.Round(time.Second), strings.Join(s.procs, ", "))
}

// BenchmarkServerMemory compares the memory of `skiff server` (API server,
// etcd, controllers and scheduler in one process; no agent, no cluster
// DNS) with upstream's four processes doing the same work: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler v1.37.2. Each
// side idles for -idle and is read; then 32 protobuf clients create
// -configmaps ConfigMaps of 1 KiB and -mempods pods naming a scheduler
// that does not run (so they stay Pending on both sides, with no node),
// the side settles for -idle, and is read again. Rounds alternate the
// order. Memory is each process's VmRSS, VmHWM and RssAnon from
// /proc/<pid>/status, summed per side.
func BenchmarkServerMemory(b *testing.B) {
	sides := strings.Split(*memSides, ",")
	for _, s := range sides {
		if s != "skiff" && s != "upstream" {
			b.Fatalf("-sides: unknown side %q", s)
		}
	}
	if slices.Contains(sides, "upstream") {
		upstreamBinaries(b, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	}
	type result struct{ idle, loaded sample }
	results := map[string][]result{}
	for i := 0; i < b.N; i++ {
		order := slices.Clone(sides)
		for r := range *rounds {
			for _, side := range order {
				idle, loaded := memoryRun(b, side)
				results[side] = append(results[side], result{idle, loaded})
				fmt.Printf("round %d %-8s idle:   %s\n", r+1, side, idle)
				fmt.Printf("round %d %-8s loaded: %s\n", r+1, side, loaded)
			}
			slices.Reverse(order)
		}
	}
	b.StopTimer()
	med := func(side string, f func(result) int64) float64 {
		v := []float64{}
		for _, r := range results[side] {
			v = append(v, float64(f(r)))
		}
		return medianOf(v)
	}
	figures := []struct {
		name string
		f    func(result) int64
	}{
		{"idle_rss", func(r result) int64 { return r.idle.rss }},
		{"loaded_rss", func(r result) int64 { return r.loaded.rss }},
		{"loaded_anon", func(r result) int64 { return r.loaded.anon }},
		{"peak_rss", func(r result) int64 { return r.loaded.hwm }},
	}
	for _, side := range sides {
		for _, fig := range figures {
			b.ReportMetric(med(side, fig.f)/(1<<20), side+"_"+fig.name+"_MiB")
		}
	}
	if len(results["skiff"]) == 0 || len(results["upstream"]) == 0 {
		return
	}
	var line []string
	for _, fig := range figures {
		ratio := med("skiff", fig.f) / med("upstream", fig.f)
		b.ReportMetric(ratio, fig.name+"_ratio")
		line = append(line, fmt.Sprintf("%s %.2f×", fig.name, ratio))
	}
	fmt.Printf("skiff ÷ upstream (medians of %d rounds): %s\n", *rounds, strings.Join(line, ", "))
}

// memoryRun starts one side on a fresh data directory, reads it idle and
// after the writes, and stops it.
func memoryRun(b *testing.B, side string) (idle, loaded sample) {
	b.Helper()
	dir, err := os.MkdirTemp("", "skiff-sidebyside-mem-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var cp *controlPlane
	switch side {
	case "skiff":
		cp = startSkiff(b, dir, skiffBinary(b))
	case "upstream":
		cp = startUpstream(b, dir, allFour)
	}
	defer cp.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.Sleep(*memIdle)
	idle = cp.memory(b)
	client := cp.client()
	createMemoryWorkload(b, ctx, client)
	time.Sleep(*memIdle)
	loaded = cp.memory(b)
	saveAPIServerHeap(b, ctx, client, "mem-"+side)
	return idle, loaded
}

// saveAPIServerHeap saves the API server's heap after a GC (skiff
// server: all of it) to -profiles, when set, in pprof's format and as
// text ending with the MemStats.
func saveAPIServerHeap(b *testing.B, ctx context.Context, client kubernetes.Interface, name string) {
	b.Helper()
	if *profiles == "" {
		return
	}
	for query, ext := range map[string]string{"gc=1": "heap.pb.gz", "gc=1&debug=1": "heap.txt"} {
		q, _ := url.ParseQuery(query)
		req := client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap")
		for k, v := range q {
			req = req.Param(k, v[0])
		}
		body, err := req.DoRaw(ctx)
		if err != nil {
			b.Fatalf("%s heap profile: %v", name, err)
		}
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*profiles, fmt.Sprintf("%s-%d.%s", name, time.Now().Unix(), ext)), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func (c *controlPlane) memory(b *testing.B) sample {
	b.Helper()
	var s sample
	for _, p := range c.procs {
		select {
		case <-p.done:
			b.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.output()))
		default:
		}
		hwm, rss, anon := p.memoryAnon(b)
		s.rss, s.hwm, s.anon = s.rss+rss, s.hwm+hwm, s.anon+anon
		s.cpu += p.cpu(b)
		s.procs = append(s.procs, fmt.Sprintf("%s %d/%d", p.name, rss>>20, hwm>>20))
	}
	return s
}

// memoryAnon is the process's peak RSS, RSS and anonymous part, bytes.
func (p *proc) memoryAnon(b *testing.B) (hwm, rss, anon int64) {
	b.Helper()
	hwm, rss, file := p.memory(b)
	return hwm, rss, rss - file
}

// createMemoryWorkload creates the ConfigMaps and pods of
// BenchmarkServerMemory in namespace "bench", 32 clients at once.
func createMemoryWorkload(b *testing.B, ctx context.Context, client kubernetes.Interface) {
	b.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Pods name the default ServiceAccount; its controller may be later
	// than the first create.
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	data := strings.Repeat("x", 1024)
	work := make(chan func() error, *memConfigMaps+*memPods)
	for i := range *memConfigMaps {
		work <- func() error {
			_, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"app": "bench"}},
				Data:       map[string]string{"data": data},
			}, metav1.CreateOptions{})
			return err
		}
	}
	for i := range *memPods {
		work <- func() error {
			p := pod(i)
			p.Spec.SchedulerName = "not-running"
			_, err := client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		}
	}
	close(work)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for f := range work {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("create: %v", err)
	}
}
