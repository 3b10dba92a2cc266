package runtime_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// nominator is a fixed set of nominations.
type nominator map[string][]*framework.PodInfo

func (n nominator) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

func nominated(node string, pods ...*v1.Pod) nominator {
	n := nominator{}
	for _, p := range pods {
		n[node] = append(n[node], framework.MustPodInfo(p))
	}
	return n
}

func TestRunFilterPluginsWithNominatedPods(t *testing.T) {
	node := st.MakeNode("n1").Capacity(map[string]string{"cpu": "4", "memory": "8Gi"}).Obj()
	bound := st.MakePod().Name("bound").Node("n1").Req(map[string]string{"cpu": "2"}).Obj()
	cpu2 := func(name string, priority int32) *st.PodWrapper {
		return st.MakePod().Name(name).Req(map[string]string{"cpu": "2"}).Priority(priority)
	}
	pod := cpu2("pod", 10).Obj()
	cases := []struct {
		name      string
		pod       *v1.Pod
		nominated nominator
		want      string // the failure reason, "" when it fits
	}{
		{name: "no nominations", pod: pod, want: ""},
		{name: "higher priority nominated pod holds the room", pod: pod, nominated: nominated("n1", cpu2("preemptor", 100).Obj()), want: "Insufficient cpu"},
		{name: "equal priority nominated pod holds the room", pod: pod, nominated: nominated("n1", cpu2("peer", 10).Obj()), want: "Insufficient cpu"},
		{name: "lower priority nominated pod yields", pod: pod, nominated: nominated("n1", cpu2("low", 1).Obj()), want: ""},
		{name: "the pod's own nomination is not counted", pod: pod, nominated: nominated("n1", pod), want: ""},
		{name: "nominations to other nodes do not count", pod: pod, nominated: nominated("n2", cpu2("preemptor", 100).Obj()), want: ""},
		{
			// The first pass (with the nominated pod) passes, the second
			// (without it) fails: the pod needs an affine pod that is only
			// nominated, not running.
			name:      "affinity must hold without the nominated pods",
			pod:       st.MakePod().Name("follower").Priority(10).PodAffinity(st.Term("app", "db", v1.LabelHostname)).Obj(),
			nominated: nominated("n1", st.MakePod().Name("db").Label("app", "db").Priority(100).Obj()),
			want:      "node(s) didn't match pod affinity rules",
		},
		{
			name:      "anti-affinity to a nominated pod",
			pod:       st.MakePod().Name("loner").Priority(10).PodAntiAffinity(st.Term("app", "db", v1.LabelHostname)).Obj(),
			nominated: nominated("n1", st.MakePod().Name("db").Label("app", "db").Priority(100).Obj()),
			want:      "node(s) didn't match pod anti-affinity rules",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			snap := framework.NewSnapshot([]*v1.Pod{bound}, []*v1.Node{node, st.MakeNode("n2").Obj()})
			f, err := runtime.New(ctx, plugins.NewInTreeRegistry(), plugins.DefaultProfile(), runtime.Options{
				ClientSet: fake.NewClientset(), SnapshotSharedLister: snap, PodNominator: tc.nominated,
			})
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			if _, s := f.RunPreFilterPlugins(ctx, state, tc.pod); !s.IsSuccess() {
				t.Fatalf("PreFilter: %v", s)
			}
			ni, err := snap.Get("n1")
			if err != nil {
				t.Fatal(err)
			}
			before := len(ni.Pods)
			got := f.RunFilterPluginsWithNominatedPods(ctx, state, tc.pod, ni).Message()
			if got != tc.want {
				t.Errorf("status %q, want %q", got, tc.want)
			}
			if len(ni.Pods) != before {
				t.Errorf("the snapshot's node changed: %d pods, want %d", len(ni.Pods), before)
			}
		})
	}
}

// recorder is a MetricsRecorder that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	points  []string
	plugins map[string]int
}

func (r *recorder) ObserveExtensionPoint(point, status, profile string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.points = append(r.points, point+"/"+status+"/"+profile)
}

func (r *recorder) ObservePlugin(point, plugin, status string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plugins[point+"/"+plugin+"/"+status]++
}

func TestMetricsHook(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Capacity(map[string]string{"cpu": "4", "memory": "8Gi"}).Obj(),
		st.MakeNode("b").Capacity(map[string]string{"cpu": "4", "memory": "8Gi"}).Obj(),
	}
	for _, tc := range []struct {
		name        string
		sampled     bool
		pod         *v1.Pod
		wantPoints  []string
		wantPlugins map[string]int
	}{
		{
			name: "not sampled", pod: st.MakePod().Name("p").Req(map[string]string{"cpu": "1"}).Obj(),
			wantPoints:  []string{"PreFilter/Success/default-scheduler", "Filter/Success/default-scheduler", "PreScore/Success/default-scheduler", "Score/Success/default-scheduler"},
			wantPlugins: map[string]int{},
		},
		{
			name: "sampled", sampled: true, pod: st.MakePod().Name("p").Req(map[string]string{"cpu": "1"}).Obj(),
			wantPoints: []string{"PreFilter/Success/default-scheduler", "Filter/Success/default-scheduler", "PreScore/Success/default-scheduler", "Score/Success/default-scheduler"},
			wantPlugins: map[string]int{
				// Once a cycle for PreFilter and PreScore, once a node for
				// Filter and Score.
				"PreFilter/NodeResourcesFit/Success":            1,
				"PreFilter/PodTopologySpread/Skip":              1,
				"Filter/NodeResourcesFit/Success":               2,
				"Filter/TaintToleration/Success":                2,
				"PreScore/ImageLocality/Skip":                   1,
				"Score/NodeResourcesFit/Success":                2,
				"Score/NodeResourcesBalancedAllocation/Success": 2,
			},
		},
		{
			name: "rejected", pod: st.MakePod().Name("p").Req(map[string]string{"cpu": "9"}).Obj(),
			// Filter found no node: no scoring.
			wantPoints:  []string{"PreFilter/Success/default-scheduler", "Filter/Success/default-scheduler"},
			wantPlugins: map[string]int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{plugins: map[string]int{}}
			f, err := runtime.New(context.Background(), plugins.NewInTreeRegistry(), plugins.DefaultProfile(), runtime.Options{
				ClientSet: fake.NewClientset(), SnapshotSharedLister: framework.NewSnapshot(nil, nodes),
				Metrics: rec, Rand: rand.New(rand.NewPCG(1, 1)),
			})
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			state.SetRecordPluginMetrics(tc.sampled)
			_, _ = f.SchedulePod(context.Background(), state, tc.pod)
			if diff := cmp.Diff(tc.wantPoints, rec.points); diff != "" {
				t.Errorf("extension points (-want +got):\n%s", diff)
			}
			// Only the plugins named in the want are compared.
			got := map[string]int{}
			for k := range tc.wantPlugins {
				got[k] = rec.plugins[k]
			}
			if diff := cmp.Diff(tc.wantPlugins, got); diff != "" {
				t.Errorf("plugins (-want +got):\n%s", diff)
			}
			if !tc.sampled && len(rec.plugins) > 0 {
				t.Errorf("plugins timed in a cycle not sampled: %v", rec.plugins)
			}
		})
	}
}
