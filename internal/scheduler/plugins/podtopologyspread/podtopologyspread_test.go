package podtopologyspread

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

const zone = v1.LabelTopologyZone

func nodes() []*v1.Node {
	return []*v1.Node{
		st.MakeNode("a").Label(zone, "z1").Obj(),
		st.MakeNode("b").Label(zone, "z1").Obj(),
		st.MakeNode("x").Label(zone, "z2").Obj(),
		st.MakeNode("y").Label(zone, "z2").Obj(),
	}
}

func fooPods(perNode map[string]int) []*v1.Pod {
	var out []*v1.Pod
	for node, n := range perNode {
		for i := range n {
			out = append(out, st.MakePod().Name(node+string(rune('0'+i))).Label("foo", "").Node(node).Obj())
		}
	}
	return out
}

func int32p(v int32) *int32 { return &v }

func TestFilter(t *testing.T) {
	skew := framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
	missing := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
	cases := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pod   *v1.Pod
		want  map[string]*framework.Status
	}{
		{name: "no constraints is skipped", pods: fooPods(map[string]int{"a": 5}), pod: st.MakePod().Label("foo", "").Obj()},
		{
			name: "zone skew 2/1 with maxSkew 1",
			pods: fooPods(map[string]int{"a": 1, "b": 1, "x": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj(),
			want: map[string]*framework.Status{"a": skew, "b": skew},
		},
		{
			name: "hostname skew 2/1/0/0",
			pods: fooPods(map[string]int{"a": 2, "b": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, v1.LabelHostname, v1.DoNotSchedule, nil, "foo", "").Obj(),
			want: map[string]*framework.Status{"a": skew, "b": skew},
		},
		{
			name: "larger maxSkew tolerates it",
			pods: fooPods(map[string]int{"a": 2, "b": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(2, v1.LabelHostname, v1.DoNotSchedule, nil, "foo", "").Obj(),
			want: map[string]*framework.Status{"a": skew},
		},
		{
			name: "pod not matching its own selector",
			pods: fooPods(map[string]int{"a": 1, "b": 1, "x": 1}),
			pod:  st.MakePod().SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj(),
		},
		{
			name: "minDomains above the number of domains makes the global minimum 0",
			pods: fooPods(map[string]int{"a": 1, "x": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, int32p(3), "foo", "").Obj(),
			want: map[string]*framework.Status{"a": skew, "b": skew, "x": skew, "y": skew},
		},
		{
			name: "minDomains satisfied",
			pods: fooPods(map[string]int{"a": 1, "x": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, int32p(2), "foo", "").Obj(),
		},
		{
			name:  "node without the topology label",
			nodes: append(nodes(), st.MakeNode("nozone").Obj()),
			pod:   st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj(),
			want:  map[string]*framework.Status{"nozone": missing},
		},
		{
			// Only the domains of nodes the pod may go to count (the
			// nodeAffinityPolicy Honor default): z1 is out, so z2's one
			// pod is the minimum.
			name: "node affinity narrows the domains",
			pods: fooPods(map[string]int{"x": 1}),
			pod:  st.MakePod().Label("foo", "").NodeAffinityIn(zone, "z2").SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj(),
		},
		{
			name: "pods of other namespaces and terminating pods do not count",
			pods: append(fooPods(map[string]int{"x": 1}),
				st.MakePod().Name("o").Namespace("other").Label("foo", "").Node("a").Obj(),
				st.MakePod().Name("t").Label("foo", "").Node("a").Terminating().Obj(),
				st.MakePod().Name("t2").Label("foo", "").Node("b").Terminating().Obj()),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj(),
			want: map[string]*framework.Status{"x": skew, "y": skew},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes()
			}
			h := st.NewHandle(tc.pods, ns)
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

func TestScore(t *testing.T) {
	fooSelector := func(*v1.Pod) labels.Selector { return labels.SelectorFromSet(labels.Set{"foo": ""}) }
	cases := []struct {
		name     string
		pods     []*v1.Pod
		pod      *v1.Pod
		selector SelectorFunc
		want     framework.NodeScoreList
	}{
		{
			name: "hostname",
			pods: fooPods(map[string]int{"a": 2, "b": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, v1.LabelHostname, v1.ScheduleAnyway, nil, "foo", "").Obj(),
			want: st.Scores("a", 0, "b", 50, "x", 100, "y", 100),
		},
		{
			name: "zone",
			pods: fooPods(map[string]int{"a": 2, "b": 1}),
			pod:  st.MakePod().Label("foo", "").SpreadConstraint(1, zone, v1.ScheduleAnyway, nil, "foo", "").Obj(),
			want: st.Scores("a", 0, "b", 0, "x", 100, "y", 100),
		},
		{
			name: "no soft constraints and no default selector is skipped",
			pods: fooPods(map[string]int{"a": 2}),
			pod:  st.MakePod().Label("foo", "").Obj(),
		},
		{
			// System defaults: zone maxSkew 5 and hostname maxSkew 3, over
			// the pods selected by the pod's owners/services.
			name:     "system default constraints",
			pods:     fooPods(map[string]int{"a": 2, "b": 1}),
			pod:      st.MakePod().Label("foo", "").Obj(),
			selector: fooSelector,
			want:     st.Scores("a", 42, "b", 57, "x", 100, "y", 100),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := st.NewHandle(tc.pods, nodes())
			p, err := NewWithSelector(context.Background(), nil, h, tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.RunScore(t, h, p.(framework.ScorePlugin), tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	bad := []any{
		&Args{DefaultConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone}}}, // System with constraints
		&Args{DefaultingType: ListDefaulting, DefaultConstraints: []v1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: zone}}},
		&Args{DefaultingType: "Other"},
	}
	for i, a := range bad {
		if _, err := New(context.Background(), a, st.NewHandle(nil, nil)); err == nil {
			t.Errorf("case %d: args accepted", i)
		}
	}
}
