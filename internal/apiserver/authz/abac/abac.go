// Package abac is the ABAC authorization mode (--authorization-mode=ABAC
// with --authorization-policy-file): upstream's policy file of one JSON
// object a line, either
//
//	{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
//	 "spec": {"user": "alice", "namespace": "ns", "resource": "*", "apiGroup": "*", "readonly": true}}
//
// or the unversioned (v0) form {"user": "alice", "namespace": "ns",
// "resource": "pods", "readonly": true}, which applies to every API group
// (and, without namespace and resource, to every path). Blank lines and
// lines starting with # are skipped. A request is allowed when any policy
// matches it: subject (user, group, "*" meaning every authenticated user),
// readonly (only get, list, watch), and either namespace, resource and
// apiGroup ("*" for any) of a resource request, or nonResourcePath (exact,
// "*", or a prefix ending in "*") of another path. Nothing matching is no
// opinion ("No policy matched.").
package abac

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// APIVersion and Kind of a versioned policy line.
const (
	APIVersion = "abac.authorization.kubernetes.io/v1beta1"
	Kind       = "Policy"
)

const allAuthenticated = "system:authenticated"

// Spec is one policy (v1beta1 PolicySpec).
type Spec struct {
	User            string `json:"user,omitempty"`
	Group           string `json:"group,omitempty"`
	Readonly        bool   `json:"readonly,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	NonResourcePath string `json:"nonResourcePath,omitempty"`
}

// line is either form of a policy line.
type line struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       *Spec  `json:"spec"`
	// v0 fields.
	User      string `json:"user"`
	Group     string `json:"group"`
	Readonly  bool   `json:"readonly"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
}

// Authorizer is a loaded policy file.
type Authorizer struct {
	policies []Spec
}

// Load reads a policy file.
func Load(path string) (*Authorizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("error reading policy file %s, %w", path, err)
	}
	return a, nil
}

// Parse reads policies from the file's bytes.
func Parse(data []byte) (*Authorizer, error) {
	a := &Authorizer{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var l line
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, text, err)
		}
		var p Spec
		switch {
		case l.APIVersion == "" && l.Kind == "":
			p = fromV0(l)
		case l.APIVersion == APIVersion && l.Kind == Kind:
			if l.Spec == nil {
				return nil, fmt.Errorf("line %d: %s: a %s Policy needs a spec", n, text, APIVersion)
			}
			p = *l.Spec
			if p.User == "*" || p.Group == "*" {
				p.Group, p.User = allAuthenticated, ""
			}
		default:
			return nil, fmt.Errorf("line %d: %s: unknown apiVersion %q and kind %q (want %s Policy)", n, text, l.APIVersion, l.Kind, APIVersion)
		}
		a.policies = append(a.policies, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// fromV0 converts an unversioned line as upstream does.
func fromV0(l line) Spec {
	p := Spec{User: l.User, Group: l.Group, Namespace: l.Namespace, Resource: l.Resource, Readonly: l.Readonly, APIGroup: "*"}
	if l.User == "" && l.Group == "" {
		p.Group = allAuthenticated
	}
	if l.User == "*" || l.Group == "*" {
		p.Group, p.User = allAuthenticated, ""
	}
	if l.Namespace == "" {
		p.Namespace = "*"
	}
	if l.Resource == "" {
		p.Resource = "*"
	}
	if l.Namespace == "" && l.Resource == "" {
		p.NonResourcePath = "*"
	}
	return p
}

// Policies returns the loaded policies, in file order.
func (a *Authorizer) Policies() []Spec { return a.policies }

// Authorize allows a request any policy matches.
func (a *Authorizer) Authorize(_ context.Context, at authz.Attributes) (authz.Decision, string, error) {
	for _, p := range a.policies {
		if subjectMatches(p, at.User) && (!p.Readonly || readOnly(at.Verb)) &&
			(resourceMatches(p, at) || nonResourceMatches(p, at)) {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "No policy matched.", nil
}

func readOnly(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

// subjectMatches: a policy naming a user must name this one, one naming a
// group must name one of the user's; a policy naming neither matches no one.
func subjectMatches(p Spec, u *authn.User) bool {
	if u == nil {
		return false
	}
	matched := false
	if p.User != "" {
		if p.User != "*" && p.User != u.Name {
			return false
		}
		matched = true
	}
	if p.Group != "" {
		if p.Group != "*" && !u.InGroup(p.Group) {
			return false
		}
		matched = true
	}
	return matched
}

func resourceMatches(p Spec, a authz.Attributes) bool {
	return a.ResourceRequest &&
		(p.Namespace == "*" || p.Namespace == a.Namespace) &&
		(p.Resource == "*" || p.Resource == a.Resource) &&
		(p.APIGroup == "*" || p.APIGroup == a.APIGroup)
}

func nonResourceMatches(p Spec, a authz.Attributes) bool {
	if a.ResourceRequest || p.NonResourcePath == "" {
		return false
	}
	if p.NonResourcePath == "*" || p.NonResourcePath == a.Path {
		return true
	}
	prefix, ok := strings.CutSuffix(p.NonResourcePath, "*")
	return ok && strings.HasPrefix(a.Path, prefix)
}

// RulesFor lists the rules the policies give user in namespace, for
// SelfSubjectRulesReview (as upstream: every verb, or get, list and watch
// for read-only policies).
func (a *Authorizer) RulesFor(_ context.Context, user *authn.User, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	var rules []rbacv1.PolicyRule
	for _, p := range a.policies {
		if !subjectMatches(p, user) || (p.Namespace != "*" && p.Namespace != namespace) {
			continue
		}
		verbs := []string{"*"}
		if p.Readonly {
			verbs = []string{"get", "list", "watch"}
		}
		if p.Resource != "" {
			rules = append(rules, rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{p.APIGroup}, Resources: []string{p.Resource}})
		}
		if p.NonResourcePath != "" {
			rules = append(rules, rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: []string{p.NonResourcePath}})
		}
	}
	return rules, false, nil
}
