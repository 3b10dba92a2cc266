package rbac

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	authzrbac "github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Escalation is upstream's escalation prevention for RBAC writes: a user
// may create or change a role only with rules it already holds (or the
// escalate verb on the role), and bind a role only if it holds the role's
// rules (or the bind verb on the role). Members of system:masters may do
// anything. Setting an aggregationRule needs every permission.
type Escalation struct {
	authorizer authz.Authorizer
	resolver   authz.RuleResolver
	roles      *authzrbac.Authorizer
}

// NewEscalation checks writes with authorizer (the escalate and bind
// verbs, and the user's rules when it is an authz.RuleResolver) and reads
// referenced roles through r. A nil authorizer disables the check.
func NewEscalation(authorizer authz.Authorizer, r registry.Reader) *Escalation {
	if authorizer == nil || r == nil {
		return nil
	}
	e := &Escalation{authorizer: authorizer, roles: authzrbac.New(authzrbac.ReaderSource(r))}
	e.resolver, _ = authorizer.(authz.RuleResolver)
	return e
}

var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (e *Escalation) user(ctx context.Context) (*authn.User, bool, error) {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, false, errors.New("no user on request")
	}
	return u, u.InGroup(authn.SystemMasters), nil
}

func (e *Escalation) allowedVerb(ctx context.Context, u *authn.User, verb, resource, namespace, name string) bool {
	d, _, _ := e.authorizer.Authorize(ctx, authz.Attributes{
		User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "v1", Resource: resource,
		Namespace: namespace, Name: name, ResourceRequest: true,
	})
	return d == authz.Allow
}

// confirmNoEscalation is nil when u holds every rule of rules in namespace.
func (e *Escalation) confirmNoEscalation(ctx context.Context, u *authn.User, namespace string, rules []rbacv1.PolicyRule) error {
	var owner []rbacv1.PolicyRule
	var resolveErr error
	if e.resolver != nil {
		owner, _, resolveErr = e.resolver.RulesFor(ctx, u, namespace)
	}
	ok, missing := authzrbac.Covers(owner, rules)
	if ok {
		return nil
	}
	var lines []string
	seen := map[string]bool{}
	for _, r := range compact(missing) {
		if s := CompactString(r); !seen[s] {
			seen[s] = true
			lines = append(lines, s)
		}
	}
	sort.Strings(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(lines, "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: [%v]", resolveErr)
	}
	return errors.New(msg)
}

// compact merges broken-down rules that differ only in their verb.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type key struct{ group, resource, name, url string }
	index := map[key]int{}
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if len(r.APIGroups) > 1 || len(r.Resources) > 1 || len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 1 {
			out = append(out, r)
			continue
		}
		k := key{first(r.APIGroups), first(r.Resources), first(r.ResourceNames), first(r.NonResourceURLs)}
		if i, ok := index[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		index[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// CompactString renders a rule as upstream's error messages do, e.g.
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// checkRole is the check of a Role (namespace set) or ClusterRole write.
func (e *Escalation) checkRole(ctx context.Context, resource, namespace, name string, rules []rbacv1.PolicyRule, aggregated bool) error {
	if e == nil {
		return nil
	}
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}
	u, master, err := e.user(ctx)
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if master || e.allowedVerb(ctx, u, "escalate", resource, namespace, name) {
		return nil
	}
	if err := e.confirmNoEscalation(ctx, u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if aggregated {
		if err := e.confirmNoEscalation(ctx, u, namespace, fullAuthority); err != nil {
			return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
		}
	}
	return nil
}

// checkBinding is the check of a RoleBinding (namespace set) or
// ClusterRoleBinding write.
func (e *Escalation) checkBinding(ctx context.Context, resource, namespace, name string, ref rbacv1.RoleRef) error {
	if e == nil {
		return nil
	}
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}
	u, master, err := e.user(ctx)
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	refResource := "clusterroles"
	if ref.Kind == "Role" {
		refResource = "roles"
	}
	if master || e.allowedVerb(ctx, u, "bind", refResource, namespace, ref.Name) {
		return nil
	}
	rules, err := e.roles.RoleRefRules(ctx, ref, namespace)
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if err := e.confirmNoEscalation(ctx, u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// BeforeCreate refuses a Role granting more than its creator holds.
func (s RoleStrategy) BeforeCreate(ctx context.Context, obj runtime.Object, _ bool) (func(), error) {
	r := obj.(*rbacv1.Role)
	return nil, s.esc.checkRole(ctx, "roles", r.Namespace, r.Name, r.Rules, false)
}

// BeforeUpdate checks a Role whose rules change.
func (s RoleStrategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, _ bool) (func(), error) {
	r, o := obj.(*rbacv1.Role), old.(*rbacv1.Role)
	if apiequality.Semantic.DeepEqual(r.Rules, o.Rules) {
		return nil, nil
	}
	return nil, s.esc.checkRole(ctx, "roles", r.Namespace, r.Name, r.Rules, false)
}

// BeforeCreate refuses a ClusterRole granting more than its creator holds.
func (s ClusterRoleStrategy) BeforeCreate(ctx context.Context, obj runtime.Object, _ bool) (func(), error) {
	r := obj.(*rbacv1.ClusterRole)
	return nil, s.esc.checkRole(ctx, "clusterroles", "", r.Name, r.Rules, r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0)
}

// BeforeUpdate checks a ClusterRole whose rules or aggregation change.
func (s ClusterRoleStrategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, _ bool) (func(), error) {
	r, o := obj.(*rbacv1.ClusterRole), old.(*rbacv1.ClusterRole)
	if apiequality.Semantic.DeepEqual(r.Rules, o.Rules) && apiequality.Semantic.DeepEqual(r.AggregationRule, o.AggregationRule) {
		return nil, nil
	}
	aggregated := r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0 &&
		!apiequality.Semantic.DeepEqual(r.AggregationRule, o.AggregationRule)
	return nil, s.esc.checkRole(ctx, "clusterroles", "", r.Name, r.Rules, aggregated)
}

// BeforeCreate refuses a RoleBinding to a role its creator may not bind.
func (s RoleBindingStrategy) BeforeCreate(ctx context.Context, obj runtime.Object, _ bool) (func(), error) {
	b := obj.(*rbacv1.RoleBinding)
	return nil, s.esc.checkBinding(ctx, "rolebindings", b.Namespace, b.Name, b.RoleRef)
}

// BeforeUpdate checks a RoleBinding whose subjects change.
func (s RoleBindingStrategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, _ bool) (func(), error) {
	b, o := obj.(*rbacv1.RoleBinding), old.(*rbacv1.RoleBinding)
	if apiequality.Semantic.DeepEqual(b.Subjects, o.Subjects) {
		return nil, nil
	}
	return nil, s.esc.checkBinding(ctx, "rolebindings", b.Namespace, b.Name, b.RoleRef)
}

// BeforeCreate refuses a ClusterRoleBinding to a role its creator may not
// bind.
func (s ClusterRoleBindingStrategy) BeforeCreate(ctx context.Context, obj runtime.Object, _ bool) (func(), error) {
	b := obj.(*rbacv1.ClusterRoleBinding)
	return nil, s.esc.checkBinding(ctx, "clusterrolebindings", "", b.Name, b.RoleRef)
}

// BeforeUpdate checks a ClusterRoleBinding whose subjects change.
func (s ClusterRoleBindingStrategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, _ bool) (func(), error) {
	b, o := obj.(*rbacv1.ClusterRoleBinding), old.(*rbacv1.ClusterRoleBinding)
	if apiequality.Semantic.DeepEqual(b.Subjects, o.Subjects) {
		return nil, nil
	}
	return nil, s.esc.checkBinding(ctx, "clusterrolebindings", "", b.Name, b.RoleRef)
}

var (
	_ registry.BeforeCreater = RoleStrategy{}
	_ registry.BeforeUpdater = RoleStrategy{}
	_ registry.BeforeCreater = ClusterRoleStrategy{}
	_ registry.BeforeUpdater = ClusterRoleStrategy{}
	_ registry.BeforeCreater = RoleBindingStrategy{}
	_ registry.BeforeUpdater = RoleBindingStrategy{}
	_ registry.BeforeCreater = ClusterRoleBindingStrategy{}
	_ registry.BeforeUpdater = ClusterRoleBindingStrategy{}
)
