// Package rbac evaluates rbac.authorization.k8s.io/v1 policy the way
// upstream's RBAC authorizer does: the rules of every ClusterRoleBinding
// and, for a namespaced request, every RoleBinding of the namespace whose
// subjects match the user are visited; the first rule that matches the
// request allows it. Nothing is ever denied: a request no rule allows gets
// NoOpinion, so that the next authorizer may still allow it.
//
// The same visitor answers "what may this user do here?" (RulesFor), for
// SelfSubjectRulesReview and for the escalation check on role and binding
// writes (Covers).
package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// RuleAllows reports whether rule permits the request a. A subresource
// request matches "resource/subresource" or "*/subresource"; resourceNames,
// when set, must contain the request's name; a non-resource rule matches a
// path exactly or by a trailing "*".
func RuleAllows(a authz.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matchesOrAll(rule.Verbs, a.Verb, rbacv1.VerbAll) {
		return false
	}
	if !a.ResourceRequest {
		return nonResourceURLMatches(rule.NonResourceURLs, a.Path)
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	return matchesOrAll(rule.APIGroups, a.APIGroup, rbacv1.APIGroupAll) &&
		resourceMatches(rule.Resources, combined, a.Subresource) &&
		resourceNameMatches(rule.ResourceNames, a.Name)
}

// RulesAllow reports whether any of rules permits a.
func RulesAllow(a authz.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

func matchesOrAll(set []string, v, all string) bool {
	for _, s := range set {
		if s == all || s == v {
			return true
		}
	}
	return false
}

func resourceMatches(resources []string, combined, subresource string) bool {
	for _, r := range resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

func resourceNameMatches(names []string, name string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func nonResourceURLMatches(urls []string, path string) bool {
	for _, u := range urls {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimSuffix(u, "*")):
			return true
		}
	}
	return false
}

// ServiceAccountUsername is the user name of a service account, as
// upstream's token authenticator names it.
func ServiceAccountUsername(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// AppliesTo reports whether subject names user. A ServiceAccount subject
// without a namespace takes the binding's namespace.
func AppliesTo(user *authn.User, subject rbacv1.Subject, namespace string) bool {
	if user == nil {
		return false
	}
	switch subject.Kind {
	case rbacv1.UserKind:
		return user.Name == subject.Name
	case rbacv1.GroupKind:
		return user.InGroup(subject.Name)
	case rbacv1.ServiceAccountKind:
		ns := namespace
		if subject.Namespace != "" {
			ns = subject.Namespace
		}
		return ns != "" && user.Name == ServiceAccountUsername(ns, subject.Name)
	}
	return false
}

func appliesToAny(user *authn.User, subjects []rbacv1.Subject, namespace string) (rbacv1.Subject, bool) {
	for _, s := range subjects {
		if AppliesTo(user, s, namespace) {
			return s, true
		}
	}
	return rbacv1.Subject{}, false
}
