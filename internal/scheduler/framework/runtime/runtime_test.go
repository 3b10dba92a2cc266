package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func TestNumFeasibleNodesToFind(t *testing.T) {
	cases := []struct {
		percentage int32
		nodes      int
		want       int
	}{
		{0, 10, 10},
		{0, 99, 99},
		{0, 1000, 420},   // 50 - 1000/125 = 42%
		{0, 5000, 500},   // 50 - 40 = 10%
		{0, 6000, 300},   // 50 - 48 = 2% → 5%
		{0, 150, 75 + 0}, // 49% of 150 = 73 → at least 100
		{10, 1000, 100},
		{40, 1000, 400},
		{100, 5000, 5000},
	}
	cases[5].want = 100
	for _, tc := range cases {
		if got := runtime.NumFeasibleNodesToFind(tc.percentage, tc.nodes); got != tc.want {
			t.Errorf("NumFeasibleNodesToFind(%d, %d) = %d, want %d", tc.percentage, tc.nodes, got, tc.want)
		}
	}
}

func newFramework(t *testing.T, pods []*v1.Pod, nodes []*v1.Node, profile runtime.Profile, seed uint64) *runtime.Framework {
	t.Helper()
	f, err := runtime.New(context.Background(), plugins.NewInTreeRegistry(), profile, runtime.Options{
		ClientSet:            fake.NewClientset(),
		SnapshotSharedLister: framework.NewSnapshot(pods, nodes),
		Rand:                 rand.New(rand.NewPCG(seed, seed)),
		Parallelism:          4,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSchedulePodDefaultProfile(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("small").Capacity(map[string]string{"cpu": "1", "memory": "1Gi"}).Obj(),
		st.MakeNode("tainted").Capacity(map[string]string{"cpu": "8", "memory": "8Gi"}).Taint("dedicated", "gpu", v1.TaintEffectNoSchedule).Obj(),
		st.MakeNode("busy").Capacity(map[string]string{"cpu": "8", "memory": "8Gi"}).Obj(),
		st.MakeNode("free").Capacity(map[string]string{"cpu": "8", "memory": "8Gi"}).Obj(),
	}
	pods := []*v1.Pod{st.MakePod().Name("x").Node("busy").Req(map[string]string{"cpu": "6", "memory": "6Gi"}).Obj()}
	cases := []struct {
		name    string
		pod     *v1.Pod
		want    string
		wantErr string
	}{
		{name: "least allocated wins", pod: st.MakePod().Name("p").Req(map[string]string{"cpu": "1", "memory": "512Mi"}).Obj(), want: "free"},
		{
			name:    "nothing fits",
			pod:     st.MakePod().Name("p").Req(map[string]string{"cpu": "9"}).Obj(),
			wantErr: "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu.",
		},
		{
			name:    "node affinity and resources",
			pod:     st.MakePod().Name("p").Req(map[string]string{"cpu": "4"}).NodeSelector(map[string]string{"kubernetes.io/hostname": "busy"}).Obj(),
			wantErr: "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match Pod's node affinity/selector.",
		},
		{name: "tolerated taint", pod: st.MakePod().Name("p").Req(map[string]string{"cpu": "4"}).NodeSelector(map[string]string{"kubernetes.io/hostname": "tainted"}).
			Toleration(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpExists}).Obj(), want: "tainted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFramework(t, pods, nodes, plugins.DefaultProfile(), 1)
			res, err := f.SchedulePod(context.Background(), framework.NewCycleState(), tc.pod)
			if tc.wantErr != "" {
				var fe *runtime.FitError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a FitError", err)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("message (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.SuggestedHost != tc.want {
				t.Errorf("host = %q, want %q", res.SuggestedHost, tc.want)
			}
		})
	}
}

func TestPreFilterResultNamesNoNode(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("a").Obj(), st.MakeNode("b").Obj()}
	pod := st.MakePod().Name("p").Obj()
	pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
		{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"c"}}}}}}}}
	f := newFramework(t, nil, nodes, plugins.DefaultProfile(), 1)
	_, err := f.SchedulePod(context.Background(), framework.NewCycleState(), pod)
	want := "0/2 nodes are available: node is filtered out by the prefilter result."
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestSelectHostSpreadsTies(t *testing.T) {
	var nodes []*v1.Node
	for _, n := range []string{"a", "b", "c"} {
		nodes = append(nodes, st.MakeNode(n).Capacity(map[string]string{"cpu": "4", "memory": "4Gi"}).Obj())
	}
	f := newFramework(t, nil, nodes, plugins.DefaultProfile(), 7)
	seen := map[string]int{}
	for range 60 {
		res, err := f.SchedulePod(context.Background(), framework.NewCycleState(), st.MakePod().Name("p").Obj())
		if err != nil {
			t.Fatal(err)
		}
		seen[res.SuggestedHost]++
	}
	if len(seen) != 3 {
		t.Errorf("ties were not spread over the equal nodes: %v", seen)
	}
}

func TestProfileBuilding(t *testing.T) {
	p := plugins.DefaultProfile()
	p.Plugins.Score.Disabled = []runtime.PluginRef{{Name: "ImageLocality"}}
	p.Plugins.Score.Enabled = []runtime.PluginRef{{Name: "NodeResourcesFit", Weight: 5}}
	p.PluginConfig = []runtime.PluginConfig{{Name: "NodeResourcesFit", Args: []byte(`{"scoringStrategy":{"type":"MostAllocated"}}`)}}
	f := newFramework(t, nil, nil, p, 1)
	want := map[string]int64{"NodeResourcesFit": 5, "TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1}
	if diff := cmp.Diff(want, f.ScoreWeights()); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"SchedulingGates"}, f.PluginNames()["PreEnqueue"]); diff != "" {
		t.Errorf("PreEnqueue (-want +got):\n%s", diff)
	}

	bad := []struct {
		name   string
		mutate func(*runtime.Profile)
	}{
		{"unknown plugin", func(p *runtime.Profile) { p.Plugins.Filter.Enabled = []runtime.PluginRef{{Name: "Nope"}} }},
		{"args for disabled plugin", func(p *runtime.Profile) {
			p.PluginConfig = []runtime.PluginConfig{{Name: "Nope"}}
		}},
		{"no queue sort", func(p *runtime.Profile) { p.Plugins.QueueSort.Disabled = []runtime.PluginRef{{Name: "*"}} }},
		{"wrong extension point", func(p *runtime.Profile) { p.Plugins.Score.Enabled = []runtime.PluginRef{{Name: "NodeName"}} }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p := plugins.DefaultProfile()
			tc.mutate(&p)
			if _, err := runtime.New(context.Background(), plugins.NewInTreeRegistry(), p, runtime.Options{ClientSet: fake.NewClientset()}); err == nil {
				t.Errorf("profile accepted")
			}
		})
	}
}

// permitPlugin asks to wait.
type permitPlugin struct{ timeout time.Duration }

func (p *permitPlugin) Name() string { return "Waiter" }
func (p *permitPlugin) Permit(context.Context, *framework.CycleState, *v1.Pod, string) (*framework.Status, time.Duration) {
	return framework.NewStatus(framework.Wait), p.timeout
}

func TestPermit(t *testing.T) {
	registry := plugins.NewInTreeRegistry()
	registry["Waiter"] = func(context.Context, any, framework.Handle) (framework.Plugin, error) {
		return &permitPlugin{timeout: 10 * time.Second}, nil
	}
	profile := plugins.DefaultProfile()
	profile.Plugins.Permit.Enabled = []runtime.PluginRef{{Name: "Waiter"}}
	cases := []struct {
		name string
		act  func(f *runtime.Framework, clk *testingclock.FakeClock, pod *v1.Pod)
		want *framework.Status
	}{
		{"allowed", func(f *runtime.Framework, _ *testingclock.FakeClock, pod *v1.Pod) {
			f.GetWaitingPod(pod.UID).Allow("Waiter")
		}, nil},
		{"rejected", func(f *runtime.Framework, _ *testingclock.FakeClock, pod *v1.Pod) {
			f.GetWaitingPod(pod.UID).Reject("Waiter", "no")
		},
			framework.NewStatus(framework.Unschedulable, "no").WithPlugin("Waiter")},
		{"timed out", func(_ *runtime.Framework, clk *testingclock.FakeClock, _ *v1.Pod) { clk.Step(11 * time.Second) },
			framework.NewStatus(framework.Unschedulable, "rejected due to timeout after waiting 10s at plugin Waiter").WithPlugin("Waiter")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			f, err := runtime.New(context.Background(), registry, profile, runtime.Options{ClientSet: fake.NewClientset(), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			pod := st.MakePod().Name("p").Obj()
			if s := f.RunPermitPlugins(context.Background(), framework.NewCycleState(), pod, "n"); !s.IsWait() {
				t.Fatalf("Permit = %v, want Wait", s)
			}
			if diff := cmp.Diff([]string{"Waiter"}, f.GetWaitingPod(pod.UID).GetPendingPlugins()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			tc.act(f, clk, pod)
			if diff := cmp.Diff(tc.want, f.WaitOnPermit(context.Background(), pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if f.GetWaitingPod(pod.UID) != nil {
				t.Errorf("pod still waiting after WaitOnPermit")
			}
		})
	}
}
