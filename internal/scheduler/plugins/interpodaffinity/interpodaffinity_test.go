package interpodaffinity

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

const zone = v1.LabelTopologyZone

func TestFilter(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Label(zone, "z1").Obj(),
		st.MakeNode("b").Label(zone, "z1").Obj(),
		st.MakeNode("c").Label(zone, "z2").Obj(),
		st.MakeNode("nozone").Obj(),
	}
	antiReject := framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
	existingReject := framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
	affReject := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	db := st.MakePod().Name("db").Label("app", "db").Node("a").Obj()
	cases := []struct {
		name string
		pods []*v1.Pod
		pod  *v1.Pod
		want map[string]*framework.Status
	}{
		{name: "no affinity anywhere is skipped", pods: []*v1.Pod{db}, pod: st.MakePod().Obj()},
		{
			name: "affinity by zone",
			pods: []*v1.Pod{db}, pod: st.MakePod().PodAffinity(st.Term("app", "db", zone)).Obj(),
			want: map[string]*framework.Status{"c": affReject, "nozone": affReject},
		},
		{
			// Upstream's case: anti-affinity by zone keeps the pod out of
			// every node of the zone of a matching pod.
			name: "anti-affinity by zone",
			pods: []*v1.Pod{db}, pod: st.MakePod().PodAntiAffinity(st.Term("app", "db", zone)).Obj(),
			want: map[string]*framework.Status{"a": antiReject, "b": antiReject},
		},
		{
			name: "anti-affinity by hostname",
			pods: []*v1.Pod{db}, pod: st.MakePod().PodAntiAffinity(st.Term("app", "db", v1.LabelHostname)).Obj(),
			want: map[string]*framework.Status{"a": antiReject},
		},
		{
			name: "existing pod's anti-affinity",
			pods: []*v1.Pod{st.MakePod().Name("solo").Node("c").PodAntiAffinity(st.Term("app", "web", zone)).Obj()},
			pod:  st.MakePod().Label("app", "web").Obj(),
			want: map[string]*framework.Status{"c": existingReject},
		},
		{
			name: "existing pod's anti-affinity does not match",
			pods: []*v1.Pod{st.MakePod().Name("solo").Node("c").PodAntiAffinity(st.Term("app", "web", zone)).Obj()},
			pod:  st.MakePod().Label("app", "api").Obj(),
		},
		{
			name: "first pod of a self-affine group may go where the key exists",
			pod:  st.MakePod().Label("app", "web").PodAffinity(st.Term("app", "web", zone)).Obj(),
			want: map[string]*framework.Status{"nozone": affReject},
		},
		{
			name: "affinity to nothing that exists",
			pod:  st.MakePod().Label("app", "web").PodAffinity(st.Term("app", "db", zone)).Obj(),
			want: map[string]*framework.Status{"a": affReject, "b": affReject, "c": affReject, "nozone": affReject},
		},
		{
			name: "other namespace does not match",
			pods: []*v1.Pod{st.MakePod().Name("db").Namespace("other").Label("app", "db").Node("a").Obj()},
			pod:  st.MakePod().PodAntiAffinity(st.Term("app", "db", zone)).Obj(),
		},
		{
			name: "terminating pods still count",
			pods: []*v1.Pod{st.MakePod().Name("db").Label("app", "db").Node("c").Terminating().Obj()},
			pod:  st.MakePod().PodAntiAffinity(st.Term("app", "db", zone)).Obj(),
			want: map[string]*framework.Status{"c": antiReject},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(tc.pods, nodes)
			p, err := New(context.Background(), nil, h)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.RunFilter(t, h, p.(framework.FilterPlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddRemovePod(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("a").Label(zone, "z1").Obj(), st.MakeNode("b").Label(zone, "z2").Obj()}
	h := st.NewHandle(nil, nodes)
	p, _ := New(context.Background(), nil, h)
	pl := p.(*InterPodAffinity)
	pod := st.MakePod().PodAntiAffinity(st.Term("app", "db", zone)).Obj()
	state := framework.NewCycleState()
	ctx := context.Background()
	if _, s := pl.PreFilter(ctx, state, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	a, _ := h.Snapshot.Get("a")
	db := framework.MustPodInfo(st.MakePod().Name("db").Label("app", "db").Node("a").Obj())
	if s := pl.AddPod(ctx, state, pod, db, a); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.Filter(ctx, state, pod, a); s.Code() != framework.Unschedulable {
		t.Errorf("after AddPod: Filter = %v, want Unschedulable", s)
	}
	if s := pl.RemovePod(ctx, state, pod, db, a); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.Filter(ctx, state, pod, a); !s.IsSuccess() {
		t.Errorf("after RemovePod: Filter = %v, want Success", s)
	}
}

func TestScore(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Label(zone, "z1").Obj(),
		st.MakeNode("b").Label(zone, "z1").Obj(),
		st.MakeNode("c").Label(zone, "z2").Obj(),
	}
	cases := []struct {
		name string
		pods []*v1.Pod
		pod  *v1.Pod
		want framework.NodeScoreList
	}{
		{name: "nothing to score", pods: []*v1.Pod{st.MakePod().Name("x").Label("app", "db").Node("a").Obj()}, pod: st.MakePod().Obj()},
		{
			name: "preferred affinity by zone",
			pods: []*v1.Pod{st.MakePod().Name("x").Label("app", "db").Node("a").Obj()},
			pod:  st.MakePod().PreferredPodAffinity(5, st.Term("app", "db", zone)).Obj(),
			want: st.Scores("a", 100, "b", 100, "c", 0),
		},
		{
			name: "preferred anti-affinity by zone",
			pods: []*v1.Pod{st.MakePod().Name("x").Label("app", "db").Node("a").Obj()},
			pod:  st.MakePod().PreferredPodAntiAffinity(5, st.Term("app", "db", zone)).Obj(),
			want: st.Scores("a", 0, "b", 0, "c", 100),
		},
		{
			name: "affinity and anti-affinity combine",
			pods: []*v1.Pod{
				st.MakePod().Name("x").Label("app", "db").Node("a").Obj(),
				st.MakePod().Name("y").Label("app", "cache").Node("c").Obj(),
			},
			pod:  st.MakePod().PreferredPodAffinity(4, st.Term("app", "db", v1.LabelHostname)).PreferredPodAntiAffinity(2, st.Term("app", "cache", zone)).Obj(),
			want: st.Scores("a", 100, "b", 33, "c", 0),
		},
		{
			name: "existing pod's required affinity attracts (hard weight)",
			pods: []*v1.Pod{st.MakePod().Name("x").Node("c").PodAffinity(st.Term("app", "web", zone)).Obj()},
			pod:  st.MakePod().Label("app", "web").Obj(),
			want: st.Scores("a", 0, "b", 0, "c", 100),
		},
		{
			name: "existing pod's preferred anti-affinity repels",
			pods: []*v1.Pod{st.MakePod().Name("x").Node("a").PreferredPodAntiAffinity(10, st.Term("app", "web", zone)).Obj()},
			pod:  st.MakePod().Label("app", "web").Obj(),
			want: st.Scores("a", 0, "b", 0, "c", 100),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(tc.pods, nodes)
			p, _ := New(context.Background(), nil, h)
			if diff := cmp.Diff(tc.want, st.RunScore(t, h, p.(framework.ScorePlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
