package persistentvolume

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func volume(mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func TestCreateAndStatus(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	s := Strategy{Now: func() time.Time { return t0 }}
	pv := volume()
	pv.Status.Phase = corev1.VolumeBound
	s.PrepareForCreate(ctx, pv)
	want := corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &metav1.Time{Time: t0}}
	if diff := cmp.Diff(want, pv.Status); diff != "" {
		t.Errorf("create status (-want +got):\n%s", diff)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("defaults: %+v", pv.Spec)
	}

	s.Now = func() time.Time { return t1 }
	tests := []struct {
		name     string
		phase    corev1.PersistentVolumePhase
		clientTS *metav1.Time
		want     time.Time
	}{
		{name: "phase change stamps now", phase: corev1.VolumeAvailable, want: t1},
		{name: "same phase keeps time", phase: corev1.VolumePending, clientTS: &metav1.Time{Time: t0}, want: t0},
		{name: "client-set time wins", phase: corev1.VolumeBound, clientTS: &metav1.Time{Time: t0.Add(time.Hour)}, want: t0.Add(time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upd := pv.DeepCopy()
			upd.Spec.Capacity = nil
			upd.Status.Phase = tc.phase
			upd.Status.LastPhaseTransitionTime = tc.clientTS
			if tc.clientTS == nil {
				upd.Status.LastPhaseTransitionTime = pv.Status.LastPhaseTransitionTime.DeepCopy()
			}
			s.PrepareForStatusUpdate(ctx, upd, pv)
			if upd.Spec.Capacity == nil {
				t.Errorf("status update changed the spec")
			}
			if got := upd.Status.LastPhaseTransitionTime.Time; !got.Equal(tc.want) {
				t.Errorf("lastPhaseTransitionTime %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolume)
		want   []string
	}{
		{name: "valid"},
		{name: "no source", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.HostPath = nil }, want: []string{"spec: Required value"}},
		{name: "two sources", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "/"} },
			want: []string{"spec.nfs: Forbidden"}},
		{name: "local without affinity", mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.HostPath = nil
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt"}
		}, want: []string{"spec.nodeAffinity: Required value"}},
		{name: "no capacity", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil }, want: []string{"spec.capacity: Required value"}},
		{name: "cpu capacity", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceCPU] = resource.MustParse("1") },
			want: []string{"spec.capacity[cpu]: Unsupported value"}},
		{name: "no access modes", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }, want: []string{"spec.accessModes: Required value"}},
		{name: "bad reclaim", mutate: func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			want: []string{"spec.persistentVolumeReclaimPolicy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := volume()
			Default(pv)
			if tc.mutate != nil {
				tc.mutate(pv)
			}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, pv))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	old := volume()
	Default(old)
	moved := old.DeepCopy()
	moved.Spec.HostPath.Path = "/elsewhere"
	moved.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if diff := cmp.Diff([]string{"spec.persistentvolumesource: Forbidden"}, errStrings(Strategy{}.ValidateUpdate(ctx, moved, old))); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
}

func TestTableAndFields(t *testing.T) {
	pv := volume(func(pv *corev1.PersistentVolume) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
		pv.Spec.StorageClassName = "local"
		pv.Status.Phase = corev1.VolumeBound
	})
	Default(pv)
	row, err := Strategy{}.TableRow(pv)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"pv-1", "5Gi", "RWO,ROX", "Retain", "Bound", "default/data", "local", "<unset>", "", "<unknown>", "Filesystem"}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := (Strategy{}).FieldSet(pv); got["status.phase"] != "Bound" {
		t.Errorf("field set %v", got)
	}
}
