package scheduler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	fwruntime "github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	st "github.com/skiff-sh/skiff/internal/scheduler/testing"
)

// binder makes the fake clientset bind pods as the API server does, and
// fails the first bind of the pods in failFirst.
type binder struct {
	cs        *fake.Clientset
	mu        sync.Mutex
	failFirst map[string]bool
	binds     map[string]int
}

func (b *binder) react(action clienttesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "binding" {
		return false, nil, nil
	}
	binding := action.(clienttesting.CreateAction).GetObject().(*v1.Binding)
	b.mu.Lock()
	b.binds[binding.Name]++
	fail := b.failFirst[binding.Name] && b.binds[binding.Name] == 1
	b.mu.Unlock()
	if fail {
		return true, nil, errors.New("injected bind failure")
	}
	obj, err := b.cs.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), binding.Namespace, binding.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*v1.Pod).DeepCopy()
	pod.Spec.NodeName = binding.Target.Name
	return true, nil, b.cs.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace)
}

func TestScheduleWithFakeClient(t *testing.T) {
	nodes := []runtime.Object{
		st.MakeNode("small").Capacity(map[string]string{"cpu": "1", "memory": "4Gi", "pods": "10"}).Obj(),
		st.MakeNode("large").Capacity(map[string]string{"cpu": "8", "memory": "16Gi", "pods": "10"}).Obj(),
	}
	cs := fake.NewClientset(nodes...)
	b := &binder{cs: cs, failFirst: map[string]bool{"flaky": true}, binds: map[string]int{}}
	cs.PrependReactor("create", "pods", b.react)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(cs, 0)
	s, err := New(ctx, cs, factory, Options{
		Profiles:          []fwruntime.Profile{plugins.DefaultProfile()},
		Registry:          plugins.NewInTreeRegistry(),
		PodInitialBackoff: 10 * time.Millisecond,
		PodMaxBackoff:     20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	pods := []*v1.Pod{
		st.MakePod().Name("fits-large-only").Req(map[string]string{"cpu": "4"}).Obj(),
		st.MakePod().Name("flaky").Req(map[string]string{"cpu": "4"}).Obj(),
		st.MakePod().Name("too-big").Req(map[string]string{"cpu": "64"}).Obj(),
		st.MakePod().Name("other-scheduler").Obj(),
	}
	for _, p := range pods[:3] {
		p.Spec.SchedulerName = "default-scheduler" // the API server's default
	}
	pods[3].Spec.SchedulerName = "not-us"
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	get := func(name string) *v1.Pod {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	deadline := time.Now().Add(10 * time.Second)
	for get("fits-large-only").Spec.NodeName == "" || get("flaky").Spec.NodeName == "" || !hasUnschedulable(get("too-big")) {
		if time.Now().After(deadline) {
			t.Fatalf("pods not settled: %+v %+v %+v", get("fits-large-only").Spec.NodeName, get("flaky").Spec.NodeName, get("too-big").Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := map[string]string{}
	for _, p := range pods {
		got[p.Name] = get(p.Name).Spec.NodeName
	}
	want := map[string]string{"fits-large-only": "large", "flaky": "large", "too-big": "", "other-scheduler": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	b.mu.Lock()
	if b.binds["flaky"] != 2 {
		t.Errorf("flaky was bound %d times, want 2 (one injected failure, one retry)", b.binds["flaky"])
	}
	b.mu.Unlock()
	cond := get("too-big").Status.Conditions[0]
	if want := "0/2 nodes are available: 2 Insufficient cpu."; len(cond.Message) < len(want) || cond.Message[:len(want)] != want {
		t.Errorf("condition message %q, want prefix %q", cond.Message, want)
	}
	// Once confirmed by the informer, no pod stays assumed.
	deadline = time.Now().Add(5 * time.Second)
	for s.Cache().AssumedPodCount() != 0 || s.Cache().PodCount() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("cache: %d pods, %d assumed; want 2 confirmed", s.Cache().PodCount(), s.Cache().AssumedPodCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.Queue().Where("default/too-big"); got != "unschedulable" && got != "backoff" && got != "inflight" {
		t.Errorf("too-big is in %q", got)
	}
	if got := s.Queue().Where("default/other-scheduler"); got != "" {
		t.Errorf("a pod of another scheduler is queued in %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func hasUnschedulable(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func TestNodeSchedulingPropertiesChanged(t *testing.T) {
	base := st.MakeNode("n").Capacity(map[string]string{"cpu": "1"}).Obj()
	base.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)}}
	tests := []struct {
		name string
		edit func(n *v1.Node)
		want bool
	}{
		{"heartbeat only", func(n *v1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Unix(2, 0) }, false},
		{"label", func(n *v1.Node) { n.Labels["x"] = "y" }, true},
		{"taint", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} }, true},
		{"unschedulable", func(n *v1.Node) { n.Spec.Unschedulable = true }, true},
		{"allocatable", func(n *v1.Node) { n.Status.Allocatable = st.List(map[string]string{"cpu": "2"}) }, true},
		{"ready condition", func(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionFalse }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.edit(n)
			if got := NodeSchedulingPropertiesChanged(base, n); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
