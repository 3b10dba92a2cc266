package storagek8s

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestVolumeAttributesClassValidate(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= maxVolumeAttributesParameters; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	tests := []struct {
		name string
		vac  storagev1.VolumeAttributesClass
		want []string // "type path" of each error
	}{
		{"valid", storagev1.VolumeAttributesClass{DriverName: "csi.example.com", Parameters: map[string]string{"iops": "3000"}}, nil},
		{"no driver", storagev1.VolumeAttributesClass{Parameters: map[string]string{"iops": "3000"}}, []string{"FieldValueRequired driverName"}},
		{"driver not a qualified name", storagev1.VolumeAttributesClass{DriverName: "csi example", Parameters: map[string]string{"iops": "3000"}}, []string{"FieldValueInvalid driverName"}},
		{"no parameters", storagev1.VolumeAttributesClass{DriverName: "csi.example.com"}, []string{"FieldValueRequired parameters"}},
		{"empty key", storagev1.VolumeAttributesClass{DriverName: "csi.example.com", Parameters: map[string]string{"": "x"}}, []string{"FieldValueInvalid parameters"}},
		{"too many parameters", storagev1.VolumeAttributesClass{DriverName: "csi.example.com", Parameters: many}, []string{"FieldValueTooLong parameters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(VolumeAttributesClassStrategy{}.Validate(context.Background(), &tc.vac))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumeAttributesClassValidateUpdate(t *testing.T) {
	old := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com", Parameters: map[string]string{"iops": "3000"}}
	tests := []struct {
		name   string
		mutate func(*storagev1.VolumeAttributesClass)
		want   []string
	}{
		{"labels may change", func(v *storagev1.VolumeAttributesClass) { v.Labels = map[string]string{"tier": "gold"} }, nil},
		{"driver is immutable", func(v *storagev1.VolumeAttributesClass) { v.DriverName = "other.example.com" }, []string{"FieldValueForbidden driverName"}},
		{"parameters are immutable", func(v *storagev1.VolumeAttributesClass) { v.Parameters = map[string]string{"iops": "9000"} }, []string{"FieldValueForbidden parameters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := old.DeepCopy()
			tc.mutate(next)
			got := errorStrings(VolumeAttributesClassStrategy{}.ValidateUpdate(context.Background(), next, old))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumeAttributesClassTable(t *testing.T) {
	s := VolumeAttributesClassStrategy{}
	var names []string
	for _, c := range s.TableColumns() {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "DriverName", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	row, err := s.TableRow(&storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"gold", "csi.example.com", "<unknown>"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}
