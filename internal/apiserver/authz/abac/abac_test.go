package abac

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// policyFile is upstream's example policy file, a comment, a blank line
// and two unversioned lines.
const policyFile = `# upstream's example
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"system:authenticated",  "nonResourcePath": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"admin",     "namespace": "*",              "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"scheduler", "namespace": "*",              "resource": "pods",                       "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"scheduler", "namespace": "*",              "resource": "bindings"                                     }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"alice",     "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*"                   }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"bob",       "namespace": "projectCaribou", "resource": "*",         "apiGroup": "*", "readonly": true }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group":"ops",      "namespace": "*",              "resource": "deployments", "apiGroup": "apps"              }}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user":"*",         "nonResourcePath": "/logs/*"                                                        }}

{"user": "legacy", "namespace": "old", "resource": "configmaps"}
{"user": "root"}
`

func TestAuthorize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.jsonl")
	if err := os.WriteFile(path, []byte(policyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	user := func(name string, groups ...string) *authn.User {
		return &authn.User{Name: name, Groups: append(groups, "system:authenticated")}
	}
	res := func(u *authn.User, verb, group, resource, ns string) authz.Attributes {
		return authz.Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Namespace: ns, ResourceRequest: true}
	}
	path_ := func(u *authn.User, verb, p string) authz.Attributes {
		return authz.Attributes{User: u, Verb: verb, Path: p}
	}
	tests := []struct {
		name string
		a    authz.Attributes
		want authz.Decision
	}{
		{"admin deletes anything", res(user("admin"), "delete", "apps", "deployments", "x"), authz.Allow},
		{"everyone reads /version", path_(user("nobody"), "get", "/version"), authz.Allow},
		{"nobody posts a path", path_(user("nobody"), "post", "/version"), authz.NoOpinion},
		{"star user is every authenticated user", path_(user("nobody"), "post", "/logs/x"), authz.Allow},
		{"star user prefix", path_(user("nobody"), "post", "/logsx"), authz.NoOpinion},
		{"scheduler reads pods", res(user("scheduler"), "watch", "", "pods", "ns"), authz.Allow},
		{"scheduler may not write pods", res(user("scheduler"), "update", "", "pods", "ns"), authz.NoOpinion},
		{"scheduler creates bindings", res(user("scheduler"), "create", "", "bindings", "ns"), authz.Allow},
		{"scheduler binding needs the core group", res(user("scheduler"), "create", "x.io", "bindings", "ns"), authz.NoOpinion},
		{"alice in her namespace", res(user("alice"), "create", "", "secrets", "projectCaribou"), authz.Allow},
		{"alice elsewhere", res(user("alice"), "get", "", "secrets", "other"), authz.NoOpinion},
		{"alice cluster scope", res(user("alice"), "list", "", "nodes", ""), authz.NoOpinion},
		{"bob reads", res(user("bob"), "list", "", "pods", "projectCaribou"), authz.Allow},
		{"bob may not write", res(user("bob"), "create", "", "pods", "projectCaribou"), authz.NoOpinion},
		{"group ops", res(user("carol", "ops"), "patch", "apps", "deployments", "a"), authz.Allow},
		{"group ops other group", res(user("carol", "ops"), "patch", "extensions", "deployments", "a"), authz.NoOpinion},
		{"v0 line: any group", res(user("legacy"), "delete", "whatever.io", "configmaps", "old"), authz.Allow},
		{"v0 line: namespace", res(user("legacy"), "delete", "", "configmaps", "new"), authz.NoOpinion},
		{"v0 user only: everything", res(user("root"), "delete", "x", "y", ""), authz.Allow},
		{"v0 user only: paths", path_(user("root"), "put", "/anything"), authz.Allow},
		{"no user", res(nil, "get", "", "pods", "ns"), authz.NoOpinion},
	}
	for _, tt := range tests {
		got, reason, err := a.Authorize(context.Background(), tt.a)
		if err != nil || got != tt.want {
			t.Errorf("%s: %v %q %v, want %v", tt.name, got, reason, err, tt.want)
		}
		if got == authz.NoOpinion && reason != "No policy matched." {
			t.Errorf("%s: reason %q", tt.name, reason)
		}
	}

	rules, incomplete, err := a.RulesFor(context.Background(), user("bob"), "projectCaribou")
	// As upstream, a policy is listed only when its namespace matches, so
	// the path policies (no namespace) are not.
	want := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	}
	if err != nil || incomplete {
		t.Errorf("RulesFor: %v %v", incomplete, err)
	}
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("RulesFor(bob) (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{`{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy"}`, "line 1: "},
		{"\n{not json", "line 2: {not json"},
		{`{"apiVersion": "v1", "kind": "Pod", "spec": {}}`, `unknown apiVersion "v1"`},
	} {
		_, err := Parse([]byte(tt.text))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tt.text, err, tt.want)
		}
	}
}
