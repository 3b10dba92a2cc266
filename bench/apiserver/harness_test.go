package apiserver_test

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// cluster is one etcd member and one API server, both in-process, started
// by the shared harness (internal/testing/apiserver) with fsync off.
type cluster struct {
	etcd *clientv3.Client
	cfg  *rest.Config
	// dials counts TCP connections opened by clients made with client().
	dials atomic.Int64
}

// startCluster starts a cluster for b and stops it when b ends. Compaction
// is off so that it does not land in the middle of a measurement, and the
// bootstrap objects are left out: the benchmarks make their own namespace.
func startCluster(b *testing.B) *cluster {
	b.Helper()
	c := testapiserver.StartWithOptions(b, testapiserver.Options{
		Configure:     func(cfg *apiserver.Config) { cfg.CompactionInterval = -1 },
		SkipBootstrap: true,
	})
	return &cluster{etcd: c.Etcd(), cfg: c.Config}
}

// client returns a clientset with its own transport, hence its own TCP
// connection: client-go caches transports by TLS settings and dialer, and a
// distinct Dial function per config defeats the cache. Client-side rate
// limiting is off, and the wire format is contentType.
func (c *cluster) client(b *testing.B, contentType string) kubernetes.Interface {
	b.Helper()
	cfg := rest.CopyConfig(c.cfg)
	cfg.QPS = -1
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatalf("clientset: %v", err)
	}
	return cs
}

// clients returns n clients, each on its own connection: it sends one
// request through each and fails unless that opened n new connections.
func (c *cluster) clients(b *testing.B, n int, contentType string) []kubernetes.Interface {
	b.Helper()
	before := c.dials.Load()
	out := make([]kubernetes.Interface, n)
	for i := range out {
		out[i] = c.client(b, contentType)
		if _, err := out[i].Discovery().ServerVersion(); err != nil {
			b.Fatalf("client %d: %v", i, err)
		}
	}
	if got := c.dials.Load() - before; got != int64(n) {
		b.Fatalf("%d clients opened %d connections, want one each", n, got)
	}
	return out
}

// createNamespace makes namespace ns.
func createNamespace(b *testing.B, cs kubernetes.Interface, ns string) {
	b.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create namespace %s: %v", ns, err)
	}
}

const protobuf = runtime.ContentTypeProtobuf

// result is what a concurrent run measured.
type result struct {
	elapsed   time.Duration
	cpu       time.Duration // CPU time of the whole process (server, etcd and clients)
	latencies []time.Duration
	ops       int
}

// cpuPerOp is the process CPU time per operation. On a shared machine it
// moves less than throughput does when other work takes the cores.
func (r result) cpuPerOp() time.Duration { return r.cpu / time.Duration(r.ops) }

// add folds o into r: a measure taken in several slices.
func (r *result) add(o result) {
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.latencies = append(r.latencies, o.latencies...)
	r.ops += o.ops
}

func (r result) opsPerSec() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// runConcurrent runs n operations spread over workers goroutines (worker w
// calls op(w, i) for the i-th operation it takes) and times each one. The
// first error stops the run and is returned.
func runConcurrent(workers, n int, op func(worker, i int) error) (result, error) {
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	lats := make([][]time.Duration, workers)
	cpu0 := processCPU()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	r := result{elapsed: time.Since(start), cpu: processCPU() - cpu0, ops: n}
	for _, l := range lats {
		r.latencies = append(r.latencies, l...)
	}
	return r, firstErr
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank; ds is
// sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rank := int(p/100*float64(len(ds))+0.5) - 1
	rank = max(0, min(rank, len(ds)-1))
	return ds[rank]
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report records throughput and latency of r under the given prefix
// ("" for the API server, "etcd_" for the baseline).
func report(b *testing.B, prefix string, r result) {
	b.ReportMetric(r.opsPerSec(), prefix+"ops/s")
	b.ReportMetric(ms(percentile(r.latencies, 50)), prefix+"p50_ms")
	b.ReportMetric(ms(percentile(r.latencies, 99)), prefix+"p99_ms")
	b.ReportMetric(float64(r.cpuPerOp())/float64(time.Microsecond), prefix+"cpu_us/op")
}

// reportRatios records api ÷ etcd throughput (ratio) and the same ratio
// computed from CPU time per operation (cpu_ratio: etcd CPU/op ÷ API CPU/op),
// which is what the throughput ratio would be on idle cores if both were
// CPU-bound.
func reportRatios(b *testing.B, api, etcd result) {
	b.ReportMetric(api.opsPerSec()/etcd.opsPerSec(), "ratio")
	if api.cpu > 0 && etcd.cpu > 0 {
		b.ReportMetric(float64(etcd.cpuPerOp())/float64(api.cpuPerOp()), "cpu_ratio")
	}
}
