package rbac

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestNameIsPathSegment(t *testing.T) {
	tests := []struct {
		name   string
		prefix bool
		want   []string
	}{
		{name: "system:controller:deployment-controller"},
		{name: "Upper_Case ok"},
		{name: ".", want: []string{"may not be '.'"}},
		{name: "..", want: []string{"may not be '..'"}},
		{name: "..", prefix: true},
		{name: "a/b/c", want: []string{"may not contain '/'"}},
		{name: "50%", prefix: true, want: []string{"may not contain '%'"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RoleStrategy{}.ValidateName(tc.name, tc.prefix)); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name       string
		rules      []rbacv1.PolicyRule
		namespaced bool
		want       []string
	}{
		{name: "valid resource rule", namespaced: true, rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
		{name: "valid url rule", rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}},
		{name: "empty rule", rules: []rbacv1.PolicyRule{{}},
			want: []string{"rules[0].verbs: Required value", "rules[0].apiGroups: Required value", "rules[0].resources: Required value"}},
		{name: "url in namespaced role", namespaced: true, rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}},
			want: []string{"rules[0].nonResourceURLs: Invalid value"}},
		{name: "url and resources", rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}, Resources: []string{"pods"}}},
			want: []string{"rules[0].nonResourceURLs: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(ValidateRules(tc.rules, tc.namespaced, field.NewPath("rules")))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	cr := &rbacv1.ClusterRole{AggregationRule: &rbacv1.AggregationRule{}}
	if diff := cmp.Diff([]string{"aggregationRule.clusterRoleSelectors: Required value"}, errStrings(ClusterRoleStrategy{}.Validate(ctx, cr))); diff != "" {
		t.Errorf("aggregation errors (-want +got):\n%s", diff)
	}
}

func TestBindingDefaultsAndValidation(t *testing.T) {
	rb := &rbacv1.RoleBinding{
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "alice"}, {Kind: "Group", Name: "devs"}, {Kind: "ServiceAccount", Name: "default", Namespace: "ns"},
		},
	}
	RoleBindingStrategy{}.PrepareForCreate(ctx, rb)
	if rb.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("roleRef.apiGroup = %q", rb.RoleRef.APIGroup)
	}
	var groups []string
	for _, s := range rb.Subjects {
		groups = append(groups, s.APIGroup)
	}
	if diff := cmp.Diff([]string{rbacv1.GroupName, rbacv1.GroupName, ""}, groups); diff != "" {
		t.Errorf("subject apiGroups (-want +got):\n%s", diff)
	}
	if errs := (RoleBindingStrategy{}).Validate(ctx, rb); len(errs) != 0 {
		t.Errorf("defaulted binding invalid: %v", errs)
	}

	tests := []struct {
		name       string
		ref        rbacv1.RoleRef
		subjects   []rbacv1.Subject
		namespaced bool
		want       []string
	}{
		{name: "cluster binding to a role", ref: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
			want: []string{"roleRef.kind: Unsupported value"}},
		{name: "bad ref", namespaced: true, ref: rbacv1.RoleRef{APIGroup: "example.com", Kind: "Role"},
			want: []string{"roleRef.apiGroup: Unsupported value", "roleRef.name: Required value"}},
		{name: "subjects", ref: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			subjects: []rbacv1.Subject{
				{Kind: "ServiceAccount", Name: "default"},
				{Kind: "User", Name: "bob", APIGroup: "v1"},
				{Kind: "Robot", Name: "r2"},
				{Kind: "Group"},
			},
			want: []string{
				"subjects[0].namespace: Required value",
				"subjects[1].apiGroup: Unsupported value",
				"subjects[2].kind: Unsupported value",
				"subjects[3].name: Required value",
				"subjects[3].apiGroup: Unsupported value",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(ValidateBinding(tc.ref, tc.subjects, tc.namespaced))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}

	next := rb.DeepCopy()
	next.RoleRef.Name = "writer"
	if diff := cmp.Diff([]string{"roleRef: Invalid value"}, errStrings(RoleBindingStrategy{}.ValidateUpdate(ctx, next, rb))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
	crb := &rbacv1.ClusterRoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "a"}}
	crbNext := crb.DeepCopy()
	crbNext.RoleRef.Name = "b"
	if diff := cmp.Diff([]string{"roleRef: Invalid value"}, errStrings(ClusterRoleBindingStrategy{}.ValidateUpdate(ctx, crbNext, crb))); diff != "" {
		t.Errorf("cluster update errors (-want +got):\n%s", diff)
	}
}

func TestTables(t *testing.T) {
	created := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.FixedZone("x", 3600)))
	subjects := []rbacv1.Subject{
		{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}, {Kind: "Group", Name: "devs"},
		{Kind: "ServiceAccount", Name: "default", Namespace: "kube-system"},
	}
	tests := []struct {
		name     string
		strategy registry.Strategy
		obj      runtime.Object
		columns  []string
		want     []interface{}
	}{
		{name: "role", strategy: RoleStrategy{}, obj: &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", CreationTimestamp: created}},
			columns: []string{"Name", "Created At"}, want: []interface{}{"reader", "2024-05-01T09:00:00Z"}},
		{name: "clusterrole", strategy: ClusterRoleStrategy{}, obj: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin", CreationTimestamp: created}},
			columns: []string{"Name", "Created At"}, want: []interface{}{"admin", "2024-05-01T09:00:00Z"}},
		{name: "rolebinding", strategy: RoleBindingStrategy{},
			obj:     &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rb"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: subjects},
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			want:    []interface{}{"rb", "ClusterRole/view", "<unknown>", "alice, bob", "devs", "kube-system/default"}},
		{name: "clusterrolebinding", strategy: ClusterRoleBindingStrategy{},
			obj:     &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crb"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "admin"}},
			columns: []string{"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"},
			want:    []interface{}{"crb", "ClusterRole/admin", "<unknown>", "", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cols []string
			for _, c := range tc.strategy.TableColumns() {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
			row, err := tc.strategy.TableRow(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	wide := RoleBindingStrategy{}.TableColumns()
	if wide[3].Priority != 1 || wide[2].Priority != 0 {
		t.Errorf("subjects must be wide columns: %+v", wide)
	}
}

func TestResources(t *testing.T) {
	want := map[string]bool{"roles": true, "clusterroles": false, "rolebindings": true, "clusterrolebindings": false}
	got := map[string]bool{}
	for _, r := range Resources(registry.Deps{}) {
		got[r.StoragePrefix] = r.Namespaced
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}
