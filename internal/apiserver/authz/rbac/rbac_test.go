package rbac

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

func res(verb, group, resource, sub, ns, name string) authz.Attributes {
	return authz.Attributes{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func nonRes(verb, path string) authz.Attributes { return authz.Attributes{Verb: verb, Path: path} }

func rule(verbs, groups, resources, names []string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func s(v ...string) []string { return v }

// Upstream's TestRuleMatches cases (plugin/pkg/auth/authorizer/rbac).
func TestRuleAllows(t *testing.T) {
	tests := []struct {
		name string
		rule rbacv1.PolicyRule
		yes  []authz.Attributes
		no   []authz.Attributes
	}{
		{
			name: "star verb, exact match other",
			rule: rule(s("*"), s("v1"), s("pods"), nil),
			yes:  []authz.Attributes{res("get", "v1", "pods", "", "ns", ""), res("list", "v1", "pods", "", "", ""), res("delete", "v1", "pods", "", "ns", "p")},
			no:   []authz.Attributes{res("get", "v1", "pods", "status", "ns", ""), res("get", "v1", "services", "", "", ""), res("get", "v2", "pods", "", "", ""), nonRes("get", "/pods")},
		},
		{
			name: "star group, exact match other",
			rule: rule(s("get"), s("*"), s("pods"), nil),
			yes:  []authz.Attributes{res("get", "v1", "pods", "", "", ""), res("get", "v2", "pods", "", "", "")},
			no:   []authz.Attributes{res("list", "v1", "pods", "", "", ""), res("get", "v1", "services", "", "", "")},
		},
		{
			name: "star resource, exact match other",
			rule: rule(s("get"), s("v1"), s("*"), nil),
			yes:  []authz.Attributes{res("get", "v1", "pods", "", "", ""), res("get", "v1", "pods", "status", "", ""), res("get", "v1", "services", "", "", "")},
			no:   []authz.Attributes{res("get", "v2", "pods", "", "", "")},
		},
		{
			name: "tuple expansion",
			rule: rule(s("get", "list"), s("v1", "v2"), s("pods", "services"), nil),
			yes:  []authz.Attributes{res("get", "v1", "pods", "", "", ""), res("list", "v2", "services", "", "", "")},
			no:   []authz.Attributes{res("delete", "v1", "pods", "", "", ""), res("get", "v3", "pods", "", "", "")},
		},
		{
			name: "subresource expansion",
			rule: rule(s("*"), s("*"), s("pods", "pods/status"), nil),
			yes:  []authz.Attributes{res("get", "", "pods", "", "", ""), res("update", "", "pods", "status", "", "")},
			no:   []authz.Attributes{res("get", "", "pods", "log", "", "")},
		},
		{
			name: "star subresource",
			rule: rule(s("get"), s(""), s("*/scale"), nil),
			yes:  []authz.Attributes{res("get", "", "deployments", "scale", "", ""), res("get", "", "replicasets", "scale", "", "")},
			no:   []authz.Attributes{res("get", "", "deployments", "", "", ""), res("get", "", "deployments", "status", "", "")},
		},
		{
			name: "resource names",
			rule: rule(s("get"), s(""), s("secrets"), s("a", "b")),
			yes:  []authz.Attributes{res("get", "", "secrets", "", "ns", "a"), res("get", "", "secrets", "", "ns", "b")},
			no:   []authz.Attributes{res("get", "", "secrets", "", "ns", "c"), res("get", "", "secrets", "", "ns", "")},
		},
		{
			name: "non-resource exact and star",
			rule: rbacv1.PolicyRule{Verbs: s("get"), NonResourceURLs: s("/healthz", "/api/*")},
			yes:  []authz.Attributes{nonRes("get", "/healthz"), nonRes("get", "/api/v1"), nonRes("get", "/api/")},
			no:   []authz.Attributes{nonRes("get", "/healthz/etcd"), nonRes("get", "/api"), nonRes("post", "/healthz"), res("get", "", "healthz", "", "", "")},
		},
		{
			name: "non-resource all",
			rule: rbacv1.PolicyRule{Verbs: s("*"), NonResourceURLs: s("*")},
			yes:  []authz.Attributes{nonRes("get", "/anything"), nonRes("post", "/")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.yes {
				if !RuleAllows(a, &tc.rule) {
					t.Errorf("expected %+v to be allowed", a)
				}
			}
			for _, a := range tc.no {
				if RuleAllows(a, &tc.rule) {
					t.Errorf("expected %+v to be refused", a)
				}
			}
		})
	}
}

func TestAppliesTo(t *testing.T) {
	sa := &authn.User{Name: "system:serviceaccount:ns1:builder", Groups: s("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated")}
	tests := []struct {
		name    string
		user    *authn.User
		subject rbacv1.Subject
		ns      string
		want    bool
	}{
		{"user", &authn.User{Name: "alice"}, rbacv1.Subject{Kind: "User", Name: "alice"}, "", true},
		{"other user", &authn.User{Name: "bob"}, rbacv1.Subject{Kind: "User", Name: "alice"}, "", false},
		{"group", &authn.User{Name: "bob", Groups: s("dev")}, rbacv1.Subject{Kind: "Group", Name: "dev"}, "", true},
		{"authenticated group", &authn.User{Name: "bob", Groups: s("system:authenticated")}, rbacv1.Subject{Kind: "Group", Name: "system:authenticated"}, "", true},
		{"service account with namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder", Namespace: "ns1"}, "", true},
		{"service account from binding namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "ns1", true},
		{"service account without any namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder"}, "", false},
		{"service account other namespace", sa, rbacv1.Subject{Kind: "ServiceAccount", Name: "builder", Namespace: "ns2"}, "", false},
		{"service accounts group", sa, rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:ns1"}, "", true},
		{"unknown kind", &authn.User{Name: "alice"}, rbacv1.Subject{Kind: "Robot", Name: "alice"}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppliesTo(tc.user, tc.subject, tc.ns); got != tc.want {
				t.Errorf("AppliesTo = %v, want %v", got, tc.want)
			}
		})
	}
}

func testSource() *StaticSource {
	om := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	return &StaticSource{
		ClusterRoles: []*rbacv1.ClusterRole{
			{ObjectMeta: om("", "pod-reader"), Rules: []rbacv1.PolicyRule{rule(s("get", "list", "watch"), s(""), s("pods", "pods/log"), nil)}},
			{ObjectMeta: om("", "healthz"), Rules: []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/healthz")}}},
		},
		Roles: []*rbacv1.Role{
			{ObjectMeta: om("ns1", "secret-a"), Rules: []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a"))}},
		},
		ClusterRoleBindings: []*rbacv1.ClusterRoleBinding{
			{ObjectMeta: om("", "everyone-healthz"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "healthz"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:authenticated"}}},
			{ObjectMeta: om("", "dangling"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "missing"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "carol"}}},
		},
		RoleBindings: []*rbacv1.RoleBinding{
			{ObjectMeta: om("ns1", "alice-pods"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "pod-reader"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}},
			{ObjectMeta: om("ns1", "builder-secret"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "secret-a"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}}},
		},
	}
}

func TestAuthorize(t *testing.T) {
	alice := &authn.User{Name: "alice", Groups: s("system:authenticated")}
	builder := &authn.User{Name: "system:serviceaccount:ns1:builder", Groups: s("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated")}
	carol := &authn.User{Name: "carol"}
	tests := []struct {
		name       string
		user       *authn.User
		attrs      authz.Attributes
		want       authz.Decision
		wantReason string
	}{
		{"role binding to cluster role in its namespace", alice, res("list", "", "pods", "", "ns1", ""), authz.Allow, `RBAC: allowed by RoleBinding "alice-pods/ns1" of ClusterRole "pod-reader" to User "alice"`},
		{"subresource granted", alice, res("get", "", "pods", "log", "ns1", "p"), authz.Allow, `RBAC: allowed by RoleBinding "alice-pods/ns1" of ClusterRole "pod-reader" to User "alice"`},
		{"subresource not granted", alice, res("create", "", "pods", "exec", "ns1", "p"), authz.NoOpinion, ""},
		{"other namespace", alice, res("list", "", "pods", "", "ns2", ""), authz.NoOpinion, ""},
		{"cluster scope not granted by role binding", alice, res("list", "", "pods", "", "", ""), authz.NoOpinion, ""},
		{"write not granted", alice, res("delete", "", "pods", "", "ns1", "p"), authz.NoOpinion, ""},
		{"non-resource via group", alice, nonRes("get", "/healthz"), authz.Allow, `RBAC: allowed by ClusterRoleBinding "everyone-healthz" of ClusterRole "healthz" to Group "system:authenticated"`},
		{"service account named secret", builder, res("get", "", "secrets", "", "ns1", "a"), authz.Allow, `RBAC: allowed by RoleBinding "builder-secret/ns1" of Role "secret-a" to ServiceAccount "builder/ns1"`},
		{"service account other secret", builder, res("get", "", "secrets", "", "ns1", "b"), authz.NoOpinion, ""},
		{"service account list secrets", builder, res("list", "", "secrets", "", "ns1", ""), authz.NoOpinion, ""},
		{"dangling binding reports the error", carol, res("get", "", "pods", "", "ns1", "p"), authz.NoOpinion, `RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found`},
	}
	a := New(testSource())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.attrs.User = tc.user
			d, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if d != tc.want || reason != tc.wantReason {
				t.Errorf("got (%v, %q), want (%v, %q)", d, reason, tc.want, tc.wantReason)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	a := New(testSource())
	rules, incomplete, err := a.RulesFor(context.Background(), &authn.User{Name: "alice", Groups: s("system:authenticated")}, "ns1")
	if err != nil || incomplete {
		t.Fatalf("RulesFor: incomplete=%v err=%v", incomplete, err)
	}
	want := []rbacv1.PolicyRule{
		{Verbs: s("get"), NonResourceURLs: s("/healthz")},
		rule(s("get", "list", "watch"), s(""), s("pods", "pods/log"), nil),
	}
	if d := cmp.Diff(want, rules); d != "" {
		t.Errorf("rules (-want +got):\n%s", d)
	}
	_, incomplete, err = a.RulesFor(context.Background(), &authn.User{Name: "carol"}, "ns1")
	if !incomplete || err == nil {
		t.Errorf("dangling binding: incomplete=%v err=%v, want true and an error", incomplete, err)
	}
}

// Upstream's escalation cases (pkg/registry/rbac/validation TestCoversExactMatch etc.).
func TestCovers(t *testing.T) {
	tests := []struct {
		name        string
		owner       []rbacv1.PolicyRule
		servant     []rbacv1.PolicyRule
		wantCovered bool
		wantMissing []rbacv1.PolicyRule
	}{
		{"exact match", []rbacv1.PolicyRule{rule(s("get", "list"), s("v1"), s("builds"), nil)}, []rbacv1.PolicyRule{rule(s("get", "list"), s("v1"), s("builds"), nil)}, true, nil},
		{"sub-resource star", []rbacv1.PolicyRule{rule(s("get"), s(""), s("*/scale"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("deployments/scale"), nil)}, true, nil},
		{"star verb", []rbacv1.PolicyRule{rule(s("*"), s("v1"), s("builds"), nil)}, []rbacv1.PolicyRule{rule(s("watch"), s("v1"), s("builds"), nil)}, true, nil},
		{"star group and resource", []rbacv1.PolicyRule{rule(s("get"), s("*"), s("*"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s("apps"), s("deployments"), nil)}, true, nil},
		{"verb mismatch", []rbacv1.PolicyRule{rule(s("get"), s("v1"), s("builds"), nil)}, []rbacv1.PolicyRule{rule(s("get", "delete"), s("v1"), s("builds"), nil)}, false,
			[]rbacv1.PolicyRule{rule(s("delete"), s("v1"), s("builds"), nil)}},
		{"resource names: owner unrestricted", []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a"))}, true, nil},
		{"resource names: owner restricted", []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a"))}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), nil)}, false,
			[]rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), nil)}},
		{"resource names: subset", []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("a", "b"))}, []rbacv1.PolicyRule{rule(s("get"), s(""), s("secrets"), s("b"))}, true, nil},
		{"non-resource star", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/api/*")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/api/v1")}}, true, nil},
		{"non-resource mismatch", []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/api")}}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis")}}, false,
			[]rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/apis")}}},
		{"resource rule does not cover URLs", []rbacv1.PolicyRule{rule(s("*"), s("*"), s("*"), nil)}, []rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/metrics")}}, false,
			[]rbacv1.PolicyRule{{Verbs: s("get"), NonResourceURLs: s("/metrics")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			covered, missing := Covers(tc.owner, tc.servant)
			if covered != tc.wantCovered {
				t.Errorf("covered = %v, want %v", covered, tc.wantCovered)
			}
			if d := cmp.Diff(tc.wantMissing, missing); d != "" {
				t.Errorf("missing (-want +got):\n%s", d)
			}
		})
	}
}
