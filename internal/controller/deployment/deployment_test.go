package deployment

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
	informer informers.SharedInformerFactory
	client   *fake.Clientset
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	c        *Controller
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(objs...), recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(now)}
	inf := informers.NewSharedInformerFactory(f.client, 0)
	f.informer = inf
	c, err := NewController(controllercontext.Context{Client: f.client, Informers: inf, Recorder: f.recorder, Clock: f.clock})
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f.c = c
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.Deployment:
			err = inf.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.ReplicaSet:
			err = inf.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = inf.Core().V1().Pods().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.client.ClearActions()
	return f
}

// refresh copies the fake store into the informer caches, as a watch would.
func (f *fixture) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ds, _ := f.client.AppsV1().Deployments("ns").List(ctx, metav1.ListOptions{})
	for i := range ds.Items {
		if err := f.informer.Apps().V1().Deployments().Informer().GetIndexer().Update(&ds.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	rss, _ := f.client.AppsV1().ReplicaSets("ns").List(ctx, metav1.ListOptions{})
	for i := range rss.Items {
		if err := f.informer.Apps().V1().ReplicaSets().Informer().GetIndexer().Update(&rss.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func newDeployment(replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	surge, unavail := intstr.FromInt32(3), intstr.FromInt32(2)
	limit, deadline := int32(10), int32(600)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavail},
			},
			RevisionHistoryLimit:    &limit,
			ProgressDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
			},
		},
	}
}

// rsFor is the ReplicaSet d would own for image, with spec and available
// replicas and a revision.
func rsFor(d *appsv1.Deployment, image string, replicas, available int32, rev int, age time.Duration) *appsv1.ReplicaSet {
	dd := d.DeepCopy()
	dd.Spec.Template.Spec.Containers[0].Image = image
	hash := ComputeHash(&dd.Spec.Template, nil)
	tmpl := dd.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, PodTemplateHashLabel, hash)
	yes := true
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-" + hash, Namespace: "ns", UID: types.UID("uid-" + hash), Labels: tmpl.Labels,
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Annotations: map[string]string{
				RevisionAnnotation:        fmt.Sprint(rev),
				DesiredReplicasAnnotation: fmt.Sprint(replicasOf(d)),
				MaxReplicasAnnotation:     fmt.Sprint(replicasOf(d) + maxSurge(d)),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: d.UID, Controller: &yes}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: *tmpl,
		},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas, ReadyReplicas: available, AvailableReplicas: available},
	}
}

// rsSizes are the replicas of every ReplicaSet in the fake store, by image.
func rsSizes(t *testing.T, f *fixture) map[string]int32 {
	t.Helper()
	list, err := f.client.AppsV1().ReplicaSets("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, rs := range list.Items {
		out[rs.Spec.Template.Spec.Containers[0].Image] = *rs.Spec.Replicas
	}
	return out
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

func TestSyncRollingUpdate(t *testing.T) {
	d := newDeployment(10, "b")
	tests := []struct {
		name       string
		d          *appsv1.Deployment
		rss        []*appsv1.ReplicaSet
		want       map[string]int32
		wantEvents []string
	}{
		{
			name:       "a new deployment gets a replica set of full size",
			d:          d,
			want:       map[string]int32{"b": 10},
			wantEvents: []string{"Normal ScalingReplicaSet Scaled up replica set web-" + ComputeHash(&d.Spec.Template, nil) + " from 0 to 10"},
		},
		{
			// The new replica set is created at maxSurge and, in the same
			// sync, the old one goes down by maxUnavailable.
			name: "a new template surges by maxSurge",
			d:    d,
			rss:  []*appsv1.ReplicaSet{rsFor(d, "a", 10, 10, 1, time.Hour)},
			want: map[string]int32{"a": 8, "b": 3},
			wantEvents: []string{
				"Normal ScalingReplicaSet Scaled up replica set web-" + ComputeHash(&d.Spec.Template, nil) + " from 0 to 3",
				"Normal ScalingReplicaSet Scaled down replica set " + rsFor(d, "a", 0, 0, 0, 0).Name + " from 10 to 8",
			},
		},
		{
			name:       "old replicas go down as far as maxUnavailable allows",
			d:          d,
			rss:        []*appsv1.ReplicaSet{rsFor(d, "a", 10, 10, 1, time.Hour), rsFor(d, "b", 3, 0, 2, time.Minute)},
			want:       map[string]int32{"a": 8, "b": 3},
			wantEvents: []string{"Normal ScalingReplicaSet Scaled down replica set " + rsFor(d, "a", 0, 0, 0, 0).Name + " from 10 to 8"},
		},
		{
			name: "available new replicas let old ones go",
			d:    d,
			rss:  []*appsv1.ReplicaSet{rsFor(d, "a", 8, 8, 1, time.Hour), rsFor(d, "b", 5, 5, 2, time.Minute)},
			// 13 available, 8 must stay: 5 old ones may go.
			want: map[string]int32{"a": 3, "b": 5},
		},
		{
			name: "unavailable old replicas are cleaned up first",
			d:    d,
			rss:  []*appsv1.ReplicaSet{rsFor(d, "a", 10, 6, 1, time.Hour), rsFor(d, "b", 3, 3, 2, time.Minute)},
			want: map[string]int32{"a": 5, "b": 3},
		},
		{
			name: "a scaling event resizes proportionally",
			d:    newDeployment(20, "b"),
			rss:  []*appsv1.ReplicaSet{rsFor(d, "a", 8, 8, 1, time.Hour), rsFor(d, "b", 5, 0, 2, time.Minute)},
			// 23 allowed, 13 now: a gets round(8*23/13)-8=6, b the rest (4).
			want: map[string]int32{"a": 14, "b": 9},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.d}
			for _, rs := range tc.rss {
				objs = append(objs, rs)
			}
			f := newFixture(t, objs...)
			if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if diff := cmp.Diff(tc.want, rsSizes(t, f)); diff != "" {
				t.Errorf("replica set sizes (-want +got):\n%s", diff)
			}
			if tc.wantEvents != nil {
				if diff := cmp.Diff(tc.wantEvents, drain(f.recorder)); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestNewReplicaSetShape(t *testing.T) {
	d := newDeployment(4, "b")
	d.Annotations = map[string]string{"kubernetes.io/change-cause": "deploy b", corev1.LastAppliedConfigAnnotation: "{}"}
	f := newFixture(t, d, rsFor(d, "a", 4, 4, 3, time.Hour))
	ctx := context.Background()
	if err := f.c.Sync(ctx, "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	hash := ComputeHash(&d.Spec.Template, nil)
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(ctx, "web-"+hash, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("new replica set web-%s: %v", hash, err)
	}
	wantAnn := map[string]string{
		RevisionAnnotation: "4", DesiredReplicasAnnotation: "4", MaxReplicasAnnotation: "7",
		"kubernetes.io/change-cause": "deploy b",
	}
	if diff := cmp.Diff(wantAnn, rs.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if rs.Labels[PodTemplateHashLabel] != hash || rs.Spec.Template.Labels[PodTemplateHashLabel] != hash || rs.Spec.Selector.MatchLabels[PodTemplateHashLabel] != hash {
		t.Errorf("pod-template-hash missing: labels %v template %v selector %v", rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector.MatchLabels)
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref = %+v", ref)
	}
	got, _ := f.client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	if got.Annotations[RevisionAnnotation] != "4" {
		t.Errorf("deployment revision = %q, want 4", got.Annotations[RevisionAnnotation])
	}
	// Status is written twice: NewReplicaSetCreated, then ReplicaSetUpdated
	// once the scale-down of the old replica set counts as progress. (The
	// fake clientset keeps status on a plain update too.)
	var reasons []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "deployments" {
			if c := getCondition(a.(k8stesting.UpdateAction).GetObject().(*appsv1.Deployment).Status, appsv1.DeploymentProgressing); c != nil {
				reasons = append(reasons, c.Reason+": "+c.Message)
			}
		}
	}
	want := []string{
		fmt.Sprintf("NewReplicaSetCreated: Created new replica set %q", "web-"+hash),
		fmt.Sprintf("ReplicaSetUpdated: ReplicaSet %q is progressing.", "web-"+hash),
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("Progressing as written (-want +got):\n%s", diff)
	}
}

func TestComputeHash(t *testing.T) {
	d := newDeployment(1, "a")
	one := int32(1)
	h0 := ComputeHash(&d.Spec.Template, nil)
	if h0 != ComputeHash(d.DeepCopy().Spec.Template.DeepCopy(), nil) {
		t.Errorf("hash is not stable")
	}
	if h0 == ComputeHash(&d.Spec.Template, &one) {
		t.Errorf("collisionCount does not change the hash")
	}
	b := newDeployment(1, "b")
	if h0 == ComputeHash(&b.Spec.Template, nil) {
		t.Errorf("different templates hash the same")
	}
	for _, r := range h0 {
		if strings.ContainsRune("aeiou013", r) {
			t.Errorf("hash %q has characters SafeEncodeString never produces", h0)
		}
	}
}

func TestRecreate(t *testing.T) {
	d := newDeployment(3, "b")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	old := rsFor(d, "a", 3, 3, 1, time.Hour)
	yes := true
	oldPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: old.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: old.Name, UID: old.UID, Controller: &yes}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}

	// Step 1: the old replica set goes to 0, nothing new yet.
	f := newFixture(t, d, old, oldPod)
	if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff(map[string]int32{"a": 0}, rsSizes(t, f)); diff != "" {
		t.Errorf("step 1 sizes (-want +got):\n%s", diff)
	}

	// Step 2: scaled to 0 but its pod still runs: still nothing new.
	old0 := rsFor(d, "a", 0, 0, 1, time.Hour)
	f = newFixture(t, d, old0, oldPod)
	if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff(map[string]int32{"a": 0}, rsSizes(t, f)); diff != "" {
		t.Errorf("step 2 sizes (-want +got):\n%s", diff)
	}

	// Step 3: the old pods are gone: the new replica set gets every replica.
	f = newFixture(t, d, old0)
	if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff(map[string]int32{"a": 0, "b": 3}, rsSizes(t, f)); diff != "" {
		t.Errorf("step 3 sizes (-want +got):\n%s", diff)
	}
}

func TestStatusAndConditions(t *testing.T) {
	complete := newDeployment(3, "a")
	stuck := newDeployment(3, "b")
	stuck.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 3, Conditions: []appsv1.DeploymentCondition{
		newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonReplicaSetUpdated, "x", now.Add(-11*time.Minute)),
	}}
	paused := newDeployment(3, "a")
	paused.Spec.Paused = true
	tests := []struct {
		name        string
		d           *appsv1.Deployment
		rss         []*appsv1.ReplicaSet
		wantStatus  appsv1.DeploymentStatus
		wantReasons map[appsv1.DeploymentConditionType]string
	}{
		{
			name:        "complete",
			d:           complete,
			rss:         []*appsv1.ReplicaSet{rsFor(complete, "a", 3, 3, 1, time.Hour)},
			wantStatus:  appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
			wantReasons: map[appsv1.DeploymentConditionType]string{appsv1.DeploymentAvailable: ReasonMinimumReplicasAvail, appsv1.DeploymentProgressing: ReasonNewRSAvailable},
		},
		{
			name:        "past its progress deadline",
			d:           stuck,
			rss:         []*appsv1.ReplicaSet{rsFor(stuck, "a", 1, 1, 1, time.Hour), rsFor(stuck, "b", 3, 0, 2, time.Hour)},
			wantStatus:  appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 3},
			wantReasons: map[appsv1.DeploymentConditionType]string{appsv1.DeploymentAvailable: ReasonMinimumReplicasAvail, appsv1.DeploymentProgressing: ReasonTimedOut},
		},
		{
			name:        "below minimum availability",
			d:           complete,
			rss:         []*appsv1.ReplicaSet{rsFor(complete, "a", 3, 0, 1, time.Hour)},
			wantStatus:  appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, UnavailableReplicas: 3},
			wantReasons: map[appsv1.DeploymentConditionType]string{appsv1.DeploymentAvailable: ReasonMinimumReplicasUnavail, appsv1.DeploymentProgressing: ReasonReplicaSetUpdated},
		},
		{
			name:        "paused",
			d:           paused,
			rss:         []*appsv1.ReplicaSet{rsFor(paused, "a", 3, 3, 1, time.Hour)},
			wantStatus:  appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3},
			wantReasons: map[appsv1.DeploymentConditionType]string{appsv1.DeploymentAvailable: ReasonMinimumReplicasAvail, appsv1.DeploymentProgressing: ReasonPaused},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.d}
			for _, rs := range tc.rss {
				objs = append(objs, rs)
			}
			f := newFixture(t, objs...)
			if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			got, _ := f.client.AppsV1().Deployments("ns").Get(context.Background(), "web", metav1.GetOptions{})
			reasons := map[appsv1.DeploymentConditionType]string{}
			for _, c := range got.Status.Conditions {
				reasons[c.Type] = c.Reason
			}
			status := got.Status
			status.Conditions = nil
			if diff := cmp.Diff(tc.wantStatus, status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReasons, reasons); diff != "" {
				t.Errorf("condition reasons (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevisionHistoryCleanup(t *testing.T) {
	d := newDeployment(2, "d")
	limit := int32(1)
	d.Spec.RevisionHistoryLimit = &limit
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	rss := []runtime.Object{d,
		rsFor(d, "a", 0, 0, 1, 4*time.Hour), rsFor(d, "b", 0, 0, 2, 3*time.Hour), rsFor(d, "c", 0, 0, 3, 2*time.Hour),
		rsFor(d, "d", 2, 2, 4, time.Hour),
	}
	f := newFixture(t, rss...)
	if err := f.c.Sync(context.Background(), "ns/web"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	var deleted []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" {
			deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
		}
	}
	sort.Strings(deleted)
	want := []string{rsFor(d, "a", 0, 0, 0, 0).Name, rsFor(d, "b", 0, 0, 0, 0).Name}
	sort.Strings(want)
	if diff := cmp.Diff(want, deleted); diff != "" {
		t.Errorf("deleted replica sets (-want +got):\n%s", diff)
	}
}

func TestRollbackTemplateReusesReplicaSet(t *testing.T) {
	// kubectl rollout undo copies revision 1's template back: the old
	// replica set becomes the new one, with the next revision number and
	// the old one in revision-history.
	d := newDeployment(2, "a")
	d.Annotations = map[string]string{RevisionAnnotation: "2"}
	f := newFixture(t, d, rsFor(d, "a", 0, 0, 1, 2*time.Hour), rsFor(d, "b", 2, 2, 2, time.Hour))
	ctx := context.Background()
	// The first sync re-labels the replica set; the next (woken by its
	// update) records the revision on the deployment.
	for range 2 {
		if err := f.c.Sync(ctx, "ns/web"); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		f.refresh(t)
	}
	rs, _ := f.client.AppsV1().ReplicaSets("ns").Get(ctx, rsFor(d, "a", 0, 0, 0, 0).Name, metav1.GetOptions{})
	if rs.Annotations[RevisionAnnotation] != "3" || rs.Annotations[RevisionHistoryAnnotation] != "1" {
		t.Errorf("annotations = %v; want revision 3, revision-history 1", rs.Annotations)
	}
	got, _ := f.client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	if got.Annotations[RevisionAnnotation] != "3" {
		t.Errorf("deployment revision = %q, want 3", got.Annotations[RevisionAnnotation])
	}
}

func TestResolveFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	tests := []struct {
		name           string
		surge, unavail *intstr.IntOrString
		desired        int32
		wantS, wantU   int32
	}{
		{"defaults 25%", pct("25%"), pct("25%"), 10, 3, 2},
		{"both zero becomes one unavailable", num(0), num(0), 10, 0, 1},
		{"absolute", num(5), num(1), 3, 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := resolveFenceposts(tc.surge, tc.unavail, tc.desired)
			if err != nil || s != tc.wantS || u != tc.wantU {
				t.Errorf("= %d, %d, %v; want %d, %d", s, u, err, tc.wantS, tc.wantU)
			}
		})
	}
}
