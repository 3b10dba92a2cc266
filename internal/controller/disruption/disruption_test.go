package disruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

var now = time.Date(2026, 7, 8, 9, 10, 11, 0, time.UTC)

var labels = map[string]string{"app": "web"}

func pdb(mutate func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb", Namespace: "ns", Generation: 2},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	mutate(p)
	return p
}

func minAvailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = &v }
}
func maxUnavailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &v }
}

type podOpt func(*corev1.Pod)

func pod(name string, ready bool, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels, UID: types.UID("uid-" + name)}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ownedBy(apiVersion, kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
}
func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }

func deployment(name string, replicas int32) []runtime.Object {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-abc", Namespace: "ns", UID: types.UID("uid-" + name + "-abc"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
	return []runtime.Object{d, rs}
}

// status renders the parts of a PDB status a test checks.
func status(p *policyv1.PodDisruptionBudget) string {
	cond := "none"
	for _, c := range p.Status.Conditions {
		if c.Type == policyv1.DisruptionAllowedCondition {
			cond = fmt.Sprintf("%s/%s", c.Status, c.Reason)
		}
	}
	var disrupted []string
	for n := range p.Status.DisruptedPods {
		disrupted = append(disrupted, n)
	}
	return fmt.Sprintf("healthy=%d desired=%d expected=%d allowed=%d gen=%d cond=%s disrupted=%v",
		p.Status.CurrentHealthy, p.Status.DesiredHealthy, p.Status.ExpectedPods, p.Status.DisruptionsAllowed, p.Status.ObservedGeneration, cond, disrupted)
}

func TestSync(t *testing.T) {
	cases := []struct {
		name    string
		pdb     *policyv1.PodDisruptionBudget
		objs    []runtime.Object
		want    string
		events  []string
		requeue string
	}{{
		name: "integer minAvailable counts the pods there are",
		pdb:  pdb(minAvailable(intstr.FromInt32(2))),
		objs: []runtime.Object{pod("a", true), pod("b", true), pod("c", true), pod("d", false)},
		want: "healthy=3 desired=2 expected=4 allowed=1 gen=2 cond=True/SufficientPods disrupted=[]",
	}, {
		name: "maxUnavailable scales with the Deployment (through its ReplicaSet)",
		pdb:  pdb(maxUnavailable(intstr.FromInt32(1))),
		objs: append(deployment("web", 4),
			pod("a", true, ownedBy("apps/v1", "ReplicaSet", "web-abc")),
			pod("b", true, ownedBy("apps/v1", "ReplicaSet", "web-abc")),
			pod("c", true, ownedBy("apps/v1", "ReplicaSet", "web-abc"))),
		want: "healthy=3 desired=3 expected=4 allowed=0 gen=2 cond=False/InsufficientPods disrupted=[]",
	}, {
		name: "percentage minAvailable scales with the StatefulSet, rounding up",
		pdb:  pdb(minAvailable(intstr.FromString("50%"))),
		objs: []runtime.Object{
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3))}},
			pod("db-0", true, ownedBy("apps/v1", "StatefulSet", "db")),
			pod("db-1", true, ownedBy("apps/v1", "StatefulSet", "db")),
			pod("db-2", true, ownedBy("apps/v1", "StatefulSet", "db")),
		},
		want: "healthy=3 desired=2 expected=3 allowed=1 gen=2 cond=True/SufficientPods disrupted=[]",
	}, {
		name: "ReplicationController and a pod being deleted",
		pdb:  pdb(maxUnavailable(intstr.FromString("25%"))),
		objs: []runtime.Object{
			&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: "ns", UID: "uid-rc"}, Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To(int32(4))}},
			pod("a", true, ownedBy("v1", "ReplicationController", "rc")),
			pod("b", true, ownedBy("v1", "ReplicationController", "rc")),
			pod("c", true, ownedBy("v1", "ReplicationController", "rc")),
			pod("d", true, ownedBy("v1", "ReplicationController", "rc"), deleting),
		},
		want: "healthy=3 desired=3 expected=4 allowed=0 gen=2 cond=False/InsufficientPods disrupted=[]",
	}, {
		name:   "unmanaged pods with maxUnavailable: a warning, nothing allowed",
		pdb:    pdb(maxUnavailable(intstr.FromInt32(1))),
		objs:   []runtime.Object{pod("a", true), pod("b", true)},
		want:   "healthy=2 desired=0 expected=0 allowed=0 gen=2 cond=False/InsufficientPods disrupted=[]",
		events: []string{"Warning UnmanagedPods Pods selected by this PodDisruptionBudget"},
	}, {
		name:   "no pods",
		pdb:    pdb(minAvailable(intstr.FromInt32(1))),
		want:   "healthy=0 desired=1 expected=0 allowed=0 gen=2 cond=False/InsufficientPods disrupted=[]",
		events: []string{"Normal NoPods No matching pods found"},
	}, {
		name: "a just-evicted pod is not healthy until it goes or two minutes pass",
		pdb: pdb(func(p *policyv1.PodDisruptionBudget) {
			p.Spec.MinAvailable = ptr.To(intstr.FromInt32(1))
			p.Status.DisruptedPods = map[string]metav1.Time{"a": metav1.NewTime(now.Add(-30 * time.Second)), "b": metav1.NewTime(now.Add(-3 * time.Minute))}
		}),
		objs:    []runtime.Object{pod("a", true), pod("b", true), pod("c", true)},
		want:    "healthy=2 desired=1 expected=3 allowed=1 gen=2 cond=True/SufficientPods disrupted=[a]",
		events:  []string{"Warning NotDeleted Pod was expected by PDB ns/pdb to be deleted but it wasn't"},
		requeue: "requeue after 1m30s",
	}, {
		name:   "a controller that cannot be found: fail safe",
		pdb:    pdb(maxUnavailable(intstr.FromInt32(1))),
		objs:   []runtime.Object{pod("a", true, ownedBy("apps/v1", "ReplicaSet", "gone"))},
		want:   "healthy=0 desired=0 expected=0 allowed=0 gen=0 cond=False/SyncFailed disrupted=[]",
		events: []string{"Warning CalculateExpectedPodCountFailed Failed to calculate the number of expected pods: found no controllers for pod \"a\""},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]runtime.Object{tc.pdb}, tc.objs...)...)
			err := f.c.Sync(context.Background(), "ns/pdb")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want != "" && strings.Contains(tc.want, "SyncFailed") {
				if err == nil {
					t.Error("sync succeeded, want an error")
				}
			} else if got != tc.requeue {
				t.Errorf("sync returned %q, want %q", got, tc.requeue)
			}
			p, _ := f.client.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), "pdb", metav1.GetOptions{})
			if d := cmp.Diff(tc.want, status(p)); d != "" {
				t.Errorf("status (-want +got):\n%s", d)
			}
			evs := f.events()
			if len(evs) != len(tc.events) {
				t.Fatalf("events %q, want %q", evs, tc.events)
			}
			for i := range evs {
				if !strings.HasPrefix(evs[i], tc.events[i]) {
					t.Errorf("event %q, want prefix %q", evs[i], tc.events[i])
				}
			}
			// A second sync with the written status changes nothing.
			if !strings.Contains(tc.want, "SyncFailed") {
				_ = f.informer.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Update(p)
				f.client.ClearActions()
				_ = f.c.Sync(context.Background(), "ns/pdb")
				for _, a := range f.client.Actions() {
					if a.GetVerb() == "update" {
						t.Errorf("second sync wrote %s", a.GetResource().Resource)
					}
				}
			}
		})
	}
}

// TestScaleSubresource: a pod controlled by a kind the controller does not
// know is counted through the kind's scale subresource.
func TestScaleSubresource(t *testing.T) {
	p := pdb(maxUnavailable(intstr.FromInt32(1)))
	f := newFixture(t, p, pod("a", true, ownedBy("example.com/v1", "Foo", "foo")), pod("b", true, ownedBy("example.com/v1", "Foo", "foo")))
	f.client.Resources = []*metav1.APIResourceList{{
		GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "foos", Kind: "Foo", Namespaced: true}, {Name: "foos/scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Namespaced: true}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{{Group: "example.com", Version: "v1", Resource: "foos"}: "FooList"})
	dyn.PrependReactor("get", "foos", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		s := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": "foo", "namespace": "ns", "uid": "uid-foo"},
			"spec":     map[string]any{"replicas": int64(5)},
		}}
		return true, s, nil
	})
	f.c.dynamic = dyn
	if err := f.c.Sync(context.Background(), "ns/pdb"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.client.PolicyV1().PodDisruptionBudgets("ns").Get(context.Background(), "pdb", metav1.GetOptions{})
	if d := cmp.Diff("healthy=2 desired=4 expected=5 allowed=0 gen=2 cond=False/InsufficientPods disrupted=[]", status(got)); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
}

func TestStaleDisruptionTarget(t *testing.T) {
	evicted := pod("a", true, func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))})
	})
	f := newFixture(t, evicted)
	if err := f.c.syncStalePod(context.Background(), "ns/a"); err == nil || err.Error() != "requeue after 1m0s" {
		t.Fatalf("before the timeout: %v, want a requeue after 1m0s", err)
	}
	f.clock.Step(time.Minute)
	if err := f.c.syncStalePod(context.Background(), "ns/a"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.client.CoreV1().Pods("ns").Get(context.Background(), "a", metav1.GetOptions{})
	for _, c := range got.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status != corev1.ConditionFalse {
			t.Errorf("DisruptionTarget = %s, want False", c.Status)
		}
	}
}

type fixture struct {
	client   *fake.Clientset
	informer informers.SharedInformerFactory
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(now)}
	f.informer = informers.NewSharedInformerFactory(f.client, 0)
	ctrl, err := New(context.Background(), controllercontext.Context{Client: f.client, Informers: f.informer, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *policyv1.PodDisruptionBudget:
			err = f.informer.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = f.informer.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.ReplicationController:
			err = f.informer.Core().V1().ReplicationControllers().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			err = f.informer.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *appsv1.Deployment:
			err = f.informer.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.StatefulSet:
			err = f.informer.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
