package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func node(name, zone string) *v1.Node {
	w := st.MakeNode(name).Capacity(map[string]string{"cpu": "4", "memory": "8Gi", "pods": "110"})
	if zone != "" {
		w.Label(v1.LabelTopologyZone, zone)
	}
	return w.Obj()
}

func pod(name, nodeName, cpu string) *v1.Pod {
	return st.MakePod().Name(name).Req(map[string]string{"cpu": cpu}).Node(nodeName).Obj()
}

// podsOn lists the pods each node of the snapshot counts and its requested
// milli-CPU.
func podsOn(s *Snapshot) map[string]string {
	out := map[string]string{}
	for _, ni := range s.List() {
		var names []string
		for _, pi := range ni.Pods {
			names = append(names, pi.Pod.Name)
		}
		out[ni.Node().Name] = fmt.Sprintf("%v cpu=%dm", names, ni.Requested.MilliCPU)
	}
	return out
}

func TestAssumeLifecycle(t *testing.T) {
	logger := klog.Background()
	tests := []struct {
		name string
		do   func(c *Cache, clk *testingclock.FakeClock, assumed *v1.Pod)
		want map[string]string
		// wantAssumed is whether the pod is still assumed at the end.
		wantAssumed bool
	}{
		{name: "assumed pod counts at once", do: func(*Cache, *testingclock.FakeClock, *v1.Pod) {},
			want: map[string]string{"n1": "[p] cpu=1000m", "n2": "[] cpu=0m"}, wantAssumed: true},
		{name: "forget removes it", do: func(c *Cache, _ *testingclock.FakeClock, p *v1.Pod) {
			if err := c.ForgetPod(logger, p); err != nil {
				t.Fatal(err)
			}
		}, want: map[string]string{"n1": "[] cpu=0m", "n2": "[] cpu=0m"}},
		{name: "informer add confirms it", do: func(c *Cache, clk *testingclock.FakeClock, p *v1.Pod) {
			c.FinishBinding(p)
			c.AddPod(logger, p)
			clk.Step(time.Hour)
			c.CleanupExpiredAssumedPods(logger)
		}, want: map[string]string{"n1": "[p] cpu=1000m", "n2": "[] cpu=0m"}},
		{name: "confirmed on another node moves it", do: func(c *Cache, _ *testingclock.FakeClock, p *v1.Pod) {
			c.AddPod(logger, pod("p", "n2", "1"))
		}, want: map[string]string{"n1": "[] cpu=0m", "n2": "[p] cpu=1000m"}},
		{name: "expires after the TTL once binding finished", do: func(c *Cache, clk *testingclock.FakeClock, p *v1.Pod) {
			c.FinishBinding(p)
			clk.Step(DefaultAssumedPodTTL + time.Second)
			if n := c.CleanupExpiredAssumedPods(logger); n != 1 {
				t.Errorf("expired %d pods, want 1", n)
			}
		}, want: map[string]string{"n1": "[] cpu=0m", "n2": "[] cpu=0m"}},
		{name: "does not expire before the TTL", do: func(c *Cache, clk *testingclock.FakeClock, p *v1.Pod) {
			c.FinishBinding(p)
			clk.Step(DefaultAssumedPodTTL - time.Second)
			c.CleanupExpiredAssumedPods(logger)
		}, want: map[string]string{"n1": "[p] cpu=1000m", "n2": "[] cpu=0m"}, wantAssumed: true},
		{name: "never expires while binding", do: func(c *Cache, clk *testingclock.FakeClock, p *v1.Pod) {
			clk.Step(time.Hour)
			c.CleanupExpiredAssumedPods(logger)
		}, want: map[string]string{"n1": "[p] cpu=1000m", "n2": "[] cpu=0m"}, wantAssumed: true},
		{name: "deleted pod is removed", do: func(c *Cache, _ *testingclock.FakeClock, p *v1.Pod) {
			c.AddPod(logger, p)
			c.RemovePod(logger, p)
		}, want: map[string]string{"n1": "[] cpu=0m", "n2": "[] cpu=0m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			c := New(Options{Clock: clk})
			c.AddNode(node("n1", ""))
			c.AddNode(node("n2", ""))
			s := NewSnapshot()
			c.UpdateSnapshot(s)
			p := pod("p", "n1", "1")
			if err := c.AssumePod(p); err != nil {
				t.Fatal(err)
			}
			if err := c.AssumePod(p); err == nil {
				t.Error("assuming a pod twice succeeded")
			}
			tc.do(c, clk, p)
			c.UpdateSnapshot(s)
			if diff := cmp.Diff(tc.want, podsOn(s)); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
			if got := c.IsAssumedPod(p); got != tc.wantAssumed {
				t.Errorf("IsAssumedPod = %v, want %v", got, tc.wantAssumed)
			}
		})
	}
}

func TestSnapshotIsIncremental(t *testing.T) {
	logger := klog.Background()
	c := New(Options{})
	for i := range 5 {
		c.AddNode(node(fmt.Sprintf("n%d", i), ""))
	}
	s := NewSnapshot()
	c.UpdateSnapshot(s)
	before := map[string]int64{}
	for _, ni := range s.List() {
		before[ni.Node().Name] = ni.Generation
	}
	n3, _ := s.Get("n3")
	c.AddPod(logger, pod("p", "n3", "500m"))
	c.UpdateSnapshot(s)
	var changed []string
	for _, ni := range s.List() {
		if ni.Generation != before[ni.Node().Name] {
			changed = append(changed, ni.Node().Name)
		}
	}
	if diff := cmp.Diff([]string{"n3"}, changed); diff != "" {
		t.Errorf("changed NodeInfos (-want +got):\n%s", diff)
	}
	if again, _ := s.Get("n3"); again != n3 || len(n3.Pods) != 1 {
		t.Errorf("the NodeInfo of n3 was replaced or not updated in place (pods %d)", len(n3.Pods))
	}
	// The cache's own NodeInfo is not shared with the snapshot.
	c.AddPod(logger, pod("q", "n3", "500m"))
	if len(n3.Pods) != 1 {
		t.Errorf("a cache change leaked into the snapshot before UpdateSnapshot")
	}
}

func TestSnapshotNodesAndAffinityLists(t *testing.T) {
	logger := klog.Background()
	c := New(Options{})
	s := NewSnapshot()
	c.AddNode(node("a1", "a"))
	c.AddNode(node("a2", "a"))
	c.AddNode(node("a3", "a"))
	c.AddNode(node("b1", "b"))
	c.AddNode(node("c1", "c"))
	c.UpdateSnapshot(s)
	names := func(list []*framework.NodeInfo) []string {
		out := []string{}
		for _, ni := range list {
			out = append(out, ni.Node().Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"a1", "b1", "c1", "a2", "a3"}, names(s.List())); diff != "" {
		t.Errorf("zone-interleaved order (-want +got):\n%s", diff)
	}
	anti := st.MakePod().Name("anti").Node("b1").PodAntiAffinity(st.Term("app", "x", v1.LabelHostname)).Obj()
	c.AddPod(logger, anti)
	c.AddPod(logger, pod("p", "a2", "1"))
	c.RemoveNode(node("a2", "a")) // has a pod: dropped from the snapshot anyway
	c.RemoveNode(node("c1", "c"))
	c.UpdateSnapshot(s)
	if diff := cmp.Diff([]string{"a1", "b1", "a3"}, names(s.List())); diff != "" {
		t.Errorf("after removals (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b1"}, names(s.HavePodsWithRequiredAntiAffinityList())); diff != "" {
		t.Errorf("anti-affinity list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b1"}, names(s.HavePodsWithAffinityList())); diff != "" {
		t.Errorf("affinity list (-want +got):\n%s", diff)
	}
	if _, err := s.Get("c1"); err == nil {
		t.Error("removed node c1 still in the snapshot")
	}
	c.RemovePod(logger, anti)
	c.AddNode(node("a2", "a")) // back, with its pod still counted
	c.UpdateSnapshot(s)
	if diff := cmp.Diff(map[string]string{"a1": "[] cpu=0m", "a2": "[p] cpu=1000m", "a3": "[] cpu=0m", "b1": "[] cpu=0m"}, podsOn(s)); diff != "" {
		t.Errorf("after re-adding a2 (-want +got):\n%s", diff)
	}
	if got := names(s.HavePodsWithRequiredAntiAffinityList()); len(got) != 0 {
		t.Errorf("anti-affinity list after removal = %v", got)
	}
}

func TestImageStates(t *testing.T) {
	c := New(Options{})
	c.AddNode(st.MakeNode("n1").Images(map[string]int64{"img:1": 100}).Obj())
	c.AddNode(st.MakeNode("n2").Images(map[string]int64{"img:1": 100, "other:1": 5}).Obj())
	s := NewSnapshot()
	c.UpdateSnapshot(s)
	n2, _ := s.Get("n2")
	if got := n2.ImageStates["img:1"]; got == nil || got.NumNodes != 2 || got.Size != 100 {
		t.Errorf("n2 img:1 = %+v, want size 100 on 2 nodes", got)
	}
	if got := n2.ImageStates["other:1"]; got == nil || got.NumNodes != 1 {
		t.Errorf("n2 other:1 = %+v, want on 1 node", got)
	}
}

func BenchmarkUpdateSnapshot5000Nodes(b *testing.B) {
	logger := klog.Background()
	c := New(Options{})
	for i := range 5000 {
		c.AddNode(node(fmt.Sprintf("n%d", i), fmt.Sprintf("z%d", i%3)))
		for j := range 10 {
			c.AddPod(logger, pod(fmt.Sprintf("p%d-%d", i, j), fmt.Sprintf("n%d", i), "100m"))
		}
	}
	s := NewSnapshot()
	c.UpdateSnapshot(s)
	b.ResetTimer()
	for i := range b.N {
		// One cycle: one pod assumed, one snapshot.
		p := pod(fmt.Sprintf("new%d", i), fmt.Sprintf("n%d", i%5000), "10m")
		if err := c.AssumePod(p); err != nil {
			b.Fatal(err)
		}
		c.UpdateSnapshot(s)
	}
}
