package podgc

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(name, node string, phase corev1.PodPhase, age int, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Minute))},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func TestGC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := metav1.NewTime(t0)
	objs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		pod("old-done", "n1", corev1.PodSucceeded, 30),
		pod("older-failed", "n1", corev1.PodFailed, 40),
		pod("new-done", "n1", corev1.PodSucceeded, 1),
		pod("running", "n1", corev1.PodRunning, 50),
		pod("orphan", "gone", corev1.PodRunning, 5),
		pod("unscheduled-terminating", "", corev1.PodPending, 5, func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		pod("unscheduled", "", corev1.PodPending, 5),
	}
	cs := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(cs, 0)
	clk := clocktesting.NewFakeClock(t0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clk, Options: controllercontext.Options{TerminatedPodGCThreshold: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c := ctrl.(*Controller)
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())

	remaining := func() []string {
		list, _ := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
		sort.Strings(out)
		return out
	}
	if err := c.gc(ctx); err != nil {
		t.Fatal(err)
	}
	// The two oldest terminated pods and the unscheduled terminating pod
	// go; the orphan waits out its quarantine.
	if diff := cmp.Diff([]string{"new-done", "orphan", "running", "unscheduled"}, remaining()); diff != "" {
		t.Fatalf("after first pass (-want +got):\n%s", diff)
	}
	clk.Step(Quarantine)
	if err := c.gc(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"new-done", "running", "unscheduled"}, remaining()); diff != "" {
		t.Fatalf("after quarantine (-want +got):\n%s", diff)
	}
	var markedFailed bool
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			markedFailed = true
		}
	}
	if !markedFailed {
		t.Error("orphaned running pod was not marked Failed before deletion")
	}
}
