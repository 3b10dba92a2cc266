package defaultpreemption_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultpreemption"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

type nominations map[string][]*framework.PodInfo

func (n nominations) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

// TestPreemptionEventsAndNominations checks what a successful preemption
// tells the cluster besides the evictions: a Preempted event on each
// victim, with upstream's text, and the nominations of lower-priority pods
// to the chosen node cleared (higher-priority ones are kept).
func TestPreemptionEventsAndNominations(t *testing.T) {
	nominatedPod := func(name string, priority int32, node string) *v1.Pod {
		p := st.MakePod().Name(name).Priority(priority).Req(cpu("1")).Obj()
		p.Status.NominatedNodeName = node
		return p
	}
	cases := []struct {
		name        string
		nominated   []*v1.Pod
		wantEvents  []string
		wantCleared []string
	}{
		{
			name:       "no nominated pods",
			wantEvents: []string{"Normal Preempted Preempted by pod default/p on node n1"},
		},
		{
			name:        "a lower-priority pod nominated to the node loses its nomination",
			nominated:   []*v1.Pod{nominatedPod("low-nominee", 5, "n1"), nominatedPod("high-nominee", 50, "n1")},
			wantEvents:  []string{"Normal Preempted Preempted by pod default/p on node n1"},
			wantCleared: []string{"low-nominee"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			node := st.MakeNode("n1").Capacity(cpu("4")).Obj()
			victim := st.MakePod().Name("victim").Node("n1").Priority(1).Req(cpu("4")).Obj()
			pod := st.MakePod().Name("p").Priority(10).Req(cpu("2")).Obj()
			objs := []runtime.Object{pod, victim}
			noms := nominations{}
			for _, p := range tc.nominated {
				objs = append(objs, p)
				noms[p.Status.NominatedNodeName] = append(noms[p.Status.NominatedNodeName], framework.MustPodInfo(p))
			}
			cs := fake.NewClientset(objs...)
			rec := events.NewFakeRecorder(10)
			registry := plugins.NewInTreeRegistry()
			registry[defaultpreemption.Name] = func(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
				return defaultpreemption.NewWithOptions(ctx, args, h, defaultpreemption.Options{Rand: rand.New(rand.NewPCG(1, 1))})
			}
			f, err := fwruntime.New(ctx, registry, plugins.DefaultProfile(), fwruntime.Options{
				ClientSet: cs, SnapshotSharedLister: framework.NewSnapshot([]*v1.Pod{victim}, []*v1.Node{node}),
				Parallelism: 1, PodNominator: noms, EventRecorder: rec,
			})
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			_, err = f.SchedulePod(ctx, state, pod)
			var fe *fwruntime.FitError
			if !errors.As(err, &fe) {
				t.Fatalf("SchedulePod: %v, want a FitError", err)
			}
			res, s := f.RunPostFilterPlugins(ctx, state, pod, fe.Diagnosis.NodeToStatus)
			if !s.IsSuccess() || res.NominatedNodeName != "n1" {
				t.Fatalf("PostFilter = %v, %v; want n1 nominated", res, s)
			}
			var gotEvents []string
			for len(rec.Events) > 0 {
				gotEvents = append(gotEvents, <-rec.Events)
			}
			if diff := cmp.Diff(tc.wantEvents, gotEvents); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			var cleared []string
			for _, a := range cs.Actions() {
				if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetSubresource() == "status" &&
					string(pa.GetPatch()) == `{"status":{"nominatedNodeName":null}}` {
					cleared = append(cleared, pa.GetName())
				}
			}
			sort.Strings(cleared)
			if diff := cmp.Diff(tc.wantCleared, cleared); diff != "" {
				t.Errorf("cleared nominations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLowerPriorityNominatedPods(t *testing.T) {
	pi := func(name string, priority int32) *framework.PodInfo {
		return framework.MustPodInfo(st.MakePod().Name(name).Priority(priority).Obj())
	}
	preemptor := st.MakePod().Name("p").Priority(10).Obj()
	noms := nominations{"n1": {pi("low", 1), pi("equal", 10), pi("high", 20), framework.MustPodInfo(preemptor)}, "n2": {pi("elsewhere", 1)}}
	var got []string
	for _, p := range defaultpreemption.LowerPriorityNominatedPods(noms, preemptor, "n1") {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{"low"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
