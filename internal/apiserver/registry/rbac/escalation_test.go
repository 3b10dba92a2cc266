package rbac

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	authzrbac "github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
)

func TestEscalation(t *testing.T) {
	rule := func(verbs []string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{""}, Resources: resources}
	}
	podsRW := rule([]string{"get", "list", "create"}, "pods")
	om := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	user := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: name}}
	}
	src := &authzrbac.StaticSource{
		ClusterRoles: []*rbacv1.ClusterRole{
			{ObjectMeta: om("", "pods-rw"), Rules: []rbacv1.PolicyRule{podsRW}},
			{ObjectMeta: om("", "secrets"), Rules: []rbacv1.PolicyRule{rule([]string{"get"}, "secrets")}},
			{ObjectMeta: om("", "escalator"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"escalate"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles"}}}},
			{ObjectMeta: om("", "binder"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"bind"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"secrets"}}}},
		},
		RoleBindings: []*rbacv1.RoleBinding{
			{ObjectMeta: om("ns", "alice"), RoleRef: ref("ClusterRole", "pods-rw"), Subjects: user("alice")},
			{ObjectMeta: om("ns", "esc"), RoleRef: ref("ClusterRole", "escalator"), Subjects: user("eve")},
			{ObjectMeta: om("ns", "bind"), RoleRef: ref("ClusterRole", "binder"), Subjects: user("bob")},
		},
	}
	a := authzrbac.New(src)
	esc := &Escalation{authorizer: authz.Union(authz.Superuser(authn.SystemMasters), a), resolver: a, roles: a}
	ns := nameStrategy{esc: esc}
	alice := &authn.User{Name: "alice", Groups: []string{"system:authenticated"}}
	role := func(rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: om("ns", "r"), Rules: rules}
	}
	tests := []struct {
		name    string
		user    *authn.User
		create  func(context.Context) error
		wantMsg string
	}{
		{name: "role within own rules", user: alice, create: func(ctx context.Context) error {
			_, err := RoleStrategy{ns}.BeforeCreate(ctx, role(rule([]string{"get"}, "pods")), false)
			return err
		}},
		{name: "role beyond own rules", user: alice, create: func(ctx context.Context) error {
			_, err := RoleStrategy{ns}.BeforeCreate(ctx, role(rule([]string{"get", "delete"}, "pods", "secrets")), false)
			return err
		}, wantMsg: `roles.rbac.authorization.k8s.io "r" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}
{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}`},
		{name: "escalate verb", user: &authn.User{Name: "eve"}, create: func(ctx context.Context) error {
			_, err := RoleStrategy{ns}.BeforeCreate(ctx, role(rule([]string{"*"}, "*")), false)
			return err
		}},
		{name: "system:masters", user: &authn.User{Name: "admin", Groups: []string{"system:masters"}}, create: func(ctx context.Context) error {
			_, err := ClusterRoleStrategy{ns}.BeforeCreate(ctx, &rbacv1.ClusterRole{ObjectMeta: om("", "all"), Rules: fullAuthority}, false)
			return err
		}},
		{name: "bind a role one holds", user: alice, create: func(ctx context.Context) error {
			_, err := RoleBindingStrategy{ns}.BeforeCreate(ctx, &rbacv1.RoleBinding{ObjectMeta: om("ns", "b"), RoleRef: ref("ClusterRole", "pods-rw"), Subjects: user("carol")}, false)
			return err
		}},
		{name: "bind a role one does not hold", user: alice, create: func(ctx context.Context) error {
			_, err := RoleBindingStrategy{ns}.BeforeCreate(ctx, &rbacv1.RoleBinding{ObjectMeta: om("ns", "b"), RoleRef: ref("ClusterRole", "secrets"), Subjects: user("carol")}, false)
			return err
		}, wantMsg: `rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{name: "bind verb on the role", user: &authn.User{Name: "bob"}, create: func(ctx context.Context) error {
			_, err := RoleBindingStrategy{ns}.BeforeCreate(ctx, &rbacv1.RoleBinding{ObjectMeta: om("ns", "b"), RoleRef: ref("ClusterRole", "secrets"), Subjects: user("carol")}, false)
			return err
		}},
		{name: "bind a missing role", user: alice, create: func(ctx context.Context) error {
			_, err := ClusterRoleBindingStrategy{ns}.BeforeCreate(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: om("", "b"), RoleRef: ref("ClusterRole", "nope"), Subjects: user("carol")}, false)
			return err
		}, wantMsg: `clusterrolebindings.rbac.authorization.k8s.io "b" is forbidden: clusterrole.rbac.authorization.k8s.io "nope" not found`},
		{name: "aggregation rule needs everything", user: &authn.User{Name: "eve"}, create: func(ctx context.Context) error {
			cr := &rbacv1.ClusterRole{ObjectMeta: om("", "agg"), AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"a": "b"}}}}}
			_, err := ClusterRoleStrategy{ns}.BeforeCreate(ctx, cr, false)
			return err
		}, wantMsg: `clusterroles.rbac.authorization.k8s.io "agg" is forbidden: must have cluster-admin privileges to use the aggregationRule`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create(authn.WithUser(context.Background(), tc.user))
			switch {
			case tc.wantMsg == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantMsg != "" && (err == nil || !apierrors.IsForbidden(err) || err.Error() != tc.wantMsg):
				t.Fatalf("error = %v\nwant Forbidden %s", err, tc.wantMsg)
			}
		})
	}
}

func TestUnchangedRulesAreNotChecked(t *testing.T) {
	esc := &Escalation{authorizer: authz.AuthorizerFunc(func(context.Context, authz.Attributes) (authz.Decision, string, error) {
		return authz.NoOpinion, "", nil
	}), roles: authzrbac.New(&authzrbac.StaticSource{})}
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}, Rules: fullAuthority[:1]}
	next := r.DeepCopy()
	next.Labels = map[string]string{"x": "y"}
	ctx := authn.WithUser(context.Background(), &authn.User{Name: "nobody"})
	if _, err := (RoleStrategy{nameStrategy{esc: esc}}).BeforeUpdate(ctx, next, runtime.Object(r), false); err != nil {
		t.Errorf("label change refused: %v", err)
	}
}
