package podowner

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func pod(ns, name string, owner types.UID, controller bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "x", UID: owner, Controller: ptr.To(controller)}}
	}
	return p
}

func names(t *testing.T, objs []any, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.(*corev1.Pod).Name)
	}
	sort.Strings(out)
	return out
}

func TestIndex(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
	// Two controllers on one shared informer: the second call is a no-op.
	for i := 0; i < 2; i++ {
		if err := AddIndex(inf); err != nil {
			t.Fatalf("AddIndex call %d: %v", i+1, err)
		}
	}
	idx := inf.GetIndexer()
	for _, p := range []*corev1.Pod{
		pod("a", "owned-1", "u1", true),
		pod("a", "owned-2", "u1", true),
		pod("b", "other-ns", "u1", true),
		pod("a", "other-owner", "u2", true),
		pod("a", "orphan", "", false),
		pod("a", "not-controller", "u1", false),
		pod("b", "orphan-b", "", false),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	owned, err := Owned(idx, "a", "u1")
	if diff := cmp.Diff([]string{"owned-1", "owned-2"}, names(t, owned, err)); diff != "" {
		t.Errorf("Owned(a, u1) (-want +got):\n%s", diff)
	}
	orphans, err := Orphans(idx, "a")
	if diff := cmp.Diff([]string{"not-controller", "orphan"}, names(t, orphans, err)); diff != "" {
		t.Errorf("Orphans(a) (-want +got):\n%s", diff)
	}
}
