// Package memory measures `skiff server`'s memory (issue #16): idle, and
// what each stored Event costs it.
//
//	go test ./bench/memory/ -run '^$' -bench ServerMemory -benchtime=1x -timeout 30m -v
//	# EVENTS (20000), IDLE (20s), WATCHERS (0) watches of all Events open
//	# meanwhile; SKIFF_BIN reuses a built binary;
//	# HEAP_DIR=dir keeps the heap profiles (idle.pb.gz, events.pb.gz)
//
// One `skiff server --disable-agent --disable-cluster-dns` (API server,
// etcd, controllers and scheduler in one process) starts in a temporary
// directory and stays idle for IDLE; its memory is read; 32 client-go
// clients (protobuf) then create EVENTS Events of the shape the controllers
// record (a pod's Scheduled event, its own name, a message of ~60 bytes),
// and once the watch caches hold them all (apiserver_storage_objects) the
// memory is read again. The heap is what the Go runtime holds live right
// after a collection (/debug/pprof/heap?gc=1, then
// go_memstats_heap_alloc_bytes), so the collector's headroom is not in it.
package memory

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/testing/serverproc"
)

func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkServerMemory reports the idle server's memory and the heap and
// anonymous memory each stored Event adds. One op is the whole run: use
// -benchtime=1x.
func BenchmarkServerMemory(b *testing.B) {
	n := envInt("EVENTS", 20000)
	srv := startServer(b)
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	time.Sleep(envDuration("IDLE", 20*time.Second))
	idle := srv.measure(ctx, b, cs, "idle")
	before := srv.objects(ctx, b, cs)

	// WATCHERS watches of all Events (protobuf, as an informer or event
	// exporter) receive every create: the cache then keeps each Event's
	// encoding too.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	for range envInt("WATCHERS", 0) {
		w, err := cs.CoreV1().Events("").Watch(wctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for range w.ResultChan() {
			}
		}()
	}

	// Two rounds of n: the first includes what grows once and then stays
	// (etcd's in-memory raft log up to its snapshot, buffers), the second
	// is what one more Event costs.
	var size int
	var after [2]memory
	for round := range after {
		size = createEvents(ctx, b, cfg, n, round)
		want := before + 2*n*(round+1) // events and events.k8s.io each count them
		deadline := time.Now().Add(2 * time.Minute)
		for srv.objects(ctx, b, cs) < want {
			if time.Now().After(deadline) {
				b.Fatalf("the caches hold %d objects, want %d", srv.objects(ctx, b, cs), want)
			}
			time.Sleep(time.Second)
		}
		after[round] = srv.measure(ctx, b, cs, fmt.Sprintf("events-%d", (round+1)*n))
	}

	per := func(a, b int64) float64 { return float64(a-b) / float64(n) }
	b.ReportMetric(mib(idle.rss), "idle_rss_MiB")
	b.ReportMetric(mib(idle.pss), "idle_pss_MiB")
	b.ReportMetric(mib(idle.anon), "idle_anon_MiB")
	b.ReportMetric(mib(idle.file), "idle_file_MiB")
	b.ReportMetric(mib(idle.heap), "idle_heap_MiB")
	b.ReportMetric(mib(after[1].rss), "events_rss_MiB")
	b.ReportMetric(mib(after[1].heap), "events_heap_MiB")
	b.ReportMetric(per(after[0].heap, idle.heap), "heap_B/event_first")
	b.ReportMetric(per(after[1].heap, after[0].heap), "heap_B/event")
	b.ReportMetric(per(after[1].anon, after[0].anon), "anon_B/event")
	b.ReportMetric(float64(size), "stored_B/event")
	b.ReportMetric(per(after[1].heap, after[0].heap)/float64(size), "heap/stored")
}

// createEvents creates n Events with 32 clients, each its own connection,
// and returns the protobuf size of one as the server stored it.
func createEvents(ctx context.Context, b *testing.B, cfg *rest.Config, n, round int) int {
	const clients = 32
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		c := *cfg
		c.Dial = (&net.Dialer{}).DialContext // its own transport and connection
		cs := kubernetes.NewForConfigOrDie(&c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := cs.CoreV1().Events("default").Create(ctx, event(round, i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create event: %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ev, err := cs.CoreV1().Events("default").Get(ctx, event(round, 0).Name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := ev.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

// event is a pod's Scheduled event as the scheduler's recorder would write
// it through the core API.
func event(round, i int) *corev1.Event {
	pod := fmt.Sprintf("web-7d4b9c8f6-%05d-%d", i, round)
	now := metav1.NewTime(time.Now())
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod, 0x187a3b2c4d5e6f00+uint64(i))},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: "default", Name: pod, UID: "5c1d3e8a-2f4b-4c6d-9e7f-0a1b2c3d4e5f",
			APIVersion: "v1", ResourceVersion: "123456",
		},
		Reason:         "Scheduled",
		Message:        fmt.Sprintf("Successfully assigned default/%s to node-%03d", pod, i%500),
		Source:         corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
}

type memory struct {
	rss, pss, anon, file, heap int64
}

// measure reads the server's memory after a collection; with HEAP_DIR set
// it keeps the heap profile as HEAP_DIR/<name>.pb.gz.
func (s *server) measure(ctx context.Context, b *testing.B, cs kubernetes.Interface, name string) memory {
	b.Helper()
	prof, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	if dir := os.Getenv("HEAP_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".pb.gz"), prof, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var m memory
	m.heap = int64(s.metric(ctx, b, cs, "go_memstats_heap_alloc_bytes"))
	pid := s.Pid()
	m.rss = serverproc.ProcKiB(pid, "smaps_rollup", "Rss:")
	m.pss = serverproc.ProcKiB(pid, "smaps_rollup", "Pss:")
	m.anon = serverproc.ProcKiB(pid, "smaps_rollup", "Anonymous:")
	m.file = m.rss - m.anon
	b.Logf("%s: RSS %.1f MiB (anonymous %.1f, file %.1f), PSS %.1f MiB, live heap %.1f MiB",
		name, mib(m.rss), mib(m.anon), mib(m.file), mib(m.pss), mib(m.heap))
	return m
}

// objects is the number of objects the watch caches hold.
func (s *server) objects(ctx context.Context, b *testing.B, cs kubernetes.Interface) int {
	return int(s.metric(ctx, b, cs, "apiserver_storage_objects"))
}

// metric sums the samples of one metric of /metrics, whatever their labels.
func (s *server) metric(ctx context.Context, b *testing.B, cs kubernetes.Interface, name string) float64 {
	b.Helper()
	samples, err := serverproc.Metrics(ctx, cs)
	if err != nil {
		b.Fatal(err)
	}
	return serverproc.Sum(samples, name)
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }

// server is the `skiff server` process.
type server struct{ *serverproc.Server }

func startServer(b *testing.B) *server { return &server{serverproc.Start(b)} }
