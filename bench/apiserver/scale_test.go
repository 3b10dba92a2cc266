package apiserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
// the configmaps of a namespace holding one configmap, then one writer updates a configmap b.N
// times in a row without waiting for the watchers. Each update carries its
// sequence number; each watcher notes when it receives it. Latency is
// reported twice: from the start of the update request (p50/p90/p99_ms, so
// it includes the write itself) and from the moment the update response
// reached the writer (after_p50/p99_ms, clamped at zero: the event often
// arrives before the response). events/s counts deliveries (updates ×
// watchers). The writer does not wait for the watchers between updates.
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

	round := 0
	for _, watchers := range []int{1, 8, 32, maxWatchers} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			n := b.N
			// Values differ between runs: an update that changes nothing
			// may be skipped by the server and send no event.
			round++
			tag := fmt.Sprintf("r%d-", round)
			// Each watcher starts after the configmap's current version,
			// so it sees exactly the n updates below.
			opts := metav1.ListOptions{ResourceVersion: cm.ResourceVersion}
			received := make([][]time.Time, watchers)
			done := make(chan error, watchers)
			ws := make([]watch.Interface, watchers)
			for i := range ws {
				w, err := watchClients[i].CoreV1().ConfigMaps(benchNS).Watch(ctx, opts)
				if err != nil {
					b.Fatalf("watch %d: %v", i, err)
				}
				ws[i] = w
				received[i] = make([]time.Time, n)
			}
			for i, w := range ws {
				go func(i int, w watch.Interface) {
					done <- collect(w, tag, received[i])
				}(i, w)
			}

			starts := make([]time.Time, n)
			ends := make([]time.Time, n)
			b.ResetTimer()
			t0 := time.Now()
			for seq := 0; seq < n; seq++ {
				next := cm.DeepCopy()
				next.Data["seq"] = tag + strconv.Itoa(seq)
				starts[seq] = time.Now()
				cm, err = writer.CoreV1().ConfigMaps(benchNS).Update(ctx, next, metav1.UpdateOptions{})
				ends[seq] = time.Now()
				if err != nil {
					b.Fatalf("update %d: %v", seq, err)
				}
			}
			for range ws {
				select {
				case err := <-done:
					if err != nil {
						b.Fatal(err)
					}
				case <-time.After(60 * time.Second):
					b.Fatal("watchers did not receive every update within 60s")
				}
			}
			elapsed := time.Since(t0)
			b.StopTimer()
			for _, w := range ws {
				w.Stop()
			}

			fromStart := make([]time.Duration, 0, n*watchers)
			fromEnd := make([]time.Duration, 0, n*watchers)
			for _, times := range received {
				for seq, at := range times {
					fromStart = append(fromStart, at.Sub(starts[seq]))
					fromEnd = append(fromEnd, max(0, at.Sub(ends[seq])))
				}
			}
			b.ReportMetric(float64(n*watchers)/elapsed.Seconds(), "events/s")
			b.ReportMetric(ms(percentile(fromStart, 50)), "p50_ms")
			b.ReportMetric(ms(percentile(fromStart, 90)), "p90_ms")
			b.ReportMetric(ms(percentile(fromStart, 99)), "p99_ms")
			b.ReportMetric(ms(percentile(fromEnd, 50)), "after_p50_ms")
			b.ReportMetric(ms(percentile(fromEnd, 99)), "after_p99_ms")
		})
	}
}

// collect records in at[seq] when the update carrying tag+seq arrived, until
// every slot is filled. Any other event is an error.
func collect(w watch.Interface, tag string, at []time.Time) error {
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
	}
	return nil
}
