package pvprotection

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func TestSync(t *testing.T) {
	now := metav1.Now()
	volume := func(deleting bool, phase corev1.PersistentVolumePhase, finalizers ...string) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: finalizers}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
		if deleting {
			pv.DeletionTimestamp = &now
		}
		return pv
	}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []string
	}{
		{"released: the finalizer goes", volume(true, corev1.VolumeReleased, Finalizer), nil},
		{"bound: it stays", volume(true, corev1.VolumeBound, Finalizer), []string{Finalizer}},
		{"a volume without the finalizer gets it", volume(false, corev1.VolumeAvailable), []string{Finalizer}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.pv)
			inf := informers.NewSharedInformerFactory(client, 0)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf})
			if err != nil {
				t.Fatal(err)
			}
			_ = inf.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(tc.pv)
			if err := ctrl.(*Controller).Sync(context.Background(), "pv"); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumes().Get(context.Background(), "pv", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		})
	}
}
