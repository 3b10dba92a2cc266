package podtopologyspread

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// TestPreFilterIndex checks that the counts PreFilter keeps between cycles
// (on a cache's snapshot) equal a fresh count over the same cluster after
// each kind of change: pods added and removed, a node relabelled, added
// and removed, and a pod of another namespace.
func TestPreFilterIndex(t *testing.T) {
	logger := klog.Background()
	fooPod := func(name, node string) *v1.Pod {
		return st.MakePod().Name(name).Label("foo", "").Node(node).Obj()
	}
	steps := []struct {
		name   string
		change func(c *cache.Cache)
	}{
		{"initial", func(*cache.Cache) {}},
		{"pod added", func(c *cache.Cache) { c.AddPod(logger, fooPod("p3", "b")) }},
		{"pod removed", func(c *cache.Cache) { c.RemovePod(logger, fooPod("p1", "a")) }},
		{"pod of another namespace", func(c *cache.Cache) {
			c.AddPod(logger, st.MakePod().Name("other").Namespace("ns2").Label("foo", "").Node("x").Obj())
		}},
		{"node relabelled", func(c *cache.Cache) {
			c.UpdateNode(nil, st.MakeNode("y").Label(zone, "z3").Obj())
		}},
		{"node without the key", func(c *cache.Cache) {
			c.UpdateNode(nil, st.MakeNode("x").Obj())
		}},
		{"node added", func(c *cache.Cache) {
			c.AddNode(st.MakeNode("new").Label(zone, "z4").Obj())
			c.AddPod(logger, fooPod("p4", "new"))
		}},
		{"node removed", func(c *cache.Cache) { c.RemoveNode(st.MakeNode("b").Obj()) }},
	}
	c := cache.New(cache.Options{})
	for _, n := range nodes() {
		c.AddNode(n)
	}
	for _, p := range []*v1.Pod{fooPod("p1", "a"), fooPod("p2", "x")} {
		c.AddPod(logger, p)
	}
	snap := cache.NewSnapshot()
	h := st.NewHandle(nil, nil)
	pl, err := New(context.Background(), nil, &snapshotHandle{Handle: h, lister: snap})
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("new").Label("foo", "").SpreadConstraint(1, zone, v1.DoNotSchedule, nil, "foo", "").Obj()
	counts := func(pl framework.Plugin, nodes []*framework.NodeInfo) map[pair]int {
		state := framework.NewCycleState()
		if _, s := pl.(framework.PreFilterPlugin).PreFilter(context.Background(), state, pod, nodes); !s.IsSuccess() {
			t.Fatalf("PreFilter: %v", s)
		}
		ps, err := framework.ReadAs[*preFilterState](state, preFilterKey)
		if err != nil {
			t.Fatal(err)
		}
		return ps.counts
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.change(c)
			c.UpdateSnapshot(snap)
			got := counts(pl, snap.List())
			if len(pl.(*PodTopologySpread).index.entries) != 1 {
				t.Errorf("index has %d entries, want 1", len(pl.(*PodTopologySpread).index.entries))
			}
			// A fresh count on copies the cache does not manage.
			var fresh []*framework.NodeInfo
			for _, ni := range snap.List() {
				cl := ni.Clone()
				cl.Generation = 0
				fresh = append(fresh, cl)
			}
			fh := st.NewHandle(nil, nil)
			fh.Snapshot = framework.NewSnapshotFromNodeInfos(fresh)
			want := counts(mustNew(t, fh), fresh)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(pair{})); diff != "" {
				t.Errorf("counts (-fresh +indexed):\n%s", diff)
			}
		})
	}
}

func mustNew(t *testing.T, h framework.Handle) framework.Plugin {
	t.Helper()
	pl, err := New(context.Background(), nil, h)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// snapshotHandle serves a cache snapshot instead of the test handle's.
type snapshotHandle struct {
	*st.Handle
	lister framework.SharedLister
}

func (h *snapshotHandle) SnapshotSharedLister() framework.SharedLister { return h.lister }
