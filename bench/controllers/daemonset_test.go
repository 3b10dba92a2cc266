package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/simulate"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// daemonSetNodes is the cluster size of BenchmarkDaemonSet1000Nodes.
const daemonSetNodes = 1000

// BenchmarkDaemonSet1000Nodes measures the time from the create of one
// DaemonSet on 1,000 simulated nodes until its status reports a pod
// updated and available on every node (seen through a watch), and the
// controller manager's CPU and peak memory meanwhile.
func BenchmarkDaemonSet1000Nodes(b *testing.B) {
	for _, qps := range qpsSettings {
		b.Run(fmt.Sprintf("qps=%d", qps), func(b *testing.B) {
			e := startEnvOf(b, qps, daemonSetNodes)
			var total, cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ns := fmt.Sprintf("bench-ds-%d", i)
				if _, err := e.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					b.Fatalf("create namespace: %v", err)
				}
				waitServiceAccount(b, e.client, ns)
				cpu0 := e.cm.cpu(b)
				total += e.rollOutDaemonSet(b, ns, daemonSetNodes)
				cpu += e.cm.cpu(b) - cpu0
				b.StopTimer()
				e.deleteNamespace(b, ns)
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s_to_available")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cm_cpu_s")
			b.ReportMetric(float64(daemonSetNodes)*float64(b.N)/total.Seconds(), "pods_available/s")
			hwm, rss := e.cm.memory(b)
			b.ReportMetric(float64(hwm)/(1<<20), "cm_peak_rss_MiB")
			b.ReportMetric(float64(rss)/(1<<20), "cm_rss_MiB")
			b.ReportMetric(float64(e.sim.Stats().Errors), "sim_errors")
		})
	}
}

// startEnvOf is startEnv with n nodes (and the simulator's default
// workers, one per 100 nodes).
func startEnvOf(b *testing.B, qps, n int) *env {
	b.Helper()
	c := testapiserver.Start(b)
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	sim := simulate.New(client, simulate.Options{Nodes: n})
	simDone := make(chan error, 1)
	wg.Go(func() { simDone <- sim.Start(ctx) })
	select {
	case <-sim.Ready():
	case err := <-simDone:
		b.Fatalf("simulator: %v", err)
	case <-time.After(5 * time.Minute):
		b.Fatal("simulated nodes not Ready after 5m")
	}
	if *binder {
		b.Fatal("-binder does not apply: daemon pods are pinned to their nodes by node affinity, which only the scheduler reads")
	}
	startScheduler(b, ctx, &wg, c.Config)
	return &env{client: client, sim: sim, cm: startControllerManager(b, c.Kubeconfig(), qps)}
}

// rollOutDaemonSet creates a DaemonSet in ns and returns the time until
// its status reports want pods scheduled, updated and available.
func (e *env) rollOutDaemonSet(b *testing.B, ns string, want int32) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(ns))
	defer func() { cancel(); factory.Shutdown() }()
	done := make(chan struct{})
	var once sync.Once
	var (
		mu   sync.Mutex
		last appsv1.DaemonSetStatus
	)
	check := func(obj any) {
		ds, ok := obj.(*appsv1.DaemonSet)
		if !ok {
			return
		}
		s := ds.Status
		mu.Lock()
		last = s
		mu.Unlock()
		if s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == want && s.UpdatedNumberScheduled == want && s.NumberAvailable == want {
			once.Do(func() { close(done) })
		}
	}
	if _, err := factory.Apps().V1().DaemonSets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, o any) { check(o) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "agent", Image: "agent"}},
				},
			},
		},
	}
	start := time.Now()
	if _, err := e.client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create daemonset: %v", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("daemon set not available after %v: status %+v", time.Since(start), last)
	}
	return time.Since(start)
}
