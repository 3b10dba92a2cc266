package ephemeral

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func podWithEphemeral() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "scratch"}},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						StorageClassName: ptr.To("local-path"),
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				},
			}}},
		}},
	}
}

func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, *record.FakeRecorder) {
	client := fake.NewClientset(objs...)
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pvcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Pod:
			_ = pods.Add(o)
		case *corev1.PersistentVolumeClaim:
			_ = pvcs.Add(o)
		}
	}
	rec := record.NewFakeRecorder(10)
	return &Controller{client: client, recorder: rec, pods: corelisters.NewPodLister(pods), claims: corelisters.NewPersistentVolumeClaimLister(pvcs)}, client, rec
}

func TestCreatesClaimOwnedByPod(t *testing.T) {
	c, client, _ := newController(t, podWithEphemeral())
	if err := c.sync(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	claims, err := client.CoreV1().PersistentVolumeClaims("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		claims.Items[i].TypeMeta = metav1.TypeMeta{}
		claims.Items[i].ManagedFields = nil
	}
	want := []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-scratch", Namespace: "ns", Labels: map[string]string{"type": "scratch"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: podWithEphemeral().Spec.Volumes[1].Ephemeral.VolumeClaimTemplate.Spec,
	}}
	if diff := cmp.Diff(want, claims.Items); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

func TestForeignClaimIsAnError(t *testing.T) {
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-scratch", Namespace: "ns"}}
	c, _, rec := newController(t, podWithEphemeral(), foreign)
	if err := c.sync(context.Background(), "ns/web"); err == nil {
		t.Fatal("sync succeeded with a claim the pod does not own")
	}
	got := <-rec.Events
	want := "Warning FailedBinding ephemeral volume scratch: PVC ns/web-scratch was not created for pod ns/web (pod is not owner)"
	if got != want {
		t.Errorf("event %q, want %q", got, want)
	}
}

func TestExistingOwnedClaimIsKept(t *testing.T) {
	pod := podWithEphemeral()
	owned := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-scratch", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid", Controller: ptr.To(true)}}}}
	c, client, _ := newController(t, pod, owned)
	if err := c.sync(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
