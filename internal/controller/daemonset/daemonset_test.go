package daemonset

import (
	"context"
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
	"k8s.io/apimachinery/pkg/util/intstr"
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

// newFixture seeds the fake clientset and the informer caches with objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
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
	ctrl, err := New(context.Background(), controllercontext.Context{Client: f.client, Informers: f.informer, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatalf("build controller: %v", err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		f.add(t, o)
	}
	f.client.ClearActions()
	return f
}

func (f *fixture) add(t *testing.T, o runtime.Object) {
	t.Helper()
	var err error
	switch o := o.(type) {
	case *appsv1.DaemonSet:
		err = f.informer.Apps().V1().DaemonSets().Informer().GetIndexer().Add(o)
	case *corev1.Pod:
		err = f.informer.Core().V1().Pods().Informer().GetIndexer().Add(o)
	case *corev1.Node:
		err = f.informer.Core().V1().Nodes().Informer().GetIndexer().Add(o)
	case *appsv1.ControllerRevision:
		err = f.informer.Apps().V1().ControllerRevisions().Informer().GetIndexer().Add(o)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// actions renders the API writes as "verb resource name[ node]" lines.
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "create":
			switch o := a.(k8stesting.CreateAction).GetObject().(type) {
			case *corev1.Pod:
				node, _ := targetNode(o)
				out = append(out, "create pods on "+node)
			case *appsv1.ControllerRevision:
				out = append(out, "create controllerrevisions "+o.Name)
			}
		case "delete":
			out = append(out, "delete "+a.GetResource().Resource+" "+a.(k8stesting.DeleteAction).GetName())
		case "update":
			out = append(out, "update "+a.GetResource().Resource+"/"+a.GetSubresource())
		case "patch":
			out = append(out, "patch "+a.GetResource().Resource+" "+a.(k8stesting.PatchAction).GetName())
		}
	}
	sort.Strings(out)
	return out
}

func (f *fixture) createdPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			if p, ok := c.GetObject().(*corev1.Pod); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

func (f *fixture) status(t *testing.T) appsv1.DaemonSetStatus {
	t.Helper()
	ds, err := f.client.AppsV1().DaemonSets("default").Get(context.Background(), "ds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Status
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

func newDS(mods ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	limit := int32(10)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "default", UID: "ds-uid", Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:v1"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero},
			},
			RevisionHistoryLimit: &limit,
		},
	}
	for _, m := range mods {
		m(ds)
	}
	return ds
}

func newNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

// daemonPod is a pod of ds on node with the template hash of ds's
// current template (or "old"), ready since ready (zero: not ready).
func daemonPod(ds *appsv1.DaemonSet, name, node, hash string, ready time.Time) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			Labels:            map[string]string{"app": "d", HashLabel: hash},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if !ready.IsZero() {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}
	}
	return p
}

func syncDS(t *testing.T, f *fixture) {
	t.Helper()
	if err := f.c.Sync(context.Background(), "default/ds"); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func TestPlacement(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"} })
	worker := func(n *corev1.Node) { n.Labels["role"] = "worker" }
	f := newFixture(t, ds,
		newNode("a", worker),
		newNode("b"), // selector does not match
		newNode("c", worker, taint("dedicated", corev1.TaintEffectNoSchedule)),             // untolerated
		newNode("d", worker, taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), // tolerated for daemons
		newNode("e", worker, taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule), taint(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)),
		newNode("f", worker, taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), // only host-network pods tolerate it
	)
	syncDS(t, f)
	hash := f.createdPods()[0].Labels[HashLabel]
	want := []string{
		"create controllerrevisions ds-" + hash,
		"create pods on a", "create pods on d", "create pods on e",
		"update daemonsets/status",
	}
	if diff := cmp.Diff(want, f.actions()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	pod := f.createdPods()[0]
	wantAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	if diff := cmp.Diff(wantAffinity, pod.Spec.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("pod is bound by the controller to %q; the scheduler must place it", pod.Spec.NodeName)
	}
	var keys []string
	for _, tol := range pod.Spec.Tolerations {
		if tol.TolerationSeconds != nil {
			t.Errorf("toleration %s has tolerationSeconds", tol.Key)
		}
		keys = append(keys, tol.Key+":"+string(tol.Effect))
	}
	wantTol := []string{
		"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute",
		"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule",
		"node.kubernetes.io/pid-pressure:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule",
	}
	if diff := cmp.Diff(wantTol, keys); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if pod.GenerateName != "ds-" || metav1.GetControllerOf(pod).UID != "ds-uid" {
		t.Errorf("pod name prefix %q, owner %v", pod.GenerateName, pod.OwnerReferences)
	}
	wantStatus := appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, NumberUnavailable: 3, ObservedGeneration: 1}
	if diff := cmp.Diff(wantStatus, f.status(t)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if got := f.events(); len(got) != 3 || !strings.HasPrefix(got[0], "Normal SuccessfulCreate Created pod: ds-") {
		t.Errorf("events = %q", got)
	}
}

func TestHostNetworkToleratesNetworkUnavailable(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true })
	f := newFixture(t, ds, newNode("a", taint(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)))
	syncDS(t, f)
	if got := len(f.createdPods()); got != 1 {
		t.Fatalf("created %d pods, want 1", got)
	}
}

// currentHash is the hash the controller gives ds's template.
func currentHash(t *testing.T, ds *appsv1.DaemonSet) string {
	t.Helper()
	f := newFixture(t, ds)
	syncDS(t, f)
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			if r, ok := c.GetObject().(*appsv1.ControllerRevision); ok {
				return r.Labels[HashLabel]
			}
		}
	}
	t.Fatal("no revision created")
	return ""
}

func TestStatusCounters(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.MinReadySeconds = 30
		ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"}
	})
	h := currentHash(t, ds)
	worker := func(n *corev1.Node) { n.Labels["role"] = "worker" }
	f := newFixture(t, ds,
		newNode("a", worker), newNode("b", worker), newNode("c", worker), newNode("d", worker), newNode("x"),
		daemonPod(ds, "pa", "a", h, now.Add(-time.Minute)),    // ready, available
		daemonPod(ds, "pb", "b", h, now.Add(-10*time.Second)), // ready, not yet available
		daemonPod(ds, "pc", "c", "old", time.Time{}),          // not ready, old
		daemonPod(ds, "px", "x", h, now.Add(-time.Minute)),    // misscheduled
	)
	f.c.expectations.set("default/ds", 0, 0)
	syncDS(t, f)
	want := appsv1.DaemonSetStatus{
		DesiredNumberScheduled: 4, CurrentNumberScheduled: 3, NumberMisscheduled: 1,
		NumberReady: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1, NumberUnavailable: 3,
		ObservedGeneration: 1,
	}
	if diff := cmp.Diff(want, f.status(t)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// d gets a pod, x's goes; c's old unavailable pod is replaced.
	wantActions := []string{
		"create controllerrevisions ds-" + h, "create pods on d", "delete pods px", "update daemonsets/status",
	}
	if diff := cmp.Diff(wantActions, f.actions()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestRollingUpdate(t *testing.T) {
	three := intstr.FromInt32(3)
	two := intstr.FromInt32(2)
	zero := intstr.FromInt32(0)
	cases := []struct {
		name      string
		strategy  appsv1.DaemonSetUpdateStrategy
		oldReady  []bool // per node a, b, c, d
		newOnNode map[string]bool
		want      []string
	}{{
		name:     "maxUnavailable 2 replaces two available old pods",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &two, MaxSurge: &zero}},
		oldReady: []bool{true, true, true, true},
		want:     []string{"delete pods old-a", "delete pods old-b"},
	}, {
		name:     "an unavailable old pod is always replaced and uses the budget",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &two, MaxSurge: &zero}},
		oldReady: []bool{true, true, false, true},
		want:     []string{"delete pods old-a", "delete pods old-c"},
	}, {
		name:     "maxSurge creates new pods beside the old ones",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &two}},
		oldReady: []bool{true, true, true, true},
		want:     []string{"create pods on a", "create pods on b"},
	}, {
		name:      "with surge the old pod goes once the new one is available",
		strategy:  appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &zero, MaxSurge: &three}},
		oldReady:  []bool{true, true, true, true},
		newOnNode: map[string]bool{"a": true},
		// The deletion is outstanding: the rollout goes on once it is seen.
		want: []string{"delete pods old-a"},
	}, {
		name:     "OnDelete leaves old pods alone",
		strategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
		oldReady: []bool{true, true, true, true},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy = tc.strategy })
			h := currentHash(t, ds)
			objs := []runtime.Object{ds}
			for i, n := range []string{"a", "b", "c", "d"} {
				objs = append(objs, newNode(n))
				var ready time.Time
				if tc.oldReady[i] {
					ready = now.Add(-time.Hour)
				}
				objs = append(objs, daemonPod(ds, "old-"+n, n, "old", ready))
				if tc.newOnNode[n] {
					p := daemonPod(ds, "new-"+n, n, h, now.Add(-time.Minute))
					p.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
					objs = append(objs, p)
				}
			}
			f := newFixture(t, objs...)
			syncDS(t, f)
			want := append([]string{"create controllerrevisions ds-" + h}, tc.want...)
			want = append(want, "update daemonsets/status")
			sort.Strings(want)
			if diff := cmp.Diff(want, f.actions()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailedPodsAreReplacedWithBackoff(t *testing.T) {
	ds := newDS()
	h := currentHash(t, ds)
	failed := daemonPod(ds, "p", "a", h, time.Time{})
	failed.Status.Phase = corev1.PodFailed
	f := newFixture(t, ds, newNode("a"), failed)
	syncDS(t, f)
	want := []string{"create controllerrevisions ds-" + h, "delete pods p", "update daemonsets/status"}
	if diff := cmp.Diff(want, f.actions()); diff != "" {
		t.Errorf("first sync (-want +got):\n%s", diff)
	}
	if got := f.events(); len(got) < 1 || got[0] != "Warning FailedDaemonPod Found failed daemon pod default/p on node a, will try to kill it" {
		t.Errorf("events = %q", got)
	}
	// The replacement fails at once: within the back-off it is kept.
	revs, _ := f.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	for i := range revs.Items {
		f.add(t, &revs.Items[i])
	}
	f.client.ClearActions()
	f.c.expectations.forget("default/ds")
	again := failed.DeepCopy()
	again.Name = "p2"
	f.add(t, again)
	if err := f.informer.Core().V1().Pods().Informer().GetIndexer().Delete(failed); err != nil {
		t.Fatal(err)
	}
	syncDS(t, f)
	for _, a := range f.actions() {
		if strings.HasPrefix(a, "delete pods") {
			t.Errorf("deleted within the back-off: %v", f.actions())
		}
	}
	f.clock.Step(2 * time.Second)
	f.client.ClearActions()
	syncDS(t, f)
	if diff := cmp.Diff([]string{"delete pods p2", "update daemonsets/status"}, f.actions()); diff != "" {
		t.Errorf("after the back-off (-want +got):\n%s", diff)
	}
}

func TestHistory(t *testing.T) {
	ds := newDS()
	f := newFixture(t, ds, newNode("a"))
	syncDS(t, f)
	revs, err := f.client.AppsV1().ControllerRevisions("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Fatalf("revisions: %v %v", revs, err)
	}
	r := revs.Items[0]
	h := r.Labels[HashLabel]
	if r.Name != "ds-"+h || r.Revision != 1 || metav1.GetControllerOf(&r).UID != "ds-uid" {
		t.Errorf("revision %s #%d owners %v", r.Name, r.Revision, r.OwnerReferences)
	}
	if !strings.HasPrefix(string(r.Data.Raw), `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"d"}}`) {
		t.Errorf("data = %s", r.Data.Raw)
	}
	if got := f.createdPods()[0].Labels[HashLabel]; got != h {
		t.Errorf("pod hash %q, revision hash %q", got, h)
	}
}

func TestSelectingAll(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} })
	f := newFixture(t, ds, newNode("a"))
	syncDS(t, f)
	if len(f.client.Actions()) != 0 {
		t.Errorf("actions = %v; want none", f.actions())
	}
	if diff := cmp.Diff([]string{"Warning SelectingAll This daemon set is selecting all pods. A non-empty selector is required."}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestAdoptsOrphanAndLabelsGeneration(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Annotations = map[string]string{TemplateGenerationAnnotation: "4"} })
	orphan := daemonPod(ds, "orphan", "a", "x", now.Add(-time.Hour))
	orphan.OwnerReferences = nil
	f := newFixture(t, ds, newNode("a"), newNode("b"), orphan)
	syncDS(t, f)
	acts := f.actions()
	if !contains(acts, "patch pods orphan") || !contains(acts, "create pods on b") || contains(acts, "create pods on a") {
		t.Errorf("actions = %v; want the orphan on a adopted and a pod created on b only", acts)
	}
	if got := f.createdPods()[0].Labels[TemplateGenerationLabel]; got != "4" {
		t.Errorf("pod-template-generation = %q, want 4", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestNodeChangesEnqueue(t *testing.T) {
	ds := newDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "worker"} })
	f := newFixture(t, ds)
	plain := newNode("a")
	worker := newNode("a", func(n *corev1.Node) { n.Labels["role"] = "worker" })
	heartbeat := worker.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	cases := []struct {
		name     string
		old, new *corev1.Node
		want     int
	}{
		{name: "label makes the node fit", old: plain, new: worker, want: 1},
		{name: "a heartbeat changes nothing", old: worker, new: heartbeat, want: 0},
		{name: "untolerated taint", old: worker, new: newNode("a", func(n *corev1.Node) { n.Labels["role"] = "worker" }, taint("x", corev1.TaintEffectNoSchedule)), want: 1},
	}
	drain := func() {
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			f.c.queue.Done(k)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			drain()
			f.c.updateNode(tc.old, tc.new)
			if got := f.c.queue.Len(); got != tc.want {
				t.Errorf("queued %d, want %d", got, tc.want)
			}
		})
	}
	drain()
	f.c.addNode(newNode("b"))
	if got := f.c.queue.Len(); got != 0 {
		t.Errorf("a node that does not fit queued %d", got)
	}
	f.c.addNode(newNode("c", func(n *corev1.Node) { n.Labels["role"] = "worker" }))
	if got := f.c.queue.Len(); got != 1 {
		t.Errorf("a fitting node queued %d, want 1", got)
	}
}
