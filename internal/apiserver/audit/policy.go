// Package audit writes upstream's audit log: for each request that the
// audit Policy (audit.k8s.io/v1, --audit-policy-file) gives a level above
// None, audit.k8s.io/v1 Events as JSON lines at the stages the policy keeps
// (RequestReceived, ResponseStarted for watches, ResponseComplete, Panic),
// to a file rotated by size (--audit-log-path, --audit-log-maxsize,
// --audit-log-maxbackup, --audit-log-maxage) or to stdout ("-").
//
// The handler chain calls Auditor.Begin after authentication and
// Request.End when the response is done; Begin answers nil when nothing is
// audited.
package audit

import (
	"fmt"
	"os"
	"slices"
	"strings"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// Policy is a parsed audit policy: the first matching rule decides, and a
// request no rule matches is not audited (level None), as upstream.
type Policy struct {
	rules []auditv1.PolicyRule
	// omit are the policy's own omitStages (for requests no rule matches).
	omit []auditv1.Stage
}

// LoadPolicy reads an audit.k8s.io/v1 Policy file.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy parses and checks a Policy.
func ParsePolicy(data []byte) (*Policy, error) {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, err
	}
	if p.Kind != "Policy" || p.APIVersion != "audit.k8s.io/v1" {
		return nil, fmt.Errorf("got %s %q, want audit.k8s.io/v1 Policy", p.APIVersion, p.Kind)
	}
	if len(p.Rules) == 0 {
		return nil, fmt.Errorf("rules: Required value: at least one rule is required")
	}
	for i, r := range p.Rules {
		switch r.Level {
		case auditv1.LevelNone, auditv1.LevelMetadata, auditv1.LevelRequest, auditv1.LevelRequestResponse:
		default:
			return nil, fmt.Errorf("rules[%d].level: Unsupported value: %q: supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\"", i, r.Level)
		}
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			return nil, fmt.Errorf("rules[%d].nonResourceURLs: Invalid value: rules cannot apply to both regular resources and non-resource URLs", i)
		}
		for _, s := range r.OmitStages {
			if err := checkStage(s); err != nil {
				return nil, fmt.Errorf("rules[%d].omitStages: %w", i, err)
			}
		}
		// Upstream adds the policy's omitStages to every rule.
		for _, s := range p.OmitStages {
			if !slices.Contains(r.OmitStages, s) {
				p.Rules[i].OmitStages = append(p.Rules[i].OmitStages, s)
			}
		}
	}
	for _, s := range p.OmitStages {
		if err := checkStage(s); err != nil {
			return nil, fmt.Errorf("omitStages: %w", err)
		}
	}
	return &Policy{rules: p.Rules, omit: p.OmitStages}, nil
}

func checkStage(s auditv1.Stage) error {
	switch s {
	case auditv1.StageRequestReceived, auditv1.StageResponseStarted, auditv1.StageResponseComplete, auditv1.StagePanic:
		return nil
	}
	return fmt.Errorf("Unsupported value: %q", s)
}

// Attributes describe a request for the policy.
type Attributes struct {
	User            *authn.User
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
	Path            string
	ResourceRequest bool
}

// Decide is the level and the omitted stages of a request.
func (p *Policy) Decide(a Attributes) (auditv1.Level, []auditv1.Stage) {
	for i := range p.rules {
		if ruleMatches(&p.rules[i], a) {
			return p.rules[i].Level, p.rules[i].OmitStages
		}
	}
	return auditv1.LevelNone, p.omit
}

func ruleMatches(r *auditv1.PolicyRule, a Attributes) bool {
	if len(r.Users) > 0 && (a.User == nil || !slices.Contains(r.Users, a.User.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 {
		if a.User == nil || !slices.ContainsFunc(a.User.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) }) {
			return false
		}
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Namespaces) > 0 || len(r.Resources) > 0 {
		return resourceMatches(r, a)
	}
	if len(r.NonResourceURLs) > 0 {
		if a.ResourceRequest {
			return false
		}
		for _, spec := range r.NonResourceURLs {
			if spec == "*" || spec == a.Path || (strings.HasSuffix(spec, "*") && strings.HasPrefix(a.Path, strings.TrimRight(spec, "*"))) {
				return true
			}
		}
		return false
	}
	return true
}

func resourceMatches(r *auditv1.PolicyRule, a Attributes) bool {
	if !a.ResourceRequest {
		return false
	}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, a.Namespace) {
		return false
	}
	if len(r.Resources) == 0 {
		return true
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, gr := range r.Resources {
		if gr.Group != a.APIGroup && gr.Group != "*" {
			continue
		}
		if len(gr.Resources) == 0 {
			return true
		}
		if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, a.Name) {
			continue
		}
		for _, res := range gr.Resources {
			switch {
			case res == combined || res == "*":
				return true
			case a.Subresource != "" && strings.HasPrefix(res, "*/") && a.Subresource == strings.TrimPrefix(res, "*/"):
				return true
			case strings.HasSuffix(res, "/*") && a.Resource == strings.TrimSuffix(res, "/*"):
				return true
			}
		}
	}
	return false
}
