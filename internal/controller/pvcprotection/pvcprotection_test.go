package pvcprotection

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func TestSync(t *testing.T) {
	now := metav1.Now()
	claim := func(deleting bool, finalizers ...string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", Finalizers: finalizers}}
		if deleting {
			c.DeletionTimestamp = &now
		}
		return c
	}
	pod := func(name, node string, grace *int64) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node,
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
		if grace != nil {
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, grace
		}
		return p
	}
	tests := []struct {
		name   string
		claim  *corev1.PersistentVolumeClaim
		cached []*corev1.Pod // in the informer
		live   []*corev1.Pod // only in the API server
		want   []string      // the claim's finalizers after the sync
	}{
		{"unused: the finalizer goes", claim(true, Finalizer, "other"), nil, nil, []string{"other"}},
		{"a scheduled pod uses it", claim(true, Finalizer), []*corev1.Pod{pod("p", "n1", nil)}, nil, []string{Finalizer}},
		{"an unscheduled pod does not", claim(true, Finalizer), []*corev1.Pod{pod("p", "", nil)}, nil, nil},
		{"the informer lags: the live list sees the pod", claim(true, Finalizer), nil, []*corev1.Pod{pod("p", "n1", nil)}, []string{Finalizer}},
		{"a claim without the finalizer gets it", claim(false), nil, nil, []string{Finalizer}},
		{"a force-deleted pod still names it", claim(true, Finalizer), []*corev1.Pod{pod("p", "n1", ptr.To[int64](0))}, nil, []string{Finalizer}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.claim}
			for _, p := range append(append([]*corev1.Pod{}, tc.cached...), tc.live...) {
				objs = append(objs, p)
			}
			client := fake.NewClientset(objs...)
			inf := informers.NewSharedInformerFactory(client, 0)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf})
			if err != nil {
				t.Fatal(err)
			}
			_ = inf.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(tc.claim)
			for _, p := range tc.cached {
				_ = inf.Core().V1().Pods().Informer().GetIndexer().Add(p)
			}
			if err := ctrl.(*Controller).Sync(context.Background(), "ns/data"); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "data", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		})
	}
}
