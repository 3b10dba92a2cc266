package nodelifecycle

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

func controllercontextOptions() controllercontext.Options { return controllercontext.Options{} }

// waitFor polls the informer caches (not a timer) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen by the informers", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestUnreachableNodeIsTaintedAndPodsEvicted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clk := clocktesting.NewFakeClock(t0)
	live, dead := readyNode("live", corev1.ConditionTrue), readyNode("dead", corev1.ConditionTrue)
	secs := int64(300)
	intolerant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "intolerant", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{NodeName: "dead"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	tolerant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tolerant", Namespace: "ns", UID: "u2"}, Spec: corev1.PodSpec{NodeName: "dead",
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}}}}
	cs := fake.NewClientset(live, dead, leaseFor("live", t0), leaseFor("dead", t0), intolerant, tolerant)
	f := informers.NewSharedInformerFactory(cs, 0)
	rec := record.NewFakeRecorder(100)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clk, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*Controller)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	c.monitor(ctx)
	// 60 s later only "live" has renewed its lease.
	clk.Step(60 * time.Second)
	if _, err := cs.CoordinationV1().Leases(LeaseNamespace).Update(ctx, leaseFor("live", clk.Now()), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lease renewal", func() bool {
		l, err := c.leaseLister.Leases(LeaseNamespace).Get("live")
		return err == nil && l.Spec.RenewTime.Time.Equal(clk.Now())
	})
	c.monitor(ctx)
	n, _ := cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
	if got := readyStatus(n); got != corev1.ConditionUnknown {
		t.Fatalf("dead node Ready = %s, want Unknown", got)
	}
	if l, _ := cs.CoreV1().Nodes().Get(ctx, "live", metav1.GetOptions{}); readyStatus(l) != corev1.ConditionTrue {
		t.Fatalf("live node Ready = %s, want True", readyStatus(l))
	}
	waitFor(t, "node status", func() bool {
		n, err := c.nodeLister.Get("dead")
		return err == nil && readyStatus(n) == corev1.ConditionUnknown
	})
	if err := c.syncNode(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	c.taintZones(ctx)
	n, _ = cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
	if !hasNoExecute(n, &UnreachableNoExecute) {
		t.Fatalf("dead node taints = %v, want unreachable:NoExecute", n.Spec.Taints)
	}
	waitFor(t, "taint", func() bool {
		n, err := c.nodeLister.Get("dead")
		return err == nil && hasNoExecute(n, &UnreachableNoExecute)
	})
	if err := c.syncPod(ctx, "ns/intolerant"); err != nil {
		t.Fatal(err)
	}
	// The tolerant pod is looked at again once its 300 s have run out
	// (counted from the end of the taint's second).
	err = c.syncPod(ctx, "ns/tolerant")
	if after, ok := worker.RequeueDelay(err); !ok || after != 301*time.Second {
		t.Fatalf("sync of the tolerant pod = %v, want a requeue after 5m1s", err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "intolerant", metav1.GetOptions{}); err == nil {
		t.Error("pod without toleration not evicted")
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "tolerant", metav1.GetOptions{}); err != nil {
		t.Errorf("pod tolerating 300 s evicted at once: %v", err)
	}
	clk.Step(301 * time.Second)
	if err := c.syncPod(ctx, "ns/tolerant"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "tolerant", metav1.GetOptions{}); err == nil {
		t.Error("pod not evicted after its tolerationSeconds")
	}
	var reasons []string
	for len(rec.Events) > 0 {
		reasons = append(reasons, <-rec.Events)
	}
	want := map[string]bool{"Normal NodeNotReady Node dead status is now: NodeNotReady": false,
		"Normal TaintManagerEviction Marking for deletion Pod ns/intolerant": false}
	for _, r := range reasons {
		if _, ok := want[r]; ok {
			want[r] = true
		}
	}
	for r, seen := range want {
		if !seen {
			t.Errorf("event %q not recorded (got %q)", r, reasons)
		}
	}

	// The node comes back: the NoExecute taint goes at once.
	back := n.DeepCopy()
	back.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(clk.Now())}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node ready", func() bool {
		n, err := c.nodeLister.Get("dead")
		return err == nil && readyStatus(n) == corev1.ConditionTrue
	})
	if err := c.syncNode(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	n, _ = cs.CoreV1().Nodes().Get(ctx, "dead", metav1.GetOptions{})
	if len(n.Spec.Taints) != 0 {
		t.Errorf("returned node taints = %v, want none", n.Spec.Taints)
	}
}

func TestNoTaintingWhenEveryNodeIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clk := clocktesting.NewFakeClock(t0)
	cs := fake.NewClientset(readyNode("a", corev1.ConditionTrue), readyNode("b", corev1.ConditionTrue), leaseFor("a", t0), leaseFor("b", t0))
	f := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*Controller)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	c.monitor(ctx)
	clk.Step(60 * time.Second)
	c.monitor(ctx)
	waitFor(t, "both unknown", func() bool {
		a, _ := c.nodeLister.Get("a")
		b, _ := c.nodeLister.Get("b")
		return a != nil && b != nil && readyStatus(a) == corev1.ConditionUnknown && readyStatus(b) == corev1.ConditionUnknown
	})
	c.monitor(ctx)
	for _, name := range []string{"a", "b"} {
		if err := c.syncNode(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	c.taintZones(ctx)
	for _, name := range []string{"a", "b"} {
		n, _ := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if hasNoExecute(n, &UnreachableNoExecute) {
			t.Errorf("node %s tainted NoExecute while every zone is down", name)
		}
	}
}
