package nodeaffinity

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func TestFilter(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Label("zone", "z1").Label("gen", "5").Obj(),
		st.MakeNode("b").Label("zone", "z2").Obj(),
	}
	reject := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	withTerm := func(term v1.NodeSelectorTerm) *v1.Pod {
		p := st.MakePod().Obj()
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{term}}}}
		return p
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		args any
		want map[string]*framework.Status
	}{
		{name: "nothing required", pod: st.MakePod().Obj()},
		{name: "nodeSelector", pod: st.MakePod().NodeSelector(map[string]string{"zone": "z1"}).Obj(), want: map[string]*framework.Status{"b": reject}},
		{name: "required In", pod: st.MakePod().NodeAffinityIn("zone", "z2").Obj(), want: map[string]*framework.Status{"a": reject}},
		{name: "terms are ORed", pod: st.MakePod().NodeAffinityIn("zone", "z2").NodeAffinityIn("zone", "z1").Obj()},
		{name: "selector and affinity both apply", pod: st.MakePod().NodeSelector(map[string]string{"zone": "z1"}).NodeAffinityIn("zone", "z2").Obj(), want: map[string]*framework.Status{"a": reject, "b": reject}},
		{name: "Gt", pod: withTerm(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "gen", Operator: v1.NodeSelectorOpGt, Values: []string{"4"}}}}), want: map[string]*framework.Status{"b": reject}},
		{name: "DoesNotExist", pod: withTerm(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "gen", Operator: v1.NodeSelectorOpDoesNotExist}}}), want: map[string]*framework.Status{"a": reject}},
		{name: "empty term matches nothing", pod: withTerm(v1.NodeSelectorTerm{}), want: map[string]*framework.Status{"a": reject, "b": reject}},
		{name: "matchFields metadata.name narrows", pod: withTerm(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"b"}}}}), want: map[string]*framework.Status{"a": reject}},
		{
			name: "scheduler-enforced affinity",
			pod:  st.MakePod().Obj(),
			args: &Args{AddedAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}},
			want: map[string]*framework.Status{"b": framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonEnforced)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(nil, nodes)
			p, err := New(context.Background(), tc.args, h)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.RunFilter(t, h, p.(framework.FilterPlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreFilterResult(t *testing.T) {
	pod := st.MakePod().Obj()
	pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
		{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}}},
		{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"c"}}}},
	}}}}
	p, _ := New(context.Background(), nil, st.NewHandle(nil, nil))
	got, s := p.(framework.PreFilterPlugin).PreFilter(context.Background(), framework.NewCycleState(), pod, nil)
	if !s.IsSuccess() {
		t.Fatal(s)
	}
	if diff := cmp.Diff(&framework.PreFilterResult{NodeNames: map[string]bool{"a": true, "b": true, "c": true}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestScore(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Label("zone", "z1").Label("disk", "ssd").Obj(),
		st.MakeNode("b").Label("zone", "z1").Obj(),
		st.MakeNode("c").Obj(),
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want framework.NodeScoreList
	}{
		{"no preference skips", st.MakePod().Obj(), nil},
		{"weights sum and normalize", st.MakePod().PreferredNodeAffinityIn(2, "zone", "z1").PreferredNodeAffinityIn(6, "disk", "ssd").Obj(), st.Scores("a", 100, "b", 25, "c", 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(nil, nodes)
			p, _ := New(context.Background(), nil, h)
			if diff := cmp.Diff(tc.want, st.RunScore(t, h, p.(framework.ScorePlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
