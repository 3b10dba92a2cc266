package persistentvolumeclaim

import (
	"context"
	"testing"

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

func claim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestCreateDefaults(t *testing.T) {
	c := claim()
	c.Status.Phase = corev1.ClaimBound
	Strategy{}.PrepareForCreate(ctx, c)
	if *c.Spec.VolumeMode != corev1.PersistentVolumeFilesystem || c.Status.Phase != corev1.ClaimPending {
		t.Errorf("volumeMode %v phase %s", *c.Spec.VolumeMode, c.Status.Phase)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   []string
	}{
		{name: "valid"},
		{name: "no access modes", mutate: func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = nil },
			want: []string{"spec.accessModes: Required value"}},
		{name: "RWOP with others", mutate: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadOnlyMany}
		}, want: []string{"spec.accessModes: Forbidden"}},
		{name: "unknown mode", mutate: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"WriteSometimes"}
		}, want: []string{"spec.accessModes: Unsupported value"}},
		{name: "no storage", mutate: func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil },
			want: []string{"spec.resources[storage]: Required value"}},
		{name: "zero storage", mutate: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0")
		}, want: []string{"spec.resources[storage]: Invalid value"}},
		{name: "bad class", mutate: func(c *corev1.PersistentVolumeClaim) { s := "Fast_SSD"; c.Spec.StorageClassName = &s },
			want: []string{"spec.storageClassName: Invalid value"}},
		{name: "bad volume mode", mutate: func(c *corev1.PersistentVolumeClaim) { m := corev1.PersistentVolumeMode("Raw"); c.Spec.VolumeMode = &m },
			want: []string{"spec.volumeMode: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claim()
			if tc.mutate != nil {
				tc.mutate(c)
			}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, c))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	bound := func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = "pv-1"
		c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}
	}
	size := func(s string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(s)
		}
	}
	tests := []struct {
		name   string
		old    *corev1.PersistentVolumeClaim
		mutate func(*corev1.PersistentVolumeClaim)
		want   []string
	}{
		{name: "bind once", old: claim(), mutate: func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" }},
		{name: "rebind", old: claim(bound), mutate: func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-2" }, want: []string{"spec: Forbidden"}},
		{name: "expand bound", old: claim(bound), mutate: size("5Gi")},
		{name: "expand unbound", old: claim(), mutate: size("5Gi"), want: []string{"spec: Forbidden"}},
		{name: "shrink below capacity", old: claim(bound, size("3Gi")), mutate: size("1Gi"), want: []string{"spec.resources.requests.storage: Forbidden"}},
		{name: "shrink to capacity", old: claim(bound, size("3Gi")), mutate: size("2Gi")},
		{name: "access modes", old: claim(bound), mutate: func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}, want: []string{"spec: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Default(tc.old)
			c := tc.old.DeepCopy()
			tc.mutate(c)
			Strategy{}.PrepareForUpdate(ctx, c, tc.old)
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.ValidateUpdate(ctx, c, tc.old))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusAndTable(t *testing.T) {
	old := claim()
	Strategy{}.PrepareForCreate(ctx, old)
	st := old.DeepCopy()
	st.Spec.VolumeName = "pv-1"
	st.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce},
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	Strategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.VolumeName != "" {
		t.Errorf("status update changed the spec")
	}
	if errs := (Strategy{}).ValidateStatusUpdate(ctx, st, old); len(errs) != 1 || errs[0].Field != "status.accessModes" {
		t.Errorf("status errors %v", errs)
	}
	class := "fast"
	tests := []struct {
		name string
		c    *corev1.PersistentVolumeClaim
		want []interface{}
	}{
		{name: "pending", c: old, want: []interface{}{"data", "Pending", "", "", "", "", "<unset>", "<unknown>", "Filesystem"}},
		{name: "bound", c: claim(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "pv-1"
			c.Spec.StorageClassName = &class
			c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}
		}), want: []interface{}{"data", "Bound", "pv-1", "10Gi", "RWO,RWX", "fast", "<unset>", "<unknown>", "<unset>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			row, err := Strategy{}.TableRow(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
