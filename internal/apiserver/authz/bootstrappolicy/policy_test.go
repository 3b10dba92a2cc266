package bootstrappolicy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLoad(t *testing.T) {
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer",
		"system:node", "system:node-proxier", "system:kube-scheduler", "system:kube-controller-manager", "system:volume-scheduler",
		"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:controller:deployment-controller", "system:aggregate-to-view"} {
		if _, ok := p.ClusterRole(name); !ok {
			t.Errorf("cluster role %s missing", name)
		}
	}
	if len(p.ClusterRoles) < 60 || len(p.ClusterRoleBindings) < 40 || len(p.Roles) == 0 || len(p.RoleBindings) == 0 {
		t.Errorf("policy too small: %d cluster roles, %d cluster role bindings, %d roles, %d role bindings",
			len(p.ClusterRoles), len(p.ClusterRoleBindings), len(p.Roles), len(p.RoleBindings))
	}
	admin, _ := p.ClusterRole("cluster-admin")
	want := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}, {NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}}
	if d := cmp.Diff(want, admin.Rules); d != "" {
		t.Errorf("cluster-admin rules (-want +got):\n%s", d)
	}
	// Each controller role is bound to its kube-system service account,
	// and the controller manager's user only to its own role.
	var cmRoles []string
	foundSA := false
	for _, b := range p.ClusterRoleBindings {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.UserKind && s.Name == ControllerManagerUser {
				cmRoles = append(cmRoles, b.RoleRef.Name)
			}
		}
		if b.RoleRef.Name == "system:controller:deployment-controller" && len(b.Subjects) == 1 &&
			b.Subjects[0] == (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "deployment-controller", Namespace: "kube-system"}) {
			foundSA = true
		}
	}
	if !foundSA {
		t.Error("kube-system/deployment-controller is not bound to system:controller:deployment-controller")
	}
	if d := cmp.Diff([]string{"system:kube-controller-manager"}, cmRoles); d != "" {
		t.Errorf("cluster roles of %s (-want +got):\n%s", ControllerManagerUser, d)
	}
	// Without per-controller accounts the manager's user holds every
	// controller role.
	p.ShareControllerIdentity()
	shared := map[string]bool{}
	for _, b := range p.ClusterRoleBindings {
		if len(b.Subjects) == 1 && b.Subjects[0].Name == ControllerManagerUser {
			shared[b.RoleRef.Name] = true
		}
	}
	for _, role := range []string{"system:controller:deployment-controller", "system:controller:generic-garbage-collector", KubeletServingApproverRole} {
		if !shared[role] {
			t.Errorf("ShareControllerIdentity: %s not bound to %s", role, ControllerManagerUser)
		}
	}
	if len(NodeRules()) == 0 {
		t.Error("system:node has no rules")
	}
}

func TestReconcileClusterRole(t *testing.T) {
	exp := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}, Annotations: map[string]string{AutoUpdateAnnotation: "true"}},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
	}
	userRule := rbacv1.PolicyRule{Verbs: []string{"delete"}, APIGroups: []string{""}, Resources: []string{"secrets"}}
	tests := []struct {
		name        string
		cur         *rbacv1.ClusterRole
		wantChanged bool
		wantRules   []rbacv1.PolicyRule
		wantLabels  map[string]string
	}{
		{
			name:        "missing rule added, user rule kept",
			cur:         &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"mine": "x"}}, Rules: []rbacv1.PolicyRule{userRule, {Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}}},
			wantChanged: true,
			wantRules:   []rbacv1.PolicyRule{userRule, {Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}, {Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
			wantLabels:  map[string]string{"mine": "x", "kubernetes.io/bootstrapping": "rbac-defaults"},
		},
		{
			name:       "up to date",
			cur:        exp.DeepCopy(),
			wantRules:  exp.Rules,
			wantLabels: exp.Labels,
		},
		{
			name:      "autoupdate false is left alone",
			cur:       &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{AutoUpdateAnnotation: "false"}}, Rules: []rbacv1.PolicyRule{userRule}},
			wantRules: []rbacv1.PolicyRule{userRule},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := ReconcileClusterRole(exp, tc.cur)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if d := cmp.Diff(tc.wantRules, got.Rules); d != "" {
				t.Errorf("rules (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantLabels, got.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		// A user narrowed view (protected) and added a subject to a binding.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:discovery", Annotations: map[string]string{AutoUpdateAnnotation: "false"}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "system:basic-user"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:basic-user"},
			Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}},
		},
	)
	if err := Reconcile(ctx, client, p); err != nil {
		t.Fatal(err)
	}
	// Twice: the second run changes nothing and fails nothing.
	if err := Reconcile(ctx, client, p); err != nil {
		t.Fatal(err)
	}
	crs, _ := client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if len(crs.Items) != len(p.ClusterRoles) {
		t.Errorf("%d cluster roles, want %d", len(crs.Items), len(p.ClusterRoles))
	}
	disc, _ := client.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{})
	if len(disc.Rules) != 0 {
		t.Errorf("protected system:discovery was changed: %v", disc.Rules)
	}
	bu, _ := client.RbacV1().ClusterRoleBindings().Get(ctx, "system:basic-user", metav1.GetOptions{})
	wantSubjects := []rbacv1.Subject{
		{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"},
		{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"},
	}
	if d := cmp.Diff(wantSubjects, bu.Subjects); d != "" {
		t.Errorf("system:basic-user subjects (-want +got):\n%s", d)
	}
	if _, err := client.RbacV1().Roles("kube-system").Get(ctx, "extension-apiserver-authentication-reader", metav1.GetOptions{}); err != nil {
		t.Errorf("namespaced role: %v", err)
	}
}
