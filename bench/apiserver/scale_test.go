package apiserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// manyPods is the size of the pod list the issue asks about.
const manyPods = 10000

// BenchmarkListPods10k lists 10,000 pods (one namespace) through the API
// server, one list at a time, in protobuf and in JSON. The list carries no
// resourceVersion, as client-go sends it: a consistent list, which the
// watch cache serves once it has caught up with etcd's newest revision.
// resourceVersion=0 (any cached state) is measured beside it.
func BenchmarkListPods10k(b *testing.B) {
	c := startCluster(b)
	writers := c.clients(b, 32, protobuf)
	createNamespace(b, writers[0], benchNS)
	ctx := context.Background()
	fill, err := runConcurrent(len(writers), manyPods, func(w, i int) error {
		_, err := writers[w].CoreV1().Pods(benchNS).Create(ctx, newPod(fmt.Sprintf("pod-%05d", i)), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatalf("create pods: %v", err)
	}
	b.Logf("created %d pods in %v (%.0f/s, 32 clients)", manyPods, fill.elapsed.Round(time.Millisecond), fill.opsPerSec())

	for _, enc := range []struct{ name, contentType string }{
		{"protobuf", protobuf},
		{"json", runtime.ContentTypeJSON},
	} {
		cs := c.client(b, enc.contentType)
		for _, rv := range []string{"", "0"} {
			// decode=true is a typed client-go List (what a controller
			// pays); decode=false reads the response body and stops, so it
			// is closer to the server's own cost.
			for _, decode := range []bool{true, false} {
				b.Run(fmt.Sprintf("encoding=%s/rv=%q/decode=%t", enc.name, rv, decode), func(b *testing.B) {
					var size int
					r, err := runConcurrent(1, b.N, func(_, _ int) error {
						if !decode {
							body, err := cs.CoreV1().RESTClient().Get().Namespace(benchNS).Resource("pods").
								Param("resourceVersion", rv).SetHeader("Accept", enc.contentType).DoRaw(ctx)
							size = len(body)
							return err
						}
						l, err := cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{ResourceVersion: rv})
						if err == nil && len(l.Items) != manyPods {
							err = fmt.Errorf("listed %d pods, want %d", len(l.Items), manyPods)
						}
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					report(b, "", r)
					if size > 0 {
						b.ReportMetric(float64(size)/(1<<20), "MiB/list")
					}
				})
			}
		}
	}
}

// BenchmarkWatchFanout opens W watches (one client and connection each) on
// the configmaps of a namespace holding one configmap, then one writer
// updates that configmap b.N times. Each update carries its sequence number;
// each watcher notes when it receives it.
//
// mode=serial waits until every watcher has an update before writing the
// next, so it measures the latency of one event's fan-out. mode=stream
// writes as fast as the server accepts updates and never waits, so it
// measures delivery throughput; once the fan-out falls behind the writer,
// its latency is mostly queueing.
//
// Latency is reported twice: from the start of the update request
// (p50/p90/p99_ms, so it includes the write itself) and from the moment the
// update response reached the writer (after_p50/p99_ms, clamped at zero: the
// event often arrives before the response). events/s counts deliveries
// (updates × watchers).
func BenchmarkWatchFanout(b *testing.B) {
	c := startCluster(b)
	writer := c.client(b, protobuf)
	createNamespace(b, writer, benchNS)
	ctx := context.Background()
	cm, err := writer.CoreV1().ConfigMaps(benchNS).Create(ctx, newConfigMap("watched"), metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const maxWatchers = 100
	watchClients := c.clients(b, maxWatchers, protobuf)

	f := &fanout{writer: writer, watchers: watchClients, cm: cm}
	for _, mode := range []string{"serial", "stream"} {
		for _, watchers := range []int{1, 8, 32, maxWatchers} {
			b.Run(fmt.Sprintf("mode=%s/watchers=%d", mode, watchers), func(b *testing.B) {
				f.run(b, watchers, mode == "serial")
			})
		}
	}
}

// fanout is the state BenchmarkWatchFanout carries between runs.
type fanout struct {
	writer   kubernetes.Interface
	watchers []kubernetes.Interface
	cm       *corev1.ConfigMap // the watched configmap as last written
	round    int               // runs so far, to make every value new
}

// run watches with the first w clients and writes b.N updates, waiting for
// every receipt after each update when serial.
func (f *fanout) run(b *testing.B, w int, serial bool) {
	ctx := context.Background()
	n := b.N
	// Values differ between runs: an update that changes nothing may be
	// skipped by the server and send no event.
	f.round++
	tag := fmt.Sprintf("r%d-", f.round)
	// Each watcher starts after the configmap's current version, so it sees
	// exactly the n updates below.
	opts := metav1.ListOptions{ResourceVersion: f.cm.ResourceVersion}
	received := make([][]time.Time, w)
	acks := make(chan struct{}, n*w)
	errs := make(chan error, w) // failures only
	var wg sync.WaitGroup
	ws := make([]watch.Interface, w)
	for i := range ws {
		wi, err := f.watchers[i].CoreV1().ConfigMaps(benchNS).Watch(ctx, opts)
		if err != nil {
			b.Fatalf("watch %d: %v", i, err)
		}
		ws[i] = wi
		received[i] = make([]time.Time, n)
	}
	defer func() {
		for _, wi := range ws {
			wi.Stop()
		}
	}()
	for i, wi := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := collect(wi, tag, received[i], acks); err != nil {
				errs <- fmt.Errorf("watcher %d: %w", i, err)
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()

	starts := make([]time.Time, n)
	ends := make([]time.Time, n)
	b.ResetTimer()
	t0 := time.Now()
	for seq := 0; seq < n; seq++ {
		next := f.cm.DeepCopy()
		next.Data["seq"] = tag + strconv.Itoa(seq)
		starts[seq] = time.Now()
		cm, err := f.writer.CoreV1().ConfigMaps(benchNS).Update(ctx, next, metav1.UpdateOptions{})
		ends[seq] = time.Now()
		if err != nil {
			b.Fatalf("update %d: %v", seq, err)
		}
		f.cm = cm
		if serial {
			waitAcks(b, acks, errs, w)
		}
	}
	select {
	case <-finished:
	case err := <-errs:
		b.Fatal(err)
	case <-time.After(time.Minute):
		b.Fatal("watchers did not receive every update within a minute")
	}
	elapsed := time.Since(t0)
	b.StopTimer()

	fromStart := make([]time.Duration, 0, n*w)
	fromEnd := make([]time.Duration, 0, n*w)
	for _, times := range received {
		for seq, at := range times {
			fromStart = append(fromStart, at.Sub(starts[seq]))
			fromEnd = append(fromEnd, max(0, at.Sub(ends[seq])))
		}
	}
	b.ReportMetric(float64(n*w)/elapsed.Seconds(), "events/s")
	b.ReportMetric(ms(percentile(fromStart, 50)), "p50_ms")
	b.ReportMetric(ms(percentile(fromStart, 90)), "p90_ms")
	b.ReportMetric(ms(percentile(fromStart, 99)), "p99_ms")
	b.ReportMetric(ms(percentile(fromEnd, 50)), "after_p50_ms")
	b.ReportMetric(ms(percentile(fromEnd, 99)), "after_p99_ms")
}

// waitAcks waits for n receipts, failing b if a watcher fails or the
// receipts take more than a minute.
func waitAcks(b *testing.B, acks <-chan struct{}, errs <-chan error, n int) {
	b.Helper()
	timeout := time.After(time.Minute)
	for i := 0; i < n; i++ {
		select {
		case <-acks:
		case err := <-errs:
			b.Fatal(err)
		case <-timeout:
			b.Fatalf("only %d of %d watchers received the update within a minute", i, n)
		}
	}
}

// collect records in at[seq] when the update carrying tag+seq arrived, and
// sends on acks, until every slot is filled. Any other event is an error.
func collect(w watch.Interface, tag string, at []time.Time, acks chan<- struct{}) error {
	for got := 0; got < len(at); {
		ev, ok := <-w.ResultChan()
		now := time.Now()
		if !ok {
			return fmt.Errorf("watch closed after %d of %d events", got, len(at))
		}
		cm, isCM := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Modified || !isCM {
			return fmt.Errorf("unexpected %s event %T", ev.Type, ev.Object)
		}
		seq, err := strconv.Atoi(strings.TrimPrefix(cm.Data["seq"], tag))
		if err != nil || seq < 0 || seq >= len(at) || !at[seq].IsZero() {
			return fmt.Errorf("unexpected seq %q", cm.Data["seq"])
		}
		at[seq] = now
		got++
		acks <- struct{}{}
	}
	return nil
}
