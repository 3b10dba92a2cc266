package statefulset

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"errors"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/revision"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

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
		t.Fatalf("build controller: %v", err)
	}
	f.c = ctrl.(*Controller)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			err = f.informer.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		case *corev1.Pod:
			err = f.informer.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.PersistentVolumeClaim:
			err = f.informer.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *appsv1.ControllerRevision:
			err = f.informer.Apps().V1().ControllerRevisions().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.client.ClearActions()
	return f
}

// actions renders pod and claim writes in order as "verb resource name".
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		res := a.GetResource().Resource
		if res != "pods" && res != "persistentvolumeclaims" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			out = append(out, "create "+res+" "+a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
		case "update":
			out = append(out, "update "+res+" "+a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName())
		case "delete":
			out = append(out, "delete "+res+" "+a.(k8stesting.DeleteAction).GetName())
		}
	}
	return out
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	if err := f.c.Sync(context.Background(), "default/web"); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func (f *fixture) set(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	s, err := f.client.AppsV1().StatefulSets("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newSet(replicas int32, mods ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid", Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: "nginx",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:v1"}}},
			},
			PodManagementPolicy:  appsv1.OrderedReadyPodManagement,
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func withClaims(s *appsv1.StatefulSet) {
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
}

// revisionOf is the ControllerRevision the controller makes of s's template.
func revisionOf(t *testing.T, s *appsv1.StatefulSet, number int64) *appsv1.ControllerRevision {
	t.Helper()
	data, err := revision.TemplatePatch(s)
	if err != nil {
		t.Fatal(err)
	}
	var zero int32
	r := revision.New(revision.Owner{Object: s, GVK: controllerKind}, s.Spec.Template.Labels, s.Annotations, data, number, &zero)
	r.UID = types.UID(r.Name)
	return r
}

// readyPod is the set's pod at ordinal and revision rev, running and
// ready for an hour.
func readyPod(t *testing.T, s *appsv1.StatefulSet, ordinal int, rev string) *corev1.Pod {
	t.Helper()
	p := newPod(s, ordinal)
	p.Namespace = "default"
	p.UID = types.UID(p.Name + "-uid")
	setRevision(p, rev)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
		Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
	}}}
	return p
}

func TestOrderedCreation(t *testing.T) {
	s := newSet(3, withClaims)
	rev := revisionOf(t, s, 1)
	cases := []struct {
		name  string
		ready []int
		want  []string
	}{
		{name: "nothing yet: only the first pod, its claim first", want: []string{"create persistentvolumeclaims data-web-0", "create pods web-0"}},
		{name: "web-0 ready: web-1 next", ready: []int{0}, want: []string{"create persistentvolumeclaims data-web-1", "create pods web-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{s, rev}
			for _, o := range tc.ready {
				objs = append(objs, readyPod(t, s, o, rev.Name))
				objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName(s, &s.Spec.VolumeClaimTemplates[0], o), Namespace: "default", Labels: map[string]string{"app": "web"}}})
			}
			f := newFixture(t, objs...)
			f.sync(t)
			if diff := cmp.Diff(tc.want, f.actions()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodIdentity(t *testing.T) {
	s := newSet(1, withClaims, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} })
	f := newFixture(t, s, revisionOf(t, s, 1))
	f.sync(t)
	pod, err := f.client.CoreV1().Pods("default").Get(context.Background(), "web-5", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get web-5: %v (actions %v)", err, f.actions())
	}
	rev := revisionOf(t, s, 1).Name
	wantLabels := map[string]string{"app": "web", "statefulset.kubernetes.io/pod-name": "web-5", "apps.kubernetes.io/pod-index": "5", "controller-revision-hash": rev}
	if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if pod.Spec.Hostname != "web-5" || pod.Spec.Subdomain != "nginx" {
		t.Errorf("hostname %q subdomain %q", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	wantVolumes := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-5"}}}}
	if diff := cmp.Diff(wantVolumes, pod.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != "web-uid" {
		t.Errorf("owner = %v", pod.OwnerReferences)
	}
	claim, err := f.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data-web-5", metav1.GetOptions{})
	if err != nil || claim.Labels["app"] != "web" || len(claim.OwnerReferences) != 0 {
		t.Errorf("claim %v, err %v: want labelled app=web, no owners (Retain)", claim, err)
	}
	var events []string
	for len(f.recorder.Events) > 0 {
		events = append(events, <-f.recorder.Events)
	}
	want := []string{
		"Normal SuccessfulCreate Create Claim data-web-5 Pod web-5 in StatefulSet web success",
		"Normal SuccessfulCreate Create Pod web-5 in StatefulSet web successful",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	got := f.set(t).Status
	wantStatus := appsv1.StatefulSetStatus{ObservedGeneration: 1, CurrentRevision: rev, UpdateRevision: rev, CollisionCount: ptr.To[int32](0)}
	if diff := cmp.Diff(wantStatus, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestParallelCreatesAll(t *testing.T) {
	s := newSet(3, func(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement })
	f := newFixture(t, s, revisionOf(t, s, 1))
	f.sync(t)
	got := f.actions()
	sort.Strings(got)
	if diff := cmp.Diff([]string{"create pods web-0", "create pods web-1", "create pods web-2"}, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestScaleDownInReverse(t *testing.T) {
	s := newSet(3)
	rev := revisionOf(t, s, 1)
	pods := []runtime.Object{readyPod(t, s, 0, rev.Name), readyPod(t, s, 1, rev.Name), readyPod(t, s, 2, rev.Name)}
	s.Spec.Replicas = ptr.To[int32](1)
	f := newFixture(t, append(pods, s, rev)...)
	f.sync(t)
	if diff := cmp.Diff([]string{"delete pods web-2"}, f.actions()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	st := f.set(t).Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.CurrentReplicas != 3 {
		t.Errorf("status = %+v", st)
	}
}

func TestRollingUpdate(t *testing.T) {
	cases := []struct {
		name      string
		partition int32
		maxUnav   int
		policy    appsv1.PodManagementPolicyType
		onDelete  bool
		want      []string
	}{
		{name: "highest ordinal first", want: []string{"delete pods web-2"}},
		{name: "maxUnavailable 2", maxUnav: 2, want: []string{"delete pods web-2", "delete pods web-1"}},
		{name: "partition 2 keeps web-0 and web-1", partition: 2, maxUnav: 3, want: []string{"delete pods web-2"}},
		{name: "partition 3 updates nothing", partition: 3},
		{name: "OnDelete updates nothing", onDelete: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := newSet(3)
			oldRev := revisionOf(t, old, 1)
			s := newSet(3, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Image = "nginx:v2"
				s.Spec.UpdateStrategy.RollingUpdate.Partition = &tc.partition
				if tc.maxUnav > 0 {
					v := intstrFrom(tc.maxUnav)
					s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v
				}
				if tc.onDelete {
					s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
				}
				s.Status.CurrentRevision = oldRev.Name
				s.Status.CurrentReplicas = 3
			})
			f := newFixture(t, s, oldRev, readyPod(t, old, 0, oldRev.Name), readyPod(t, old, 1, oldRev.Name), readyPod(t, old, 2, oldRev.Name))
			f.sync(t)
			if diff := cmp.Diff(tc.want, f.actions()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			st := f.set(t).Status
			if st.CurrentRevision != oldRev.Name || st.UpdateRevision == oldRev.Name || !strings.HasPrefix(st.UpdateRevision, "web-") {
				t.Errorf("revisions current %q update %q", st.CurrentRevision, st.UpdateRevision)
			}
		})
	}
}

func TestRetentionPolicyOwners(t *testing.T) {
	cases := []struct {
		name     string
		policy   appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy
		replicas int32
		wantSet  bool
		wantPod  bool
	}{
		{name: "whenDeleted Delete: the set owns the claim", policy: appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: del, WhenScaled: retain}, replicas: 2, wantSet: true},
		{name: "whenScaled Delete, pod kept: nobody", policy: appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: del}, replicas: 2},
		{name: "whenScaled Delete, pod condemned: the pod owns it", policy: appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: del}, replicas: 1, wantPod: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSet(2, withClaims)
			rev := revisionOf(t, s, 1)
			p0, p1 := readyPod(t, s, 0, rev.Name), readyPod(t, s, 1, rev.Name)
			s.Spec.Replicas = &tc.replicas
			s.Spec.PersistentVolumeClaimRetentionPolicy = &tc.policy
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-1", Namespace: "default"}}
			claim0 := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default"}}
			f := newFixture(t, s, rev, p0, p1, claim, claim0)
			f.sync(t)
			got, err := f.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data-web-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var gotSet, gotPod bool
			for _, r := range got.OwnerReferences {
				gotSet = gotSet || (r.UID == "web-uid" && r.Controller != nil && *r.Controller)
				gotPod = gotPod || (r.UID == "web-1-uid" && r.Controller != nil && *r.Controller)
			}
			if gotSet != tc.wantSet || gotPod != tc.wantPod {
				t.Errorf("owners %v: want set %v pod %v", got.OwnerReferences, tc.wantSet, tc.wantPod)
			}
		})
	}
}

func TestClaimThatCannotBeCreated(t *testing.T) {
	s := newSet(1, withClaims)
	f := newFixture(t, s, revisionOf(t, s, 1))
	f.client.PrependReactor("create", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errorsForbidden()
	})
	if err := f.c.Sync(context.Background(), "default/web"); err == nil {
		t.Fatal("sync succeeded; want the claim's error (a rate-limited retry)")
	}
	var events []string
	for len(f.recorder.Events) > 0 {
		events = append(events, <-f.recorder.Events)
	}
	if len(events) != 2 || !strings.HasPrefix(events[0], "Warning FailedCreate Create Claim data-web-0 for Pod web-0 in StatefulSet web failed error:") ||
		!strings.HasPrefix(events[1], "Warning FailedCreate Create Pod web-0 in StatefulSet web failed error:") {
		t.Errorf("events = %q", events)
	}
}

func intstrFrom(n int) intstr.IntOrString { return intstr.FromInt32(int32(n)) }

func errorsForbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-web-0", errors.New("exceeded quota"))
}

func TestFailedPodIsReplaced(t *testing.T) {
	s := newSet(1)
	rev := revisionOf(t, s, 1)
	failed := readyPod(t, s, 0, rev.Name)
	failed.Status.Phase = corev1.PodFailed
	f := newFixture(t, s, rev, failed)
	f.sync(t)
	if diff := cmp.Diff([]string{"delete pods web-0"}, f.actions()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func TestOrderedScaleDownWaitsForHealth(t *testing.T) {
	s := newSet(3)
	rev := revisionOf(t, s, 1)
	notReady := readyPod(t, s, 0, rev.Name)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	pods := []runtime.Object{notReady, readyPod(t, s, 1, rev.Name), readyPod(t, s, 2, rev.Name)}
	cases := []struct {
		name   string
		policy appsv1.PodManagementPolicyType
		want   []string
	}{
		{name: "OrderedReady waits for web-0", policy: appsv1.OrderedReadyPodManagement},
		{name: "Parallel deletes both condemned pods", policy: appsv1.ParallelPodManagement, want: []string{"delete pods web-1", "delete pods web-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := s.DeepCopy()
			set.Spec.Replicas = ptr.To[int32](1)
			set.Spec.PodManagementPolicy = tc.policy
			f := newFixture(t, append([]runtime.Object{set, rev}, pods...)...)
			f.sync(t)
			got := f.actions()
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	a := newSet(1)
	revA := revisionOf(t, a, 1)
	b := newSet(1, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:v2" })
	revB := revisionOf(t, b, 2)

	t.Run("undo renumbers the old revision", func(t *testing.T) {
		set := a.DeepCopy() // the template is a's again
		set.Status.CurrentRevision = revB.Name
		f := newFixture(t, set, revA, revB, readyPod(t, b, 0, revB.Name))
		f.sync(t)
		got, err := f.client.AppsV1().ControllerRevisions("default").Get(context.Background(), revA.Name, metav1.GetOptions{})
		if err != nil || got.Revision != 3 {
			t.Errorf("revision of a = %v, %v; want 3", got.Revision, err)
		}
		st := f.set(t).Status
		if st.UpdateRevision != revA.Name || st.CurrentRevision != revB.Name {
			t.Errorf("update %q current %q", st.UpdateRevision, st.CurrentRevision)
		}
		if diff := cmp.Diff([]string{"delete pods web-0"}, f.actions()); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
	})

	t.Run("revisionHistoryLimit trims unused revisions, oldest first", func(t *testing.T) {
		c := newSet(1, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:v3" })
		revC := revisionOf(t, c, 3)
		d := newSet(1, func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = "nginx:v4"
			s.Spec.RevisionHistoryLimit = ptr.To[int32](1)
			s.Status.CurrentRevision = "" // current = update
		})
		revD := revisionOf(t, d, 4)
		f := newFixture(t, d, revA, revB, revC, revD, readyPod(t, d, 0, revD.Name))
		f.sync(t)
		var deleted []string
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "controllerrevisions" {
				deleted = append(deleted, a.(k8stesting.DeleteAction).GetName())
			}
		}
		if diff := cmp.Diff([]string{revA.Name, revB.Name}, deleted); diff != "" {
			t.Errorf("deleted revisions (-want +got):\n%s", diff)
		}
	})
}

func TestMinReadySeconds(t *testing.T) {
	s := newSet(2, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 30 })
	rev := revisionOf(t, s, 1)
	p := readyPod(t, s, 0, rev.Name)
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-10 * time.Second))
	f := newFixture(t, s, rev, p)
	f.sync(t)
	if got := f.actions(); len(got) != 0 {
		t.Errorf("actions = %v; web-1 must wait until web-0 is available", got)
	}
	st := f.set(t).Status
	if st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Errorf("ready %d available %d; want 1 and 0", st.ReadyReplicas, st.AvailableReplicas)
	}
	// The set is looked at again once web-0 may be available.
	if f.c.queue.Len() != 0 {
		t.Fatalf("queued at once")
	}
	f.clock.Step(30 * time.Second)
	eventuallyQueued := false
	for i := 0; i < 100 && !eventuallyQueued; i++ {
		eventuallyQueued = f.c.queue.Len() == 1
		time.Sleep(10 * time.Millisecond)
	}
	if !eventuallyQueued {
		t.Error("not requeued after minReadySeconds")
	}
}
