package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

func byPriority(a, b *framework.QueuedPodInfo) bool {
	pa, pb := framework.PodPriority(a.Pod), framework.PodPriority(b.Pod)
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}

func gates(_ context.Context, pod *v1.Pod) *framework.Status {
	if len(pod.Spec.SchedulingGates) > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "gated").WithPlugin("SchedulingGates")
	}
	return nil
}

func newQueue() (*PriorityQueue, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	return New(byPriority, Options{Clock: clk, PreEnqueue: gates}), clk
}

func pop(t *testing.T, q *PriorityQueue) *framework.QueuedPodInfo {
	t.Helper()
	if q.PendingPods().Active == 0 {
		t.Fatalf("pop: activeQ is empty (%+v)", q.PendingPods())
	}
	qpi, err := q.Pop()
	if err != nil {
		t.Fatal(err)
	}
	return qpi
}

func TestBackoffDuration(t *testing.T) {
	q, _ := newQueue()
	for _, tc := range []struct {
		attempts int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {50, 10 * time.Second}} {
		t.Run(fmt.Sprint(tc.attempts), func(t *testing.T) {
			if got := q.BackoffDuration(&framework.QueuedPodInfo{Attempts: tc.attempts}); got != tc.want {
				t.Errorf("BackoffDuration(%d) = %v, want %v", tc.attempts, got, tc.want)
			}
		})
	}
}

func TestPopOrder(t *testing.T) {
	q, clk := newQueue()
	ctx := context.Background()
	q.Add(ctx, st.MakePod().Name("low").Priority(1).Obj())
	clk.Step(time.Millisecond)
	q.Add(ctx, st.MakePod().Name("high").Priority(10).Obj())
	clk.Step(time.Millisecond)
	q.Add(ctx, st.MakePod().Name("low2").Priority(1).Obj())
	var got []string
	for range 3 {
		got = append(got, pop(t, q).Pod.Name)
	}
	if diff := cmp.Diff([]string{"high", "low", "low2"}, got); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}
}

func unschedulableBy(qpi *framework.QueuedPodInfo, plugin string) *framework.QueuedPodInfo {
	qpi.UnschedulablePlugins = map[string]bool{plugin: true}
	return qpi
}

func TestFailedPodFlow(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// between runs after Pop and before the failure is reported.
		between func(q *PriorityQueue, pod *v1.Pod)
		plugin  string
		// after runs after the failure is reported.
		after func(q *PriorityQueue, clk *testingclock.FakeClock)
		want  string
	}{
		{name: "unschedulable is parked", plugin: "NodeResourcesFit", want: Unschedulable},
		{name: "error goes to backoff", plugin: "", want: Backoff},
		{name: "backoff completes into active", plugin: "", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			clk.Step(time.Second)
			q.FlushBackoffCompleted()
		}, want: Active},
		{name: "backoff not yet complete", plugin: "", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			clk.Step(999 * time.Millisecond)
			q.FlushBackoffCompleted()
		}, want: Backoff},
		{name: "move request during the cycle sends to backoff", plugin: "NodeResourcesFit", between: func(q *PriorityQueue, _ *v1.Pod) {
			q.MoveAllToActiveOrBackoffQueue(ctx, NodeAdd, nil)
		}, want: Backoff},
		{name: "update during the cycle sends to backoff", plugin: "NodeResourcesFit", between: func(q *PriorityQueue, pod *v1.Pod) {
			p := pod.DeepCopy()
			p.Labels = map[string]string{"x": "y"}
			q.Update(ctx, pod, p)
		}, want: Backoff},
		{name: "status-only update during the cycle does not", plugin: "NodeResourcesFit", between: func(q *PriorityQueue, pod *v1.Pod) {
			p := pod.DeepCopy()
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
			q.Update(ctx, pod, p)
		}, want: Unschedulable},
		{name: "deleted during the cycle is dropped", plugin: "NodeResourcesFit", between: func(q *PriorityQueue, pod *v1.Pod) {
			q.Delete(pod)
		}, want: ""},
		{name: "node added moves parked pod to backoff then active", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			if n := q.MoveAllToActiveOrBackoffQueue(ctx, NodeAdd, nil); n != 1 {
				t.Errorf("moved %d pods, want 1", n)
			}
		}, want: Backoff},
		{name: "moved after backoff expired goes to active", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			clk.Step(2 * time.Second)
			q.MoveAllToActiveOrBackoffQueue(ctx, NodeAdd, nil)
		}, want: Active},
		{name: "filtered move leaves it", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			q.MoveAllToActiveOrBackoffQueue(ctx, NodeAdd, func(*framework.QueuedPodInfo) bool { return false })
		}, want: Unschedulable},
		{name: "leftover flush after 5 minutes", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			clk.Step(5*time.Minute + time.Second)
			q.FlushUnschedulableLeftover()
		}, want: Active},
		{name: "no leftover flush before 5 minutes", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			clk.Step(4 * time.Minute)
			q.FlushUnschedulableLeftover()
		}, want: Unschedulable},
		{name: "claim names in the status of a parked pod move it", plugin: "DynamicResources", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			old := st.MakePod().Name("p").Obj()
			p := old.DeepCopy()
			p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x7k2q")}}
			q.Update(ctx, old, p)
		}, want: Backoff},
		{name: "other status of a parked pod leaves it", plugin: "DynamicResources", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			old := st.MakePod().Name("p").Obj()
			p := old.DeepCopy()
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "Unschedulable"}}
			p.Finalizers = []string{"example.com/f"}
			q.Update(ctx, old, p)
		}, want: Unschedulable},
		{name: "spec update of a parked pod moves it", plugin: "NodeResourcesFit", after: func(q *PriorityQueue, clk *testingclock.FakeClock) {
			old := st.MakePod().Name("p").Obj()
			p := old.DeepCopy()
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}}
			q.Update(ctx, old, p)
		}, want: Backoff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, clk := newQueue()
			pod := st.MakePod().Name("p").Obj()
			q.Add(ctx, pod)
			qpi := pop(t, q)
			cycle := q.SchedulingCycle()
			if tc.between != nil {
				tc.between(q, pod)
			}
			if tc.plugin != "" {
				unschedulableBy(qpi, tc.plugin)
			}
			q.AddUnschedulableIfNotPresent(ctx, qpi, cycle)
			if tc.after != nil {
				tc.after(q, clk)
			}
			if got := q.Where("default/p"); got != tc.want {
				t.Errorf("pod is in %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGatedPods(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue()
	gated := st.MakePod().Name("g").SchedulingGates("example.com/wait").Obj()
	q.Add(ctx, gated)
	if diff := cmp.Diff(Pending{Gated: 1}, q.PendingPods()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	q.MoveAllToActiveOrBackoffQueue(ctx, NodeAdd, nil)
	if got := q.Where("default/g"); got != Gated {
		t.Fatalf("after a node event the gated pod is in %q, want gated", got)
	}
	ungated := gated.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	q.Update(ctx, gated, ungated)
	if diff := cmp.Diff(Pending{Active: 1}, q.PendingPods()); diff != "" {
		t.Fatalf("pending after ungating (-want +got):\n%s", diff)
	}
	if got := pop(t, q); got.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", got.Attempts)
	}
}

func TestAssignedPodAddedMovesAffinityPods(t *testing.T) {
	ctx := context.Background()
	q, _ := newQueue()
	withAffinity := st.MakePod().Name("a").PodAffinity(st.Term("app", "db", "kubernetes.io/hostname")).Obj()
	plain := st.MakePod().Name("b").Obj()
	for _, p := range []*v1.Pod{withAffinity, plain} {
		q.Add(ctx, p)
	}
	for range 2 {
		qpi := pop(t, q)
		q.AddUnschedulableIfNotPresent(ctx, unschedulableBy(qpi, "InterPodAffinity"), q.SchedulingCycle()-1)
	}
	if n := q.AssignedPodAdded(ctx, st.MakePod().Name("other").Label("app", "web").Node("n1").Obj(), AssignedPodAdd); n != 0 {
		t.Errorf("a non-matching pod moved %d pods", n)
	}
	if n := q.AssignedPodAdded(ctx, st.MakePod().Name("db").Label("app", "db").Node("n1").Obj(), AssignedPodAdd); n != 1 {
		t.Errorf("a matching pod moved %d pods, want 1", n)
	}
	if got := q.Where("default/b"); got != Unschedulable {
		t.Errorf("pod without affinity is in %q, want unschedulable", got)
	}
}

func TestPopBlocksUntilAddOrClose(t *testing.T) {
	q, _ := newQueue()
	got := make(chan string, 1)
	go func() {
		qpi, err := q.Pop()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- qpi.Pod.Name
	}()
	select {
	case v := <-got:
		t.Fatalf("Pop returned %q on an empty queue", v)
	case <-time.After(20 * time.Millisecond):
	}
	q.Add(context.Background(), st.MakePod().Name("p").Obj())
	if v := <-got; v != "p" {
		t.Errorf("Pop = %q, want p", v)
	}
	go func() {
		_, err := q.Pop()
		got <- fmt.Sprint(err)
	}()
	q.Close()
	if v := <-got; v != ErrClosed.Error() {
		t.Errorf("Pop after Close = %q, want %q", v, ErrClosed)
	}
}

func TestNominator(t *testing.T) {
	n := NewNominator()
	p1 := st.MakePod().Name("p1").Obj()
	p2 := st.MakePod().Name("p2").Obj()
	n.Add(p1, "n1")
	n.Add(p2, "n1")
	n.Add(p1, "n2") // renominated
	names := func(node string) []string {
		var out []string
		for _, pi := range n.NominatedPodsForNode(node) {
			out = append(out, pi.Pod.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"p2"}, names("n1")); diff != "" {
		t.Errorf("n1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p1"}, names("n2")); diff != "" {
		t.Errorf("n2 (-want +got):\n%s", diff)
	}
	n.Delete(p1)
	if got := n.NominatedNode(p1); got != "" {
		t.Errorf("after Delete p1 is nominated to %q", got)
	}
	bound := p2.DeepCopy()
	bound.Spec.NodeName = "n3"
	n.Add(bound, "n1")
	if got := names("n1"); len(got) != 0 {
		t.Errorf("a bound pod stays nominated: %v", got)
	}
	// Nothing is nominated now; a new nomination is seen again.
	n.Add(p1, "n4")
	if diff := cmp.Diff([]string{"p1"}, names("n4")); diff != "" {
		t.Errorf("n4 after all were cleared (-want +got):\n%s", diff)
	}
}

func TestSharedNominator(t *testing.T) {
	shared := NewNominator()
	q := New(func(a, b *framework.QueuedPodInfo) bool { return false }, Options{Nominator: shared})
	p := st.MakePod().Name("p").Obj()
	p.Status.NominatedNodeName = "n1"
	q.Add(context.Background(), p)
	if got := len(shared.NominatedPodsForNode("n1")); got != 1 {
		t.Errorf("the shared nominator holds %d pods for n1, want the queued pod", got)
	}
}
