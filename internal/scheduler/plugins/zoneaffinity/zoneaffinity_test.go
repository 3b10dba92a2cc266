package zoneaffinity_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/zoneaffinity"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func nodes() []*v1.Node {
	return []*v1.Node{
		st.MakeNode("a1").Label(v1.LabelTopologyZone, "zone-a").Label("rack", "r1").Obj(),
		st.MakeNode("b1").Label(v1.LabelTopologyZone, "zone-b").Label("rack", "r2").Obj(),
		st.MakeNode("c1").Label(v1.LabelTopologyZone, "zone-c").Obj(),
		st.MakeNode("none").Obj(),
	}
}

func annotated(kv ...string) *v1.Pod {
	p := st.MakePod().Name("p").Obj()
	p.Annotations = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Annotations[kv[i]] = kv[i+1]
	}
	return p
}

// handle builds a handle whose informer factory holds the ConfigMaps, and
// the plugin on it (before the factory starts, as the scheduler does).
func handle(t *testing.T, args any, cms ...*v1.ConfigMap) (*st.Handle, *zoneaffinity.ZoneAffinity) {
	t.Helper()
	cs := fake.NewClientset()
	for _, cm := range cms {
		if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := st.NewHandle(nil, nodes())
	h.Client = cs
	h.Informers = informers.NewSharedInformerFactory(cs, 0)
	p, err := zoneaffinity.New(context.Background(), args, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.Informers.Start(ctx.Done())
	h.Informers.WaitForCacheSync(ctx.Done())
	return h, p.(*zoneaffinity.ZoneAffinity)
}

func costs(ns, name string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func TestFilter(t *testing.T) {
	mismatch := framework.NewStatus(framework.UnschedulableAndUnresolvable, zoneaffinity.ErrReasonZoneMismatch)
	cases := []struct {
		name string
		args any
		pod  *v1.Pod
		want map[string]*framework.Status
	}{
		{name: "no annotation: every node", pod: annotated()},
		{
			name: "one zone",
			pod:  annotated(zoneaffinity.RequiredZoneAnnotation, "zone-a"),
			want: map[string]*framework.Status{"b1": mismatch, "c1": mismatch, "none": mismatch},
		},
		{
			name: "a list of zones",
			pod:  annotated(zoneaffinity.RequiredZoneAnnotation, "zone-b, zone-c"),
			want: map[string]*framework.Status{"a1": mismatch, "none": mismatch},
		},
		{
			name: "another label key from the args",
			args: []byte(`{"labelKey":"rack"}`),
			pod:  annotated(zoneaffinity.RequiredZoneAnnotation, "r2"),
			want: map[string]*framework.Status{"a1": mismatch, "c1": mismatch, "none": mismatch},
		},
		{
			name: "an empty annotation fits nowhere",
			pod:  annotated(zoneaffinity.RequiredZoneAnnotation, " , "),
			want: func() map[string]*framework.Status {
				s := framework.NewStatus(framework.UnschedulableAndUnresolvable, "pod's annotation zoneaffinity.skiff.sh/required-zone names no zone")
				return map[string]*framework.Status{"a1": s, "b1": s, "c1": s, "none": s}
			}(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, p := handle(t, tc.args)
			got := st.RunFilter(t, h, p, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestScore(t *testing.T) {
	table := costs("kube-system", "zone-network-costs", map[string]string{
		"zone-a.zone-b": "10",
		"zone-c.zone-a": "40", // listed the other way round
	})
	cases := []struct {
		name string
		args any
		cms  []*v1.ConfigMap
		pod  *v1.Pod
		want framework.NodeScoreList
	}{
		{name: "no preferred zone: skipped", cms: []*v1.ConfigMap{table}, pod: annotated()},
		{
			// costs a1 0, b1 10, c1 40, none 100 (unknown).
			name: "costs from the ConfigMap",
			cms:  []*v1.ConfigMap{table},
			pod:  annotated(zoneaffinity.PreferredZoneAnnotation, "zone-a"),
			want: st.Scores("a1", 100, "b1", 90, "c1", 60, "none", 0),
		},
		{
			// b1 0, a1 10, c1 unknown (25), none 25.
			name: "unknown pairs cost unknownCost",
			args: map[string]any{"unknownCost": 25},
			cms:  []*v1.ConfigMap{table},
			pod:  annotated(zoneaffinity.PreferredZoneAnnotation, "zone-b"),
			want: st.Scores("a1", 60, "b1", 100, "c1", 0, "none", 0),
		},
		{
			name: "ConfigMap named by the args",
			args: []byte(`{"costConfigMap":{"namespace":"net","name":"costs"}}`),
			cms:  []*v1.ConfigMap{costs("net", "costs", map[string]string{"zone-a.zone-b": "50", "zone-a.zone-c": "100"})},
			pod:  annotated(zoneaffinity.PreferredZoneAnnotation, "zone-a"),
			want: st.Scores("a1", 100, "b1", 50, "c1", 0, "none", 0),
		},
		{
			name: "no ConfigMap: only the same zone is cheap",
			pod:  annotated(zoneaffinity.PreferredZoneAnnotation, "zone-c"),
			want: st.Scores("a1", 0, "b1", 0, "c1", 100, "none", 0),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, p := handle(t, tc.args, tc.cms...)
			got := st.RunScore(t, h, p, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadCostsAreAnError(t *testing.T) {
	h, p := handle(t, nil, costs("kube-system", "zone-network-costs", map[string]string{"zone-a.zone-b": "cheap"}))
	s := p.PreScore(context.Background(), framework.NewCycleState(), annotated(zoneaffinity.PreferredZoneAnnotation, "zone-a"), h.Snapshot.List())
	if s.Code() != framework.Error {
		t.Errorf("PreScore = %v, want an Error", s)
	}
}

func TestNormalizeScore(t *testing.T) {
	cases := []struct {
		name string
		in   framework.NodeScoreList
		want framework.NodeScoreList
	}{
		{"empty", nil, nil},
		{"all equal", st.Scores("a", 7, "b", 7), st.Scores("a", 100, "b", 100)},
		{"linear between cheapest and dearest", st.Scores("a", 10, "b", 20, "c", 30), st.Scores("a", 100, "b", 50, "c", 0)},
	}
	p, err := zoneaffinity.New(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.(framework.ScorePlugin).ScoreExtensions().NormalizeScore(context.Background(), nil, nil, tc.in)
			if diff := cmp.Diff(tc.want, tc.in); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCosts(t *testing.T) {
	cases := []struct {
		name    string
		data    map[string]string
		want    zoneaffinity.Costs
		wantErr bool
	}{
		{name: "valid", data: map[string]string{"a.b": "3", "b.c": " 0 "}, want: zoneaffinity.Costs{"a.b": 3, "b.c": 0}},
		{name: "no dot", data: map[string]string{"ab": "3"}, wantErr: true},
		{name: "empty zone", data: map[string]string{"a.": "3"}, wantErr: true},
		{name: "negative", data: map[string]string{"a.b": "-1"}, wantErr: true},
		{name: "not a number", data: map[string]string{"a.b": "x"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := zoneaffinity.ParseCosts(tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	c := zoneaffinity.Costs{"a.b": 5}
	for _, tc := range []struct {
		a, b string
		want int64
	}{{"a", "a", 0}, {"a", "b", 5}, {"b", "a", 5}, {"a", "c", 9}} {
		if got := c.Cost(tc.a, tc.b, 9); got != tc.want {
			t.Errorf("Cost(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestArgsValidation(t *testing.T) {
	if _, err := zoneaffinity.New(context.Background(), []byte(`{"unknownCost": -1}`), nil); err == nil {
		t.Error("negative unknownCost accepted")
	}
	if _, err := zoneaffinity.New(context.Background(), []byte(`{"labelKey": 3}`), nil); err == nil {
		t.Error("a label key of the wrong type was accepted")
	}
}
