package scheduler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/metrics"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

// BenchmarkCycle measures the scheduler's own work per pod, without the
// API server: each op is one scheduling cycle of the default profile
// (snapshot update, SchedulePod) on the workload's nodes and initial pods,
// after which the pod is assumed on the chosen node as the scheduler loop
// does. Its ns/op, B/op and allocs/op do not depend on the API server and
// vary less with the load of a shared machine than pods/s does.
//
//	go test ./bench/scheduler/ -run '^$' -bench Cycle -benchmem
func BenchmarkCycle(b *testing.B) {
	for _, w := range workloads(*flagScale) {
		if w.priorityClasses != nil {
			continue // preemption needs the API server to evict
		}
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			c := cache.New(cache.Options{})
			for i := range w.nodes {
				c.AddNode(benchNode(i, w))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			logger := klog.Background()
			for i := range w.initPods {
				p := w.initPod(i)
				p.Namespace, p.UID = "default", types.UID(p.Name)
				p.Spec.NodeName = fmt.Sprintf("node-%d", rng.IntN(w.nodes))
				c.AddPod(logger, p)
			}
			snap := cache.NewSnapshot()
			c.UpdateSnapshot(snap)
			// As the scheduler runs it: with the queue's nominator and the
			// metrics (plugins timed in a sample of the cycles).
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			fwk, err := fwruntime.New(ctx, plugins.NewInTreeRegistry(), plugins.DefaultProfile(), fwruntime.Options{
				ClientSet: fake.NewClientset(), SnapshotSharedLister: snap, Parallelism: *flagParallelism, Rand: rand.New(rand.NewPCG(3, 4)),
				PodNominator: queue.NewNominator(), Metrics: m,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i := range b.N {
				pod := w.measuredPod(i)
				pod.Namespace, pod.UID = "default", types.UID(pod.Name)
				c.UpdateSnapshot(snap)
				state := framework.NewCycleState()
				state.SetRecordPluginMetrics(rng.IntN(100) < metrics.PluginMetricsSamplePercent)
				res, err := fwk.SchedulePod(ctx, state, pod)
				if err != nil {
					b.Fatalf("pod %d: %v", i, err)
				}
				pod.Spec.NodeName = res.SuggestedHost
				if err := c.AssumePod(pod); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchNode is a node as the simulator registers it: 110 pods, 32Gi, the
// workload's cpu, hostname and (when the workload has zones) zone labels.
func benchNode(i int, w workload) *v1.Node {
	name := fmt.Sprintf("node-%d", i)
	labels := map[string]string{v1.LabelHostname: name, v1.LabelOSStable: "linux"}
	if len(w.zones) > 0 {
		labels[v1.LabelTopologyZone] = w.zones[i%len(w.zones)]
	}
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cmpOr(w.nodeCPU, "4")),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: v1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}
