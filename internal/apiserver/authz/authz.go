// Package authz decides whether an authenticated user may perform a request.
// It is the seam between the handler chain and the authorization modes: the
// handler builds Attributes from the request, asks the configured
// Authorizer, and answers 403 (ForbiddenMessage) unless the decision is
// Allow. The modes (--authorization-mode) are AlwaysAllow
// (AlwaysAllowAuthenticated), AlwaysDeny, Node (package node), RBAC
// (package rbac), ABAC (package abac) and Webhook (package webhook), asked
// in order by Union after the system:masters superuser check.
package authz

import (
	"context"
	"errors"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// Attributes describe one request to authorize.
type Attributes struct {
	User *authn.User
	// Verb is the API verb for resource requests (get, list, watch, create,
	// update, patch, delete, deletecollection) or the lower-case HTTP method
	// for other paths.
	Verb        string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Path is the request path, used for non-resource requests.
	Path            string
	ResourceRequest bool
	// FieldSelector is the request's raw fieldSelector (list and watch),
	// e.g. "spec.nodeName=n1" for a kubelet's pod watch.
	FieldSelector string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// Deny refuses the request outright.
	Deny Decision = iota
	// Allow permits the request.
	Allow
	// NoOpinion leaves the decision to the next authorizer; a request that
	// no authorizer allows is refused.
	NoOpinion
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	case NoOpinion:
		return "NoOpinion"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Authorizer decides on one request. The string is a reason, shown to the
// client on denial.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f(ctx, a).
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// AlwaysAllowAuthenticated allows any request whose user is authenticated
// (non-nil, named, and not the anonymous user) and has no opinion otherwise.
// It resolves rules too: everything, for an authenticated user.
var AlwaysAllowAuthenticated Authorizer = alwaysAllowResolver{AuthorizerFunc(alwaysAllowAuthenticated)}

func alwaysAllowAuthenticated(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User == nil || a.User.Name == "" || a.User.Name == authn.Anonymous {
		return NoOpinion, "", nil
	}
	return Allow, "", nil
}

// AlwaysDeny is upstream's AlwaysDeny mode: no opinion on anything (so a
// request nothing else allows is refused), "Everything is forbidden.".
var AlwaysDeny Authorizer = alwaysDeny{}

type alwaysDeny struct{}

func (alwaysDeny) Authorize(context.Context, Attributes) (Decision, string, error) {
	return NoOpinion, "Everything is forbidden.", nil
}

func (alwaysDeny) RulesFor(context.Context, *authn.User, string) ([]rbacv1.PolicyRule, bool, error) {
	return nil, false, nil
}

// RuleResolver lists the rules that apply to a user in a namespace, for
// SelfSubjectRulesReview and the RBAC escalation check. incomplete says an
// authorizer could not list everything it would allow.
type RuleResolver interface {
	RulesFor(ctx context.Context, user *authn.User, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, err error)
}

// alwaysAllowRules is the rule set of AlwaysAllowAuthenticated.
var alwaysAllowRules = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

type alwaysAllowResolver struct{ AuthorizerFunc }

func (alwaysAllowResolver) RulesFor(_ context.Context, user *authn.User, _ string) ([]rbacv1.PolicyRule, bool, error) {
	if user == nil || user.Name == "" || user.Name == authn.Anonymous {
		return nil, false, nil
	}
	return alwaysAllowRules, false, nil
}

// Superuser allows every request of a user in group (upstream:
// system:masters, asked before any mode) and has no opinion otherwise.
func Superuser(group string) Authorizer {
	return AuthorizerFunc(func(_ context.Context, a Attributes) (Decision, string, error) {
		if a.User.InGroup(group) {
			return Allow, "", nil
		}
		return NoOpinion, "", nil
	})
}

// ForbiddenMessage is upstream's wording of a refusal (without the
// authorizer's reason), e.g.
// User "x" cannot list resource "pods" in API group "" in the namespace "y".
func ForbiddenMessage(a Attributes) string {
	name := ""
	if a.User != nil {
		name = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, resource, a.APIGroup)
}

// Union asks each authorizer in order; the first Allow or Deny decides.
// Errors are collected and returned with NoOpinion if nobody decided, with
// the reasons of those that gave one joined by newlines (as upstream). The
// union is a RuleResolver too: it joins the rules of the members that are.
func Union(auths ...Authorizer) Authorizer {
	return union(auths)
}

type union []Authorizer

func (u union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var (
		errs    []error
		reasons []string
	)
	for _, z := range u {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if d == Allow || d == Deny {
			return d, reason, nil
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	reason := ""
	for i, r := range reasons {
		if i > 0 {
			reason += "\n"
		}
		reason += r
	}
	return NoOpinion, reason, errors.Join(errs...)
}

// RulesFor joins the members' rules.
func (u union) RulesFor(ctx context.Context, user *authn.User, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	var (
		rules      []rbacv1.PolicyRule
		incomplete bool
		errs       []error
	)
	for _, z := range u {
		r, ok := z.(RuleResolver)
		if !ok {
			continue
		}
		got, inc, err := r.RulesFor(ctx, user, namespace)
		rules = append(rules, got...)
		incomplete = incomplete || inc
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rules, incomplete, errors.Join(errs...)
}
