package bootstrappolicy

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
)

// allowed evaluates the policy's bindings of user for one request.
func allowed(p *Policy, user string, a authz.Attributes) bool {
	a.User = &authn.User{Name: user}
	a.ResourceRequest = true
	bound := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.UserKind && s.Name == user {
				return true
			}
		}
		return false
	}
	check := func(ref rbacv1.RoleRef) bool {
		r, ok := p.ClusterRole(ref.Name)
		if !ok || ref.Kind != "ClusterRole" {
			return false
		}
		for i := range r.Rules {
			if rbac.RuleAllows(a, &r.Rules[i]) {
				return true
			}
		}
		return false
	}
	for _, b := range p.ClusterRoleBindings {
		if bound(b.Subjects) && check(b.RoleRef) {
			return true
		}
	}
	for _, b := range p.RoleBindings {
		if b.Namespace == a.Namespace && bound(b.Subjects) && check(b.RoleRef) {
			return true
		}
	}
	return false
}

// TestServiceIdentities: cluster DNS and the load-balancer allocator get
// what they use and nothing more.
func TestServiceIdentities(t *testing.T) {
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		user string
		a    authz.Attributes
		want bool
	}{
		{ClusterDNSUser, authz.Attributes{Verb: "watch", Resource: "services"}, true},
		{ClusterDNSUser, authz.Attributes{Verb: "list", APIGroup: "discovery.k8s.io", Resource: "endpointslices"}, true},
		{ClusterDNSUser, authz.Attributes{Verb: "create", Resource: "endpoints", Namespace: "kube-system"}, true},
		{ClusterDNSUser, authz.Attributes{Verb: "update", Resource: "services", Namespace: "kube-system", Name: "kube-dns"}, true},
		{ClusterDNSUser, authz.Attributes{Verb: "update", APIGroup: "discovery.k8s.io", Resource: "endpointslices", Namespace: "kube-system", Name: "kube-dns"}, true},
		{ClusterDNSUser, authz.Attributes{Verb: "update", Resource: "services", Namespace: "kube-system", Name: "metrics-server"}, false},
		{ClusterDNSUser, authz.Attributes{Verb: "create", Resource: "services", Namespace: "default"}, false},
		{ClusterDNSUser, authz.Attributes{Verb: "delete", Resource: "services", Namespace: "kube-system", Name: "kube-dns"}, false},
		{ClusterDNSUser, authz.Attributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
		{ClusterDNSUser, authz.Attributes{Verb: "list", Resource: "pods"}, false},
		{ServiceLBUser, authz.Attributes{Verb: "watch", Resource: "services"}, true},
		{ServiceLBUser, authz.Attributes{Verb: "update", Resource: "services", Subresource: "status", Namespace: "default", Name: "web"}, true},
		{ServiceLBUser, authz.Attributes{Verb: "create", Resource: "events", Namespace: "default"}, true},
		{ServiceLBUser, authz.Attributes{Verb: "update", Resource: "services", Namespace: "default", Name: "web"}, false},
		{ServiceLBUser, authz.Attributes{Verb: "list", Resource: "secrets"}, false},
	}
	for _, tc := range tests {
		if got := allowed(p, tc.user, tc.a); got != tc.want {
			t.Errorf("%s %s %s/%s %s/%s: allowed = %v, want %v", tc.user, tc.a.Verb, tc.a.APIGroup, tc.a.Resource, tc.a.Namespace, tc.a.Name, got, tc.want)
		}
	}
}
