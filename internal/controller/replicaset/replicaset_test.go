package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fixture struct {
	client   *fake.Clientset
	informer informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

// newFixture seeds the fake clientset and the informer caches with objs
// and builds the controller over rc (ReplicationControllers) or RSs.
func newFixture(t *testing.T, rc bool, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(now)}
	var n atomic.Int32
	f.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	f.informer = informers.NewSharedInformerFactory(f.client, 0)
	cc := controllercontext.Context{Client: f.client, Informers: f.informer, Recorder: f.recorder, Clock: f.clock}
	build := New
	if rc {
		build = NewForReplicationControllers
	}
	ctrl, err := build(context.Background(), cc)
	if err != nil {
		t.Fatalf("build controller: %v", err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			err = f.informer.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *corev1.ReplicationController:
			err = f.informer.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = f.informer.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.client.ClearActions()
	return f
}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}
}

type podOpt func(*corev1.Pod)

func owned(rs *appsv1.ReplicaSet) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
	}
}
func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readySince(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-d))}}
	}
}
func created(ago time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}
func withLabels(l map[string]string) podOpt { return func(p *corev1.Pod) { p.Labels = l } }

func newPod(name string, labels map[string]string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// verbs summarises the client's actions as "verb resource[/subresource]".
func verbs(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func deletedNames(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			out = append(out, d.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func lastStatus(t *testing.T, f *fixture) appsv1.ReplicaSetStatus {
	t.Helper()
	for i := len(f.client.Actions()) - 1; i >= 0; i-- {
		a := f.client.Actions()[i]
		if a.GetSubresource() == "status" {
			return a.(k8stesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).Status
		}
	}
	t.Fatalf("no status update in %v", verbs(f.client.Actions()))
	return appsv1.ReplicaSetStatus{}
}

func TestSyncScalesPods(t *testing.T) {
	rs := newRS("web", 2)
	l := rs.Spec.Template.Labels
	tests := []struct {
		name        string
		replicas    int32
		pods        []*corev1.Pod
		wantVerbs   []string
		wantDeleted []string
	}{
		{
			name:      "creates the missing pods",
			replicas:  3,
			wantVerbs: []string{"create pods", "create pods", "create pods", "update replicasets/status"},
		},
		{
			name:      "nothing to do",
			replicas:  1,
			pods:      []*corev1.Pod{newPod("a", l, owned(rs), onNode("n1"), readySince(time.Hour))},
			wantVerbs: []string{"update replicasets/status"},
		},
		{
			name:     "deletes unscheduled, then pending, then not ready first",
			replicas: 1,
			pods: []*corev1.Pod{
				newPod("ready", l, owned(rs), onNode("n1"), readySince(time.Hour)),
				newPod("unscheduled", l, owned(rs), phase(corev1.PodPending)),
				newPod("pending", l, owned(rs), onNode("n2"), phase(corev1.PodPending)),
				newPod("running-not-ready", l, owned(rs), onNode("n3"), phase(corev1.PodRunning)),
			},
			wantVerbs:   []string{"delete pods", "delete pods", "delete pods", "update replicasets/status"},
			wantDeleted: []string{"pending", "running-not-ready", "unscheduled"},
		},
		{
			name:     "among ready pods deletes the doubled-up and the newer",
			replicas: 2,
			pods: []*corev1.Pod{
				newPod("old-alone", l, owned(rs), onNode("n1"), readySince(10*time.Hour), created(20*time.Hour)),
				newPod("old-shared", l, owned(rs), onNode("n2"), readySince(10*time.Hour), created(20*time.Hour)),
				newPod("new-shared", l, owned(rs), onNode("n2"), readySince(time.Minute), created(time.Minute)),
				newPod("new-alone", l, owned(rs), onNode("n3"), readySince(time.Minute), created(time.Minute)),
			},
			wantVerbs:   []string{"delete pods", "delete pods", "update replicasets/status"},
			wantDeleted: []string{"new-shared", "old-shared"},
		},
		{
			name:     "terminating and finished pods do not count",
			replicas: 1,
			pods: []*corev1.Pod{
				newPod("done", l, owned(rs), onNode("n1"), phase(corev1.PodSucceeded)),
				newPod("failed", l, owned(rs), onNode("n1"), phase(corev1.PodFailed)),
				newPod("going", l, owned(rs), onNode("n1"), readySince(time.Hour), func(p *corev1.Pod) { ts := metav1.NewTime(now); p.DeletionTimestamp = &ts }),
			},
			wantVerbs: []string{"create pods", "update replicasets/status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := rs.DeepCopy()
			rs.Spec.Replicas = &tc.replicas
			objs := []runtime.Object{rs}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			f := newFixture(t, false, objs...)
			if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			got := verbs(f.client.Actions())
			sort.Strings(got)
			want := append([]string(nil), tc.wantVerbs...)
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeleted, deletedNames(f.client.Actions())); diff != "" {
				t.Errorf("deleted pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreatedPodsAndExpectations(t *testing.T) {
	rs := newRS("web", 3)
	f := newFixture(t, false, rs)
	ctx := context.Background()
	if err := f.c.Sync(ctx, "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	pods, _ := f.client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods created, want 3", len(pods.Items))
	}
	p := pods.Items[0]
	yes := true
	wantRef := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: rs.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
	if diff := cmp.Diff(wantRef, p.OwnerReferences); diff != "" {
		t.Errorf("ownerReferences (-want +got):\n%s", diff)
	}
	if p.GenerateName != "web-" || p.Labels["app"] != "web" || p.Spec.Containers[0].Image != "i" {
		t.Errorf("pod = %s %v %v; want generateName web-, the template's labels and spec", p.GenerateName, p.Labels, p.Spec.Containers)
	}
	// The informer has not seen the pods yet: a second sync must not create more.
	f.client.ClearActions()
	if err := f.c.Sync(ctx, "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	for _, v := range verbs(f.client.Actions()) {
		if v == "create pods" {
			t.Fatalf("second sync before the watch caught up created pods: %v", verbs(f.client.Actions()))
		}
	}
	// Once the creations are observed (or expire), it syncs again.
	for range 3 {
		f.c.expectations.CreationObserved("ns/web")
	}
	if !f.c.expectations.Satisfied("ns/web") {
		t.Errorf("expectations not satisfied after observing every creation")
	}
	f.c.expectations.ExpectCreations("ns/web", 1)
	f.clock.Step(ExpectationsTimeout + time.Second)
	if !f.c.expectations.Satisfied("ns/web") {
		t.Errorf("expectations not expired after %v", ExpectationsTimeout)
	}
	events := drain(f.recorder)
	if n := strings.Count(strings.Join(events, "\n"), "Normal SuccessfulCreate Created pod: web-"); n != 3 {
		t.Errorf("SuccessfulCreate events = %d, want 3: %v", n, events)
	}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestAdoptionAndRelease(t *testing.T) {
	rs := newRS("web", 2)
	other := newRS("other", 1)
	l := rs.Spec.Template.Labels
	f := newFixture(t, false, rs, other,
		newPod("orphan", l, onNode("n1"), readySince(time.Hour)),
		newPod("owned-elsewhere", l, owned(other), onNode("n1"), readySince(time.Hour)),
		newPod("stray", map[string]string{"app": "moved"}, owned(rs), onNode("n1"), readySince(time.Hour)),
		newPod("mine", l, owned(rs), onNode("n1"), readySince(time.Hour)),
	)
	ctx := context.Background()
	if err := f.c.Sync(ctx, "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got := map[string][]string{}
	for _, name := range []string{"orphan", "owned-elsewhere", "stray", "mine"} {
		p, err := f.client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.OwnerReferences {
			got[name] = append(got[name], fmt.Sprintf("%s/%s controller=%v block=%v", r.Kind, r.Name, *r.Controller, r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion))
		}
	}
	want := map[string][]string{
		"orphan":          {"ReplicaSet/web controller=true block=true"},
		"owned-elsewhere": {"ReplicaSet/other controller=true block=false"},
		"mine":            {"ReplicaSet/web controller=true block=false"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if s := lastStatus(t, f); s.Replicas != 2 || s.ReadyReplicas != 2 {
		t.Errorf("status = %+v; want 2 replicas (mine + adopted orphan), 2 ready", s)
	}
}

func TestStatus(t *testing.T) {
	rs := newRS("web", 3)
	rs.Spec.MinReadySeconds = 60
	l := rs.Spec.Template.Labels
	partial := map[string]string{"app": "web", "extra": "x"}
	rs.Spec.Template.Labels = partial
	rs.Spec.Selector.MatchLabels = l
	f := newFixture(t, false, rs,
		newPod("long-ready", partial, owned(rs), onNode("n1"), readySince(2*time.Minute)),
		newPod("just-ready", partial, owned(rs), onNode("n1"), readySince(10*time.Second)),
		newPod("not-ready", l, owned(rs), onNode("n1"), phase(corev1.PodRunning)),
	)
	if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1}
	if diff := cmp.Diff(want, lastStatus(t, f)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestReplicaFailure(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, false, rs)
	f.client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("quota exceeded")
	})
	err := f.c.Sync(context.Background(), "ns/web")
	if err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("Sync error = %v, want the create error", err)
	}
	creates := 0
	for _, v := range verbs(f.client.Actions()) {
		if v == "create pods" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("create attempts = %d; slow start must stop after the first failed batch of 1", creates)
	}
	s := lastStatus(t, f)
	if len(s.Conditions) != 1 || s.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure || s.Conditions[0].Reason != "FailedCreate" || !strings.Contains(s.Conditions[0].Message, "quota exceeded") {
		t.Errorf("conditions = %+v; want ReplicaFailure FailedCreate", s.Conditions)
	}
	if adds, _ := f.c.expectations.Pending("ns/web"); adds != 0 {
		t.Errorf("pending creations = %d after a failure; skipped creations must be forgotten", adds)
	}
	if ev := drain(f.recorder); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning FailedCreate Error creating: quota exceeded") {
		t.Errorf("events = %v, want one FailedCreate", ev)
	}
}

func TestReplicationController(t *testing.T) {
	replicas := int32(2)
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "ns", UID: "uid-legacy", Generation: 4},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: &replicas,
			Selector: map[string]string{"app": "legacy"},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}
	f := newFixture(t, true, rc)
	ctx := context.Background()
	if err := f.c.Sync(ctx, "ns/legacy"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	pods, _ := f.client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	if r := pods.Items[0].OwnerReferences[0]; r.APIVersion != "v1" || r.Kind != "ReplicationController" || r.Name != "legacy" {
		t.Errorf("owner = %+v, want v1 ReplicationController legacy", r)
	}
	got, _ := f.client.CoreV1().ReplicationControllers("ns").Get(ctx, "legacy", metav1.GetOptions{})
	if got.Status.ObservedGeneration != 4 {
		t.Errorf("RC status = %+v, want observedGeneration 4", got.Status)
	}
}

func TestSlowStartBatch(t *testing.T) {
	tests := []struct {
		name      string
		count     int
		failAt    int32 // the call number that fails (0 never)
		wantCalls int32
		wantOK    int
	}{
		{name: "all succeed", count: 10, wantCalls: 10, wantOK: 10},
		{name: "fails in the third batch", count: 10, failAt: 5, wantCalls: 7, wantOK: 6},
		{name: "fails at once", count: 10, failAt: 1, wantCalls: 1, wantOK: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			ok, err := slowStartBatch(tc.count, 1, func() error {
				if calls.Add(1) == tc.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if calls.Load() != tc.wantCalls || ok != tc.wantOK || (err != nil) != (tc.failAt != 0) {
				t.Errorf("calls=%d ok=%d err=%v; want calls=%d ok=%d", calls.Load(), ok, err, tc.wantCalls, tc.wantOK)
			}
		})
	}
}
