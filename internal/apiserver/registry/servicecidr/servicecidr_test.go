package servicecidr

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestServiceCIDRValidate(t *testing.T) {
	tests := []struct {
		name  string
		cidrs []string
		want  []string
	}{
		{"one v4", []string{"10.43.0.0/16"}, nil},
		{"dual stack", []string{"10.43.0.0/16", "fd00:43::/108"}, nil},
		{"none", nil, []string{"FieldValueRequired spec.cidrs"}},
		{"three", []string{"10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"}, []string{"FieldValueInvalid spec.cidrs"}},
		{"two v4", []string{"10.1.0.0/16", "10.2.0.0/16"}, []string{"FieldValueInvalid spec.cidrs"}},
		{"not a cidr", []string{"10.1.0.0"}, []string{"FieldValueInvalid spec.cidrs[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: tc.cidrs}}
			if diff := cmp.Diff(tc.want, errorStrings(ServiceCIDRStrategy{}.Validate(context.Background(), c))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceCIDRValidateUpdate(t *testing.T) {
	old := &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16"}}}
	tests := []struct {
		name  string
		cidrs []string
		want  []string
	}{
		{"unchanged", []string{"10.43.0.0/16"}, nil},
		{"gain the other family", []string{"10.43.0.0/16", "fd00:43::/108"}, nil},
		{"changed", []string{"10.44.0.0/16"}, []string{"FieldValueInvalid spec.cidrs[0]"}},
		{"dropped", nil, []string{"FieldValueInvalid spec.cidrs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &networkingv1.ServiceCIDR{Spec: networkingv1.ServiceCIDRSpec{CIDRs: tc.cidrs}}
			if diff := cmp.Diff(tc.want, errorStrings(ServiceCIDRStrategy{}.ValidateUpdate(context.Background(), c, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIPAddress(t *testing.T) {
	s := IPAddressStrategy{}
	names := map[string]bool{"10.43.0.1": true, "2001:db8::1": true, "10.043.0.1": false, "2001:DB8::1": false, "web": false}
	for name, ok := range names {
		if got := len(s.ValidateName(name, false)) == 0; got != ok {
			t.Errorf("ValidateName(%q) valid = %v, want %v", name, got, ok)
		}
	}
	ref := &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}
	tests := []struct {
		name string
		ref  *networkingv1.ParentReference
		want []string
	}{
		{"service", ref, nil},
		{"no parent", nil, []string{"FieldValueRequired spec.parentRef"}},
		{"no resource", &networkingv1.ParentReference{Name: "web"}, []string{"FieldValueRequired spec.parentRef.resource"}},
		{"slash in name", &networkingv1.ParentReference{Resource: "services", Name: "a/b"}, []string{"FieldValueInvalid spec.parentRef.name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &networkingv1.IPAddress{Spec: networkingv1.IPAddressSpec{ParentRef: tc.ref}}
			if diff := cmp.Diff(tc.want, errorStrings(s.Validate(context.Background(), a))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	a := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.10"}, Spec: networkingv1.IPAddressSpec{ParentRef: ref}}
	moved := a.DeepCopy()
	moved.Spec.ParentRef.Name = "other"
	if diff := cmp.Diff([]string{"FieldValueInvalid spec.parentRef"}, errorStrings(s.ValidateUpdate(context.Background(), moved, a))); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	row, err := s.TableRow(a)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"10.43.0.10", "services/default/web"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
