// Package overload measures the API server under a flood (issue #15): one
// client writes as fast as it can while many nodes renew their leases.
package overload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// BenchmarkFloodWithNodeLeases runs once (use -benchtime=1x): NODES nodes
// (default 1000), each with its own system:node identity, renew their
// Lease every 10 s (the kubelet's interval) while FLOODERS goroutines
// (default 600, more than the 300 requests one flow may queue) of one user create config maps as fast as the server
// answers, for DURATION (default 60s), with upstream's default API Priority
// and Fairness configuration and limits. It reports the flood's answers by
// code, the renewals' latency and the longest gap between two renewals of
// one node (over 40 s the node lifecycle controller would mark it
// NotReady).
func BenchmarkFloodWithNodeLeases(b *testing.B) {
	nodes := envInt("NODES", 1000)
	flooders := envInt("FLOODERS", 600)
	if os.Getenv("FLOODERS") == "0" {
		flooders = 0 // the baseline: nodes alone
	}
	// POLITE=1: the flood honours Retry-After as client-go does; otherwise
	// it ignores it (a hostile client).
	politeFlood := os.Getenv("POLITE") == "1"
	duration := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("DURATION")); err == nil {
		duration = d
	}
	c := testapiserver.Start(b)
	admin := c.Clientset()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flood"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	clients := make([]kubernetes.Interface, nodes)
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%04d", i)
		if _, err := admin.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)),
				RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		cert, key, err := c.PKI.IssueClient("system:node:"+name, []string{"system:nodes"}, pki.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfg := c.PKI.ClientRESTConfig(c.Config.Host, cert, key)
		cfg.QPS, cfg.Burst = -1, 0
		if clients[i], err = kubernetes.NewForConfig(cfg); err != nil {
			b.Fatal(err)
		}
	}
	cert, key, err := c.PKI.IssueClient("flooder", []string{"system:authenticated"}, pki.Options{})
	if err != nil {
		b.Fatal(err)
	}
	floodCfg := c.PKI.ClientRESTConfig(c.Config.Host, cert, key)
	floodCfg.NextProtos = []string{"http/1.1"} // one connection per goroutine: no HTTP/2 stream cap on the client side
	httpClient, err := rest.HTTPClientFor(floodCfg)
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	stop := make(chan struct{})
	var codes sync.Map
	var seq atomic.Int64
	var floodWG sync.WaitGroup
	for i := 0; i < flooders; i++ {
		floodWG.Add(1)
		go func() {
			defer floodWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"f-%d"},"data":{"k":"v"}}`, seq.Add(1))
				resp, err := httpClient.Post(c.Config.Host+"/api/v1/namespaces/flood/configmaps", "application/json", strings.NewReader(body))
				code := -1
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
					if code == http.StatusTooManyRequests && politeFlood {
						// As client-go does: wait Retry-After before the next try.
						var secs int
						_, _ = fmt.Sscan(resp.Header.Get("Retry-After"), &secs)
						time.Sleep(time.Duration(max(secs, 1)) * time.Second)
					}
				}
				v, _ := codes.LoadOrStore(code, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
		}()
	}

	var mu sync.Mutex
	var latencies []time.Duration
	var failures atomic.Int64
	maxGap := make([]time.Duration, nodes)
	var nodeWG sync.WaitGroup
	deadline := time.Now().Add(duration)
	for i := 0; i < nodes; i++ {
		nodeWG.Add(1)
		go func(i int) {
			defer nodeWG.Done()
			name := fmt.Sprintf("node-%04d", i)
			last := time.Now()
			// Spread the nodes over the interval, as real kubelets are.
			time.Sleep(time.Duration(i) * 10 * time.Second / time.Duration(nodes))
			for time.Now().Before(deadline) {
				start := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				lease, err := clients[i].CoordinationV1().Leases("kube-node-lease").Get(rctx, name, metav1.GetOptions{})
				if err == nil {
					lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
					_, err = clients[i].CoordinationV1().Leases("kube-node-lease").Update(rctx, lease, metav1.UpdateOptions{})
				}
				cancel()
				now := time.Now()
				if err != nil {
					failures.Add(1)
				} else {
					if gap := now.Sub(last); gap > maxGap[i] {
						maxGap[i] = gap
					}
					last = now
				}
				mu.Lock()
				latencies = append(latencies, now.Sub(start))
				mu.Unlock()
				time.Sleep(10*time.Second - now.Sub(start))
			}
		}(i)
	}
	nodeWG.Wait()
	close(stop)
	floodWG.Wait()
	b.StopTimer()

	got := map[int]int64{}
	codes.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	worstGap := time.Duration(0)
	for _, g := range maxGap {
		worstGap = max(worstGap, g)
	}
	if len(latencies) == 0 {
		b.Fatal("no lease renewal finished")
	}
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	b.Logf("nodes %d, flooders %d (polite %v), %s: flood answers by code %v; lease renewals %d (failed %d), p50 %s p99 %s max %s; longest renewal gap %s",
		nodes, flooders, politeFlood, duration, got, len(latencies), failures.Load(), pct(0.5), pct(0.99), pct(1), worstGap)
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "renew-p99-ms")
	b.ReportMetric(worstGap.Seconds(), "max-renew-gap-s")
	b.ReportMetric(float64(got[http.StatusTooManyRequests]), "flood-429s")
	b.ReportMetric(float64(got[http.StatusCreated]), "flood-201s")
	if failures.Load() > 0 || worstGap > 40*time.Second {
		b.Fatalf("nodes were starved: %d failed renewals, longest gap %s", failures.Load(), worstGap)
	}
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}
