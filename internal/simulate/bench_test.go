package simulate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/simulate"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

func benchClient(b *testing.B, c *testapiserver.Cluster) kubernetes.Interface {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// BenchmarkRegister measures how fast nodes register and become Ready
// (node create, taint removal, lease create), in-process.
func BenchmarkRegister(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			c := testapiserver.Start(b)
			cs := benchClient(b, c)
			b.ResetTimer()
			for i := range b.N {
				sim := simulate.New(cs, simulate.Options{Nodes: n, NamePrefix: fmt.Sprintf("b%d-", i), DeleteNodesOnExit: true})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- sim.Start(ctx) }()
				<-sim.Ready()
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "nodes/s")
				b.StopTimer()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkPodsRunning measures pods moved to Running per second: pods are
// created already bound (spec.nodeName) by 16 writers over 100 nodes, and
// the clock stops when the last one is Running.
func BenchmarkPodsRunning(b *testing.B) {
	c := testapiserver.Start(b)
	cs := benchClient(b, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := simulate.New(cs, simulate.Options{Nodes: 100})
	go func() { _ = sim.Start(ctx) }()
	<-sim.Ready()

	const pods = 2000
	for i := range b.N {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.phase", "Running").String()})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for j := next.Add(1) - 1; j < pods; j = next.Add(1) - 1 {
					pod := &corev1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", j)},
						Spec: corev1.PodSpec{
							NodeName:   fmt.Sprintf("%s%d", simulate.DefaultNamePrefix, j%100),
							Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}},
						},
					}
					if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		created := make(chan time.Duration, 1)
		go func() { wg.Wait(); created <- time.Since(start) }()
		running := 0
		timeout := time.After(2 * time.Minute)
		for running < pods {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Added {
					running++
				}
			case <-timeout:
				b.Fatalf("%d of %d pods Running after 2m", running, pods)
			}
		}
		elapsed := time.Since(start)
		w.Stop()
		b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
		b.ReportMetric((<-created).Seconds(), "s-to-create")
	}
}
