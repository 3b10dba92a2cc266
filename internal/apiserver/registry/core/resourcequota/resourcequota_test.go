package resourcequota

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

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.ResourceQuotaSpec
		want []string
	}{
		{name: "valid", spec: corev1.ResourceQuotaSpec{Hard: list("pods", "10", "requests.cpu", "4"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}},
		{name: "negative", spec: corev1.ResourceQuotaSpec{Hard: list("pods", "-1")}, want: []string{"spec.hard[pods]: Invalid value"}},
		{name: "unknown scope", spec: corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{"Sometimes"}}, want: []string{"spec.scopes: Invalid value"}},
		{name: "conflicting scopes", spec: corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating}},
			want: []string{"spec.scopes: Invalid value"}},
		{name: "selector In without values", spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn}}}},
			want: []string{"spec.scopeSelector.matchExpressions[0].values: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, &corev1.ResourceQuota{Spec: tc.spec}))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusRulesAndTable(t *testing.T) {
	old := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: list("pods", "10")}}
	old.Status.Used = list("pods", "3")
	Strategy{}.PrepareForCreate(ctx, old)
	if old.Status.Used != nil {
		t.Errorf("create kept status %+v", old.Status)
	}
	old.Status = corev1.ResourceQuotaStatus{
		Hard: list("pods", "10", "requests.cpu", "4", "limits.memory", "8Gi", "limits.cpu", "8"),
		Used: list("pods", "3", "requests.cpu", "500m", "limits.memory", "1Gi"),
	}
	upd := old.DeepCopy()
	upd.Spec.Hard = list("pods", "20")
	upd.Status = corev1.ResourceQuotaStatus{}
	Strategy{}.PrepareForUpdate(ctx, upd, old)
	if len(upd.Status.Hard) != 4 {
		t.Errorf("update dropped status")
	}
	st := old.DeepCopy()
	st.Spec.Hard = nil
	st.Status.Used = list("pods", "-1")
	Strategy{}.PrepareForStatusUpdate(ctx, st, old)
	if st.Spec.Hard == nil {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"status.used[pods]: Invalid value"}, errStrings(Strategy{}.ValidateStatusUpdate(ctx, st, old))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	row, err := Strategy{}.TableRow(old)
	if err != nil {
		t.Fatal(err)
	}
	want := []interface{}{"compute", "<unknown>", "pods: 3/10, requests.cpu: 500m/4", "limits.cpu: 0/8, limits.memory: 1Gi/8Gi"}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
