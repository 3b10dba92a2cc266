package tainttoleration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func TestFilter(t *testing.T) {
	cases := []struct {
		name string
		node *v1.Node
		pod  *v1.Pod
		want map[string]*framework.Status
	}{
		{name: "no taints", node: st.MakeNode("n").Obj(), pod: st.MakePod().Obj()},
		{
			name: "untolerated NoSchedule", node: st.MakeNode("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(), pod: st.MakePod().Obj(),
			want: map[string]*framework.Status{"n": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {dedicated: user1}")},
		},
		{
			name: "wrong value", node: st.MakeNode("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(),
			pod:  st.MakePod().Toleration(v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "user2", Effect: v1.TaintEffectNoSchedule}).Obj(),
			want: map[string]*framework.Status{"n": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {dedicated: user1}")},
		},
		{
			name: "tolerated by value", node: st.MakeNode("n").Taint("dedicated", "user1", v1.TaintEffectNoSchedule).Obj(),
			pod: st.MakePod().Toleration(v1.Toleration{Key: "dedicated", Value: "user1", Effect: v1.TaintEffectNoSchedule}).Obj(),
		},
		{
			name: "tolerated by Exists with empty effect", node: st.MakeNode("n").Taint("foo", "bar", v1.TaintEffectNoExecute).Obj(),
			pod: st.MakePod().Toleration(v1.Toleration{Key: "foo", Operator: v1.TolerationOpExists}).Obj(),
		},
		{
			name: "empty key Exists tolerates all", node: st.MakeNode("n").Taint("a", "", v1.TaintEffectNoSchedule).Taint("b", "", v1.TaintEffectNoExecute).Obj(),
			pod: st.MakePod().Toleration(v1.Toleration{Operator: v1.TolerationOpExists}).Obj(),
		},
		{
			name: "effect mismatch", node: st.MakeNode("n").Taint("foo", "bar", v1.TaintEffectNoExecute).Obj(),
			pod:  st.MakePod().Toleration(v1.Toleration{Key: "foo", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}).Obj(),
			want: map[string]*framework.Status{"n": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {foo: bar}")},
		},
		{name: "PreferNoSchedule does not filter", node: st.MakeNode("n").Taint("foo", "bar", v1.TaintEffectPreferNoSchedule).Obj(), pod: st.MakePod().Obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(nil, []*v1.Node{tc.node})
			p, _ := New(context.Background(), nil, h)
			if diff := cmp.Diff(tc.want, st.RunFilter(t, h, p.(framework.FilterPlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestScore(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("none").Obj(),
		st.MakeNode("one").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Obj(),
		st.MakeNode("two").Taint("a", "1", v1.TaintEffectPreferNoSchedule).Taint("b", "2", v1.TaintEffectPreferNoSchedule).Obj(),
		st.MakeNode("hard").Taint("c", "3", v1.TaintEffectNoSchedule).Obj(),
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want framework.NodeScoreList
	}{
		{"fewer taints score higher", st.MakePod().Obj(), st.Scores("hard", 100, "none", 100, "one", 50, "two", 0)},
		{"tolerated taint does not count", st.MakePod().Toleration(v1.Toleration{Key: "a", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectPreferNoSchedule}).Obj(),
			st.Scores("hard", 100, "none", 100, "one", 100, "two", 0)},
		{"NoSchedule toleration does not help scoring", st.MakePod().Toleration(v1.Toleration{Key: "a", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}).Obj(),
			st.Scores("hard", 100, "none", 100, "one", 50, "two", 0)},
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
