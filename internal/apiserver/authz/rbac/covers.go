package rbac

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether the owner's rules grant everything the servant's
// rules grant, and lists the servant's rules (broken down to one verb, group,
// resource and name each) that they do not. It is the escalation check: a
// user may only write a role, or bind one, whose rules it already holds.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var owned []rbacv1.PolicyRule
	for _, r := range owner {
		owned = append(owned, Breakdown(r)...)
	}
	var missing []rbacv1.PolicyRule
	for _, r := range servant {
		for _, sub := range Breakdown(r) {
			covered := false
			for _, o := range owned {
				if ruleCovers(o, sub) {
					covered = true
					break
				}
			}
			if !covered {
				missing = append(missing, sub)
			}
		}
	}
	return len(missing) == 0, missing
}

// Breakdown splits a rule into rules of one verb, API group, resource and
// resource name (or non-resource URL) each.
func Breakdown(rule rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, g := range rule.APIGroups {
		for _, res := range rule.Resources {
			for _, v := range rule.Verbs {
				if len(rule.ResourceNames) == 0 {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}})
					continue
				}
				for _, n := range rule.ResourceNames {
					out = append(out, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, ResourceNames: []string{n}, Verbs: []string{v}})
				}
			}
		}
	}
	for _, u := range rule.NonResourceURLs {
		for _, v := range rule.Verbs {
			out = append(out, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return out
}

func ruleCovers(owner, sub rbacv1.PolicyRule) bool {
	names := len(owner.ResourceNames) == 0 || (len(sub.ResourceNames) > 0 && hasAll(owner.ResourceNames, sub.ResourceNames))
	return (has(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)) &&
		(has(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)) &&
		resourcesCover(owner.Resources, sub.Resources) &&
		urlsCover(owner.NonResourceURLs, sub.NonResourceURLs) &&
		names
}

func resourcesCover(owner, sub []string) bool {
	if has(owner, rbacv1.ResourceAll) {
		return true
	}
	for _, r := range sub {
		if has(owner, r) {
			continue
		}
		_, subresource, ok := strings.Cut(r, "/")
		if !ok || !has(owner, "*/"+subresource) {
			return false
		}
	}
	return true
}

func urlsCover(owner, sub []string) bool {
	for _, p := range sub {
		covered := false
		for _, o := range owner {
			if o == p || (strings.HasSuffix(o, "*") && strings.HasPrefix(p, strings.TrimSuffix(o, "*"))) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

func has(set []string, v string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !has(set, w) {
			return false
		}
	}
	return true
}
