package nodeaffinity

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// RequiredAffinity is a pod's hard node constraints: spec.nodeSelector and
// the required node affinity terms (ORed). The zero value matches all.
type RequiredAffinity struct {
	selector labels.Selector
	terms    []v1.NodeSelectorTerm
	hasTerms bool
}

// GetRequiredAffinity reads pod's hard node constraints.
func GetRequiredAffinity(pod *v1.Pod) RequiredAffinity {
	var r RequiredAffinity
	if len(pod.Spec.NodeSelector) > 0 {
		r.selector = labels.SelectorFromSet(pod.Spec.NodeSelector)
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		r.terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		r.hasTerms = true
	}
	return r
}

// Empty reports whether there is nothing to check.
func (r RequiredAffinity) Empty() bool { return r.selector == nil && !r.hasTerms }

// Match reports whether node satisfies the constraints.
func (r RequiredAffinity) Match(node *v1.Node) bool {
	if r.selector != nil && !r.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if r.hasTerms {
		return MatchTerms(r.terms, node)
	}
	return true
}

// MatchTerms reports whether node matches any term. A term with no
// requirement, or one that does not parse, matches nothing.
func MatchTerms(terms []v1.NodeSelectorTerm, node *v1.Node) bool {
	for i := range terms {
		if MatchTerm(&terms[i], node) {
			return true
		}
	}
	return false
}

// MatchTerm reports whether node satisfies every requirement of term.
func MatchTerm(term *v1.NodeSelectorTerm, node *v1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, req := range term.MatchExpressions {
		v, ok := node.Labels[req.Key]
		if m, err := matchRequirement(req, v, ok); err != nil || !m {
			return false
		}
	}
	for _, req := range term.MatchFields {
		if req.Key != "metadata.name" {
			return false
		}
		if m, err := matchRequirement(req, node.Name, true); err != nil || !m {
			return false
		}
	}
	return true
}

func matchRequirement(req v1.NodeSelectorRequirement, value string, present bool) (bool, error) {
	switch req.Operator {
	case v1.NodeSelectorOpIn:
		return present && contains(req.Values, value), nil
	case v1.NodeSelectorOpNotIn:
		return !present || !contains(req.Values, value), nil
	case v1.NodeSelectorOpExists:
		return present, nil
	case v1.NodeSelectorOpDoesNotExist:
		return !present, nil
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			return false, fmt.Errorf("operator %s needs one value", req.Operator)
		}
		want, err := strconv.ParseInt(req.Values[0], 10, 64)
		if err != nil {
			return false, fmt.Errorf("operator %s: %w", req.Operator, err)
		}
		if !present {
			return false, nil
		}
		got, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return false, nil
		}
		if req.Operator == v1.NodeSelectorOpGt {
			return got > want, nil
		}
		return got < want, nil
	}
	return false, fmt.Errorf("unknown operator %q", req.Operator)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
