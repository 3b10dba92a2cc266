package expand

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func claim(request, capacity string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName: "pv1",
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
	if capacity != "" {
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
	}
	return c
}

func TestSync(t *testing.T) {
	bound := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "claim-uid"}}}
	other := bound.DeepCopy()
	other.Spec.ClaimRef.UID = "someone-else"
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volume  *corev1.PersistentVolume
		syncs   int
		want    []string
		wantErr bool
	}{
		{name: "larger request: told once however often synced", claim: claim("2Gi", "1Gi", corev1.ClaimBound), volume: bound, syncs: 3,
			want: []string{"Normal ExternalExpanding waiting for an external controller to expand this PVC"}},
		{name: "same size: nothing", claim: claim("1Gi", "1Gi", corev1.ClaimBound), volume: bound, syncs: 1},
		{name: "pending claim: nothing", claim: claim("2Gi", "", corev1.ClaimPending), volume: bound, syncs: 1},
		{name: "volume bound elsewhere: an error, no event", claim: claim("2Gi", "1Gi", corev1.ClaimBound), volume: other, syncs: 1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			inf := informers.NewSharedInformerFactory(client, 0)
			rec := record.NewFakeRecorder(10)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			_ = inf.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(tc.claim)
			_ = inf.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(tc.volume)
			for range tc.syncs {
				err := ctrl.(*Controller).Sync(context.Background(), "ns/data")
				if (err != nil) != tc.wantErr {
					t.Fatalf("Sync: %v, want error %v", err, tc.wantErr)
				}
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}
