package audit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: ["watch"]
- level: None
  userGroups: ["system:nodes"]
  resources: [{group: "", resources: ["nodes/status", "*/log"]}]
- level: Metadata
  resources: [{group: "", resources: ["secrets", "configmaps"]}]
- level: RequestResponse
  namespaces: ["audited"]
  resources: [{group: "apps", resources: ["deployments/*"], resourceNames: ["web"]}]
  omitStages: [ResponseStarted]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: Request
  verbs: ["create", "update", "patch", "delete"]
`

func TestPolicyDecide(t *testing.T) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	alice := &authn.User{Name: "alice", Groups: []string{"devs"}}
	node := &authn.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	proxy := &authn.User{Name: "system:kube-proxy"}
	res := func(u *authn.User, verb, group, resource, sub, ns, name string) Attributes {
		return Attributes{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	type out struct {
		Level auditv1.Level
		Omit  []auditv1.Stage
	}
	cases := []struct {
		name  string
		attrs Attributes
		want  out
	}{
		{"users and verbs both match", res(proxy, "watch", "discovery.k8s.io", "endpointslices", "", "", ""), out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"users match, verb does not", res(proxy, "create", "", "events", "", "default", ""), out{auditv1.LevelRequest, []auditv1.Stage{"RequestReceived"}}},
		{"group and subresource", res(node, "patch", "", "nodes", "status", "", "n1"), out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"*/log", res(node, "get", "", "pods", "log", "default", "p"), out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"secrets at Metadata", res(alice, "create", "", "secrets", "", "default", "s"), out{auditv1.LevelMetadata, []auditv1.Stage{"RequestReceived"}}},
		{"resource names, namespace and deployments/*", res(alice, "update", "apps", "deployments", "scale", "audited", "web"), out{auditv1.LevelRequestResponse, []auditv1.Stage{"ResponseStarted", "RequestReceived"}}},
		{"other name", res(alice, "update", "apps", "deployments", "scale", "audited", "api"), out{auditv1.LevelRequest, []auditv1.Stage{"RequestReceived"}}},
		{"other namespace", res(alice, "get", "apps", "deployments", "", "other", "web"), out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"non-resource prefix", Attributes{User: alice, Verb: "get", Path: "/healthz/etcd"}, out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"non-resource write", Attributes{User: alice, Verb: "post", Path: "/foo"}, out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
		{"a get nobody lists", res(alice, "get", "", "pods", "", "default", "p"), out{auditv1.LevelNone, []auditv1.Stage{"RequestReceived"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, omit := p.Decide(tc.attrs)
			if diff := cmp.Diff(tc.want, out{l, omit}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct{ name, policy, want string }{
		{"bad level", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n", `rules[0].level: Unsupported value: "Everything"`},
		{"bad stage", "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Sometimes]\nrules:\n- level: None\n", `omitStages: Unsupported value: "Sometimes"`},
		{"no rules", "apiVersion: audit.k8s.io/v1\nkind: Policy\n", "at least one rule is required"},
		{"both kinds", "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n", "rules cannot apply to both"},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\n", "want audit.k8s.io/v1 Policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.policy))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
