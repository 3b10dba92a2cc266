package revision

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/deployment"
)

var dsKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}},
	}
}

// The DaemonSet's template hash is the Deployment's pod-template-hash, as
// upstream computes both with controller.ComputeHash.
func TestTemplateHashIsDeploymentsHash(t *testing.T) {
	for _, cc := range []*int32{nil, ptr.To[int32](0), ptr.To[int32](3)} {
		tpl := template("busybox")
		if got, want := TemplateHash(&tpl, cc), deployment.ComputeHash(&tpl, cc); got != want {
			t.Errorf("collisionCount %v: TemplateHash %q, deployment.ComputeHash %q", cc, got, want)
		}
	}
}

func TestTemplatePatch(t *testing.T) {
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: template("busybox")}}
	got, err := TemplatePatch(ds)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"image":"busybox","name":"c","resources":{}}]}}}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	// The hash depends on the data and the collision count only.
	if Hash(got, nil) == Hash(got, ptr.To[int32](1)) || Hash(got, nil) != Hash(append([]byte(nil), got...), nil) {
		t.Error("Hash does not depend on exactly the data and the collision count")
	}
}

func TestSort(t *testing.T) {
	mk := func(name string, n int64, sec int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)}, Revision: n}
	}
	revs := []*appsv1.ControllerRevision{mk("c", 2, 0), mk("b", 1, 5), mk("a", 1, 5), mk("d", 1, 1)}
	Sort(revs)
	var got []string
	for _, r := range revs {
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"d", "a", "b", "c"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if Max(revs) != 2 {
		t.Errorf("Max = %d", Max(revs))
	}
}

func newHistory(t *testing.T, objs ...runtime.Object) (History, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	inf := informers.NewSharedInformerFactory(client, 0).Apps().V1().ControllerRevisions()
	for _, o := range objs {
		if err := inf.Informer().GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return History{Client: client, Lister: inf.Lister()}, client
}

func TestClaim(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ns", UID: "ds-uid"}}
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "x", UID: "x-uid", Controller: ptr.To(true)}
	mine := *metav1.NewControllerRef(ds, dsKind)
	rev := func(name string, lbls map[string]string, refs ...metav1.OwnerReference) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Labels: lbls, OwnerReferences: refs}}
	}
	match := map[string]string{"app": "a"}
	h, client := newHistory(t,
		rev("owned", match, mine),
		rev("orphan", match),
		rev("orphan-other-labels", map[string]string{"app": "b"}),
		rev("owned-no-longer-matching", map[string]string{"app": "b"}, mine),
		rev("others", match, other),
	)
	adoptChecks := 0
	got, err := h.Claim(context.Background(), Owner{Object: ds, GVK: dsKind, Selector: labels.SelectorFromSet(match), CanAdopt: func(context.Context) error {
		adoptChecks++
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"orphan", "owned"}, sortedCopy(names)); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	var patched []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patched = append(patched, a.(interface{ GetName() string }).GetName())
		}
	}
	if diff := cmp.Diff([]string{"orphan", "owned-no-longer-matching"}, sortedCopy(patched)); diff != "" {
		t.Errorf("patched (adopted, released) (-want +got):\n%s", diff)
	}
	if adoptChecks != 1 {
		t.Errorf("CanAdopt asked %d times, want once", adoptChecks)
	}

	// A refused adoption adopts nothing.
	h, _ = newHistory(t, rev("orphan", match))
	got, err = h.Claim(context.Background(), Owner{Object: ds, GVK: dsKind, Selector: labels.SelectorFromSet(match), CanAdopt: func(context.Context) error { return fmt.Errorf("being deleted") }})
	if err != nil || len(got) != 0 {
		t.Errorf("claim with refused adoption = %v, %v", got, err)
	}
}

func TestCreateResolvesCollisions(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "web-uid"}}
	owner := Owner{Object: set, GVK: appsv1.SchemeGroupVersion.WithKind("StatefulSet")}
	data := []byte(`{"spec":{"template":{"$patch":"replace"}}}`)
	var cc int32
	r := New(owner, map[string]string{"app": "web"}, nil, data, 1, &cc)
	// Someone else's data already sits at the name this revision hashes to.
	squatter := r.DeepCopy()
	squatter.Data.Raw = []byte(`{"other":true}`)
	h, _ := newHistory(t, squatter)
	created, err := h.Create(context.Background(), owner, r, &cc)
	if err != nil {
		t.Fatal(err)
	}
	if cc != 1 || created.Name != Name("web", Hash(data, ptr.To[int32](1))) || created.Labels[HashLabel] != Hash(data, ptr.To[int32](1)) {
		t.Errorf("created %s (labels %v) with collisionCount %d", created.Name, created.Labels, cc)
	}
	// The same data again returns the existing revision.
	again, err := h.Create(context.Background(), owner, r, &cc)
	if err != nil || again.Name != created.Name || cc != 1 {
		t.Errorf("second create = %v, %v, collisionCount %d", again.Name, err, cc)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
