package namespace

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

var (
	configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgets    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

func meta(gvr schema.GroupVersionResource, kind, ns, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
	}
}

type fixture struct {
	cs   *fake.Clientset
	md   *metadatafake.FakeMetadataClient
	ctrl *Controller
}

// newFixture seeds the typed client with ns and the metadata client with
// objs; "stuck" objects survive deletion (as if held by a finalizer).
func newFixture(t *testing.T, ns *corev1.Namespace, objs map[schema.GroupVersionResource][]*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	cs := fake.NewClientset(ns)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "watch"}},
			{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: []string{"delete", "list"}},
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"create", "delete", "deletecollection", "get", "list", "watch"}},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch"}},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: []string{"delete", "get", "list"}},
		}},
	}
	cs.PrependReactor("create", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "finalize" {
			return false, nil, nil
		}
		obj := a.(clienttesting.CreateAction).GetObject().(*corev1.Namespace)
		return true, obj, cs.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, obj, "")
	})
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	md := metadatafake.NewSimpleMetadataClient(scheme)
	for gvr, list := range objs {
		for _, o := range list {
			if err := md.Tracker().Create(gvr, o, o.Namespace); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleteUnlessStuck := func(gvr schema.GroupVersionResource, ns, name string) error {
		o, err := md.Tracker().Get(gvr, ns, name)
		if err != nil {
			return err
		}
		if len(o.(*metav1.PartialObjectMetadata).Finalizers) > 0 {
			return nil
		}
		return md.Tracker().Delete(gvr, ns, name)
	}
	md.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, deleteUnlessStuck(a.GetResource(), a.GetNamespace(), a.(clienttesting.DeleteAction).GetName())
	})
	md.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		list, err := md.Tracker().List(a.GetResource(), schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, it := range list.(*metav1.List).Items {
			o := it.Object.(*metav1.PartialObjectMetadata)
			if err := deleteUnlessStuck(a.GetResource(), o.Namespace, o.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := New(ctx, controllercontext.Context{Client: cs, Metadata: md, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	cs.ClearActions()
	md.ClearActions()
	return &fixture{cs: cs, md: md, ctrl: c.(*Controller)}
}

func writes(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		if d, ok := a.(clienttesting.DeleteAction); ok {
			s += " " + d.GetName()
		}
		out = append(out, s)
	}
	return out
}

func terminating(name string) *corev1.Namespace {
	now := metav1.Now()
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

func TestSyncDeletesContentAndFinalizes(t *testing.T) {
	f := newFixture(t, terminating("gone"), map[schema.GroupVersionResource][]*metav1.PartialObjectMetadata{
		configmaps: {meta(configmaps, "ConfigMap", "gone", "a"), meta(configmaps, "ConfigMap", "gone", "b"), meta(configmaps, "ConfigMap", "other", "keep")},
		widgets:    {meta(widgets, "Widget", "gone", "w")},
	})
	ctx := context.Background()
	if err := f.ctrl.sync(ctx, "gone"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if diff := cmp.Diff([]string{"delete-collection pods", "delete-collection configmaps", "delete widgets w"}, writes(f.md.Actions())); diff != "" {
		t.Errorf("metadata writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"update namespaces/status", "create namespaces/finalize"}, writes(f.cs.Actions())); diff != "" {
		t.Errorf("namespace writes (-want +got):\n%s", diff)
	}
	ns, err := f.cs.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns.Spec.Finalizers) != 0 {
		t.Errorf("spec.finalizers = %v, want none", ns.Spec.Finalizers)
	}
	if _, err := f.md.Resource(configmaps).Namespace("other").Get(ctx, "keep", metav1.GetOptions{}); err != nil {
		t.Errorf("object in another namespace: %v", err)
	}
}

func TestSyncReportsRemainingContent(t *testing.T) {
	f := newFixture(t, terminating("held"), map[schema.GroupVersionResource][]*metav1.PartialObjectMetadata{
		widgets: {meta(widgets, "Widget", "held", "w1", "example.com/hold"), meta(widgets, "Widget", "held", "w2", "example.com/hold")},
	})
	ctx := context.Background()
	err := f.ctrl.sync(ctx, "held")
	var rem *remainingError
	if !errors.As(err, &rem) {
		t.Fatalf("sync = %v, want remaining content", err)
	}
	ns, _ := f.cs.CoreV1().Namespaces().Get(ctx, "held", metav1.GetOptions{})
	want := []corev1.NamespaceCondition{
		{Type: DiscoveryFailure, Status: corev1.ConditionFalse, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
		{Type: GroupVersionParse, Status: corev1.ConditionFalse, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed"},
		{Type: ContentFailure, Status: corev1.ConditionFalse, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
		{Type: ContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain", Message: "Some resources are remaining: widgets.example.com has 2 resource instances"},
		{Type: FinalizersRemain, Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain", Message: "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"},
	}
	if diff := cmp.Diff(want, ns.Status.Conditions, cmpopts.IgnoreFields(corev1.NamespaceCondition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.FinalizerName{corev1.FinalizerKubernetes}, ns.Spec.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	// A second pass with nothing new writes no status.
	f.cs.ClearActions()
	_ = f.ctrl.sync(ctx, "held")
	if got := writes(f.cs.Actions()); len(got) != 0 {
		t.Errorf("second pass wrote %v", got)
	}
}

func TestSyncIgnoresActiveNamespace(t *testing.T) {
	f := newFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}},
		map[schema.GroupVersionResource][]*metav1.PartialObjectMetadata{configmaps: {meta(configmaps, "ConfigMap", "live", "a")}})
	if err := f.ctrl.sync(context.Background(), "live"); err != nil {
		t.Fatal(err)
	}
	if got := append(writes(f.cs.Actions()), writes(f.md.Actions())...); len(got) != 0 {
		t.Errorf("writes for an active namespace: %v", got)
	}
}

// TestSyncDeletesPodsFirst: while a pod of the namespace is left (here held
// by a finalizer), nothing else is deleted; once it is gone the rest goes.
func TestSyncDeletesPodsFirst(t *testing.T) {
	f := newFixture(t, terminating("ordered"), map[schema.GroupVersionResource][]*metav1.PartialObjectMetadata{
		pods:       {meta(pods, "Pod", "ordered", "p", "example.com/hold")},
		configmaps: {meta(configmaps, "ConfigMap", "ordered", "cm")},
	})
	ctx := context.Background()
	err := f.ctrl.sync(ctx, "ordered")
	var rem *remainingError
	if !errors.As(err, &rem) || rem.what != "pods has 1 resource instances" {
		t.Fatalf("sync = %v, want the pod remaining", err)
	}
	if diff := cmp.Diff([]string{"delete-collection pods"}, writes(f.md.Actions())); diff != "" {
		t.Errorf("metadata writes while a pod is left (-want +got):\n%s", diff)
	}
	if _, err := f.md.Resource(configmaps).Namespace("ordered").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap went before the pod: %v", err)
	}

	if err := f.md.Tracker().Delete(pods, "ordered", "p"); err != nil {
		t.Fatal(err)
	}
	f.md.ClearActions()
	if err := f.ctrl.sync(ctx, "ordered"); err != nil {
		t.Fatalf("sync once the pod is gone: %v", err)
	}
	if diff := cmp.Diff([]string{"delete-collection pods", "delete-collection configmaps"}, writes(f.md.Actions())); diff != "" {
		t.Errorf("metadata writes once the pod is gone (-want +got):\n%s", diff)
	}
}
