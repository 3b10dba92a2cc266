package noderesources

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func TestFitFilter(t *testing.T) {
	node := st.MakeNode("n").Capacity(map[string]string{"cpu": "10", "memory": "20", "pods": "32", "example.com/gpu": "1", "ephemeral-storage": "10"}).Obj()
	used := st.MakePod().Name("used").Node("n").Req(map[string]string{"cpu": "5", "memory": "19"}).Obj()
	unsched := func(r ...string) map[string]*framework.Status {
		return map[string]*framework.Status{"n": framework.NewStatus(framework.Unschedulable, r...).WithPlugin("")}
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		args any
		pods []*v1.Pod
		node *v1.Node
		want map[string]*framework.Status
	}{
		{name: "no requests fits", pod: st.MakePod().Obj(), pods: []*v1.Pod{used}},
		{name: "fits", pod: st.MakePod().Req(map[string]string{"cpu": "5", "memory": "1"}).Obj(), pods: []*v1.Pod{used}},
		{name: "too much cpu", pod: st.MakePod().Req(map[string]string{"cpu": "6", "memory": "1"}).Obj(), pods: []*v1.Pod{used}, want: unsched("Insufficient cpu")},
		{name: "too much cpu and memory", pod: st.MakePod().Req(map[string]string{"cpu": "6", "memory": "2"}).Obj(), pods: []*v1.Pod{used}, want: unsched("Insufficient cpu", "Insufficient memory")},
		{
			// Upstream's case: the init container's need (and not the sum)
			// is what must fit.
			name: "init container too large",
			pod:  st.MakePod().Req(map[string]string{"cpu": "1", "memory": "1"}).InitReq(map[string]string{"cpu": "6", "memory": "1"}).Obj(),
			pods: []*v1.Pod{used}, want: unsched("Insufficient cpu"),
		},
		{
			name: "init container fits alone",
			pod:  st.MakePod().Req(map[string]string{"cpu": "1", "memory": "1"}).InitReq(map[string]string{"cpu": "5", "memory": "1"}).Obj(),
			pods: []*v1.Pod{used},
		},
		{
			name: "overhead tips it over",
			pod:  st.MakePod().Req(map[string]string{"cpu": "4", "memory": "1"}).Overhead(map[string]string{"cpu": "2"}).Obj(),
			pods: []*v1.Pod{used}, want: unsched("Insufficient cpu"),
		},
		{
			name: "existing pod with init container counts at its max",
			pod:  st.MakePod().Req(map[string]string{"cpu": "3"}).Obj(),
			pods: []*v1.Pod{st.MakePod().Name("u").Node("n").Req(map[string]string{"cpu": "1"}).InitReq(map[string]string{"cpu": "8"}).Obj()},
			want: unsched("Insufficient cpu"),
		},
		{name: "extended resource", pod: st.MakePod().Req(map[string]string{"example.com/gpu": "2"}).Obj(), want: unsched("Insufficient example.com/gpu")},
		{name: "ignored extended resource", pod: st.MakePod().Req(map[string]string{"example.com/gpu": "2"}).Obj(), args: &FitArgs{IgnoredResources: []string{"example.com/gpu"}}},
		{name: "ignored resource group", pod: st.MakePod().Req(map[string]string{"example.com/gpu": "2"}).Obj(), args: &FitArgs{IgnoredResourceGroups: []string{"example.com"}}},
		{name: "ephemeral storage", pod: st.MakePod().Req(map[string]string{"ephemeral-storage": "11"}).Obj(), want: unsched("Insufficient ephemeral-storage")},
		{
			name: "too many pods",
			node: st.MakeNode("n").Capacity(map[string]string{"cpu": "10", "pods": "1"}).Obj(),
			pod:  st.MakePod().Obj(), pods: []*v1.Pod{st.MakePod().Name("u").Node("n").Obj()},
			want: unsched("Too many pods"),
		},
		{
			name: "too many pods and cpu",
			node: st.MakeNode("n").Capacity(map[string]string{"cpu": "1", "pods": "1"}).Obj(),
			pod:  st.MakePod().Req(map[string]string{"cpu": "2"}).Obj(), pods: []*v1.Pod{st.MakePod().Name("u").Node("n").Obj()},
			want: unsched("Too many pods", "Insufficient cpu"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := node
			if tc.node != nil {
				n = tc.node
			}
			h := st.NewHandle(tc.pods, []*v1.Node{n})
			p, err := NewFit(context.Background(), tc.args, h)
			if err != nil {
				t.Fatal(err)
			}
			got := st.RunFilter(t, h, p.(framework.FilterPlugin), tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitScore(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Capacity(map[string]string{"cpu": "4", "memory": "10000"}).Obj(),
		st.MakeNode("b").Capacity(map[string]string{"cpu": "6", "memory": "10000"}).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("x").Node("a").Req(map[string]string{"cpu": "1", "memory": "2000"}).Obj(),
		st.MakePod().Name("y").Node("b").Req(map[string]string{"cpu": "3", "memory": "5000"}).Obj(),
	}
	pod := st.MakePod().Req(map[string]string{"cpu": "1", "memory": "2000"}).Obj()
	cases := []struct {
		name string
		args *FitArgs
		want framework.NodeScoreList
	}{
		// a: cpu (4-2)/4=50, mem (10000-4000)/10000=60 → 55
		// b: cpu (6-4)/6=33, mem (10000-7000)/10000=30 → 31
		{"least allocated", nil, st.Scores("a", 55, "b", 31)},
		// a: 50, 40 → 45; b: 66, 70 → 68
		{"most allocated", &FitArgs{ScoringStrategy: &ScoringStrategy{Type: MostAllocated}}, st.Scores("a", 45, "b", 68)},
		{"most allocated, cpu weighted", &FitArgs{ScoringStrategy: &ScoringStrategy{Type: MostAllocated, Resources: []ResourceSpec{{Name: "cpu", Weight: 3}, {Name: "memory", Weight: 1}}}}, st.Scores("a", 47, "b", 67)},
		// shape 0→0, 100→10 is MostAllocated-like with rounding:
		// a: util cpu 50, mem 40 → 45; b: util 66, 70 → 68
		{"requested to capacity ratio", &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{0, 0}, {100, 10}}}}}, st.Scores("a", 45, "b", 68)},
		// shape 0→10, 100→0 is LeastAllocated-like.
		{"requested to capacity ratio, spreading", &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{0, 10}, {100, 0}}}}}, st.Scores("a", 55, "b", 32)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(pods, nodes)
			var args any
			if tc.args != nil {
				args = tc.args
			}
			p, err := NewFit(context.Background(), args, h)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.RunScore(t, h, p.(framework.ScorePlugin), pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitArgsValidation(t *testing.T) {
	cases := map[string]any{
		"unknown strategy": &FitArgs{ScoringStrategy: &ScoringStrategy{Type: "Nope"}},
		"zero weight":      &FitArgs{ScoringStrategy: &ScoringStrategy{Resources: []ResourceSpec{{Name: "cpu"}}}},
		"no shape":         &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio}},
		"unsorted shape": &FitArgs{ScoringStrategy: &ScoringStrategy{Type: RequestedToCapacityRatio,
			RequestedToCapacityRatio: &RequestedToCapacityRatioParam{Shape: []UtilizationShapePoint{{50, 1}, {10, 2}}}}},
		"bad json": []byte(`{"ignoredResources": 3}`),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewFit(context.Background(), args, st.NewHandle(nil, nil)); err == nil {
				t.Errorf("NewFit accepted %v", args)
			}
		})
	}
	if _, err := NewFit(context.Background(), []byte(`{"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":2}]}}`), st.NewHandle(nil, nil)); err != nil {
		t.Errorf("JSON args: %v", err)
	}
}

func TestBalancedAllocation(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode("a").Capacity(map[string]string{"cpu": "4", "memory": "10000"}).Obj(),
		st.MakeNode("b").Capacity(map[string]string{"cpu": "6", "memory": "10000"}).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("x").Node("a").Req(map[string]string{"cpu": "1", "memory": "2000"}).Obj(),
		st.MakePod().Name("y").Node("b").Req(map[string]string{"cpu": "3", "memory": "5000"}).Obj(),
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want framework.NodeScoreList
	}{
		// a: cpu 2/4=.5, mem 4000/10000=.4 → std .05 → 95
		// b: cpu 4/6=.667, mem .7 → std .0167 → 98
		{"balanced", st.MakePod().Req(map[string]string{"cpu": "1", "memory": "2000"}).Obj(), st.Scores("a", 95, "b", 98)},
		// a: cpu 4/4=1, mem .2 → std .4 → 60; b: cpu 6/6 = 1, mem .5 → 75
		{"cpu heavy", st.MakePod().Req(map[string]string{"cpu": "3"}).Obj(), st.Scores("a", 60, "b", 75)},
		{"best effort is skipped", st.MakePod().Obj(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(pods, nodes)
			p, err := NewBalancedAllocation(context.Background(), nil, h)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.RunScore(t, h, p.(framework.ScorePlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
