package plugins_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultbinder"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/imagelocality"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodename"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeports"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeunschedulable"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/prioritysort"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/schedulinggates"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func filterOf(t *testing.T, f framework.Factory, h *st.Handle) framework.FilterPlugin {
	p, err := f(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	return p.(framework.FilterPlugin)
}

func TestSimpleFilters(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("a").Obj(), st.MakeNode("b").Unschedulable().Obj()}
	pods := []*v1.Pod{st.MakePod().Name("web").Node("a").HostPort("", v1.ProtocolTCP, 80).Obj()}
	cases := []struct {
		name    string
		factory framework.Factory
		pod     *v1.Pod
		want    map[string]*framework.Status
	}{
		{"NodeName unset", nodename.New, st.MakePod().Obj(), nil},
		{"NodeName set", nodename.New, st.MakePod().Node("b").Obj(), map[string]*framework.Status{"a": framework.NewStatus(framework.UnschedulableAndUnresolvable, nodename.ErrReason)}},
		{"NodeUnschedulable", nodeunschedulable.New, st.MakePod().Obj(), map[string]*framework.Status{"b": framework.NewStatus(framework.UnschedulableAndUnresolvable, nodeunschedulable.ErrReasonUnschedulable)}},
		{"NodeUnschedulable tolerated", nodeunschedulable.New, st.MakePod().Toleration(v1.Toleration{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}).Obj(), nil},
		{"NodePorts conflict", nodeports.New, st.MakePod().HostPort("10.0.0.1", "", 80).Obj(), map[string]*framework.Status{"a": framework.NewStatus(framework.Unschedulable, nodeports.ErrReason)}},
		{"NodePorts other protocol", nodeports.New, st.MakePod().HostPort("", v1.ProtocolUDP, 80).Obj(), nil},
		{"NodePorts none requested", nodeports.New, st.MakePod().Obj(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(pods, nodes)
			if diff := cmp.Diff(tc.want, st.RunFilter(t, h, filterOf(t, tc.factory, h), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchedulingGates(t *testing.T) {
	p, _ := schedulinggates.New(context.Background(), nil, nil)
	pl := p.(framework.PreEnqueuePlugin)
	if s := pl.PreEnqueue(context.Background(), st.MakePod().Obj()); !s.IsSuccess() {
		t.Errorf("ungated pod: %v", s)
	}
	got := pl.PreEnqueue(context.Background(), st.MakePod().SchedulingGates("a", "b").Obj())
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for scheduling gates: [a b]")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPrioritySort(t *testing.T) {
	now := time.Now()
	qp := func(prio int32, ts time.Time) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{PodInfo: framework.MustPodInfo(st.MakePod().Priority(prio).Obj()), Timestamp: ts}
	}
	p, _ := prioritysort.New(context.Background(), nil, nil)
	less := p.(framework.QueueSortPlugin).Less
	cases := []struct {
		name string
		a, b *framework.QueuedPodInfo
		want bool
	}{
		{"higher priority first", qp(10, now), qp(1, now.Add(-time.Hour)), true},
		{"lower priority later", qp(1, now), qp(10, now), false},
		{"same priority, earlier first", qp(5, now.Add(-time.Second)), qp(5, now), true},
		{"same priority, later second", qp(5, now), qp(5, now.Add(-time.Second)), false},
	}
	for _, tc := range cases {
		if got := less(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Less = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestImageLocality(t *testing.T) {
	const mb = 1024 * 1024
	nodes := []*v1.Node{
		st.MakeNode("big").Images(map[string]int64{"app:v1": 500 * mb, "side:latest": 250 * mb}).Obj(),
		st.MakeNode("small").Images(map[string]int64{"app:v1": 500 * mb}).Obj(),
		st.MakeNode("tiny").Images(map[string]int64{"side:latest": 10 * mb}).Obj(),
		st.MakeNode("none").Obj(),
	}
	pod := st.MakePod().Image("app:v1").Container(nil).Obj()
	pod.Spec.Containers[1].Image = "side"
	h := st.NewHandle(nil, nodes)
	p, _ := imagelocality.New(context.Background(), nil, h)
	// big: 500MB*2/4 + 250MB*2/4 = 375MB; small: 250MB; over 2 containers
	// the range is [23MB, 2000MB]: big 17, small 11.
	want := st.Scores("big", 17, "none", 0, "small", 11, "tiny", 0)
	if diff := cmp.Diff(want, st.RunScore(t, h, p.(framework.ScorePlugin), pod)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestImageLocalityPreScoreSkip(t *testing.T) {
	const mb = 1024 * 1024
	withApp := st.MakeNode("with-app").Images(map[string]int64{"app:v1": 500 * mb}).Obj()
	bare := st.MakeNode("bare").Obj()
	other := st.MakeNode("other").Images(map[string]int64{"db:latest": 500 * mb}).Obj()
	for _, tc := range []struct {
		name     string
		nodes    []*v1.Node
		image    string
		wantSkip bool
	}{
		{"no node has any image", []*v1.Node{bare, bare.DeepCopy()}, "app:v1", true},
		{"nodes have other images", []*v1.Node{bare, other}, "app:v1", true},
		{"one node has it", []*v1.Node{bare, withApp}, "app:v1", false},
		{"untagged name matches :latest", []*v1.Node{other}, "db", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, n := range tc.nodes {
				n.Name = fmt.Sprintf("n%d", i)
			}
			h := st.NewHandle(nil, tc.nodes)
			p, _ := imagelocality.New(context.Background(), nil, h)
			pod := st.MakePod().Image(tc.image).Obj()
			s := p.(framework.PreScorePlugin).PreScore(context.Background(), framework.NewCycleState(), pod, h.Snapshot.List())
			if got := s.IsSkip(); got != tc.wantSkip {
				t.Errorf("PreScore skip = %v (%v), want %v", got, s, tc.wantSkip)
			}
		})
	}
}

func TestDefaultBinder(t *testing.T) {
	pod := st.MakePod().Name("p").Obj()
	client := fake.NewClientset(pod)
	h := &st.Handle{Client: client}
	p, err := defaultbinder.New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(framework.BindPlugin).Bind(context.Background(), framework.NewCycleState(), pod, "node-1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	var got []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			b := a.(clienttesting.CreateAction).GetObject().(*v1.Binding)
			got = append(got, b.Namespace+"/"+b.Name+"->"+b.Target.Name)
		}
	}
	if diff := cmp.Diff([]string{"default/p->node-1"}, got); diff != "" {
		t.Errorf("binding actions (-want +got):\n%s", diff)
	}
	if _, err := defaultbinder.New(context.Background(), nil, &st.Handle{}); err == nil {
		t.Errorf("DefaultBinder without a client was built")
	}
}
