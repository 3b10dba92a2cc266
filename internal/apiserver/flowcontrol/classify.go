package flowcontrol

import (
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// matches says whether the flow schema's rules take the request (the
// schema's rules are ORed; within one rule a subject and a resource or
// non-resource rule must match), as upstream.
func matches(fs *flowcontrolv1.FlowSchema, r Request) bool {
	for i := range fs.Spec.Rules {
		rule := &fs.Spec.Rules[i]
		if !matchesSubject(rule.Subjects, r) {
			continue
		}
		if r.ResourceRequest {
			for _, rr := range rule.ResourceRules {
				if matchesResource(rr, r) {
					return true
				}
			}
			continue
		}
		for _, nr := range rule.NonResourceRules {
			if matchesNonResource(nr, r) {
				return true
			}
		}
	}
	return false
}

const serviceAccountPrefix = "system:serviceaccount:"

func matchesSubject(subjects []flowcontrolv1.Subject, r Request) bool {
	for _, s := range subjects {
		switch s.Kind {
		case flowcontrolv1.SubjectKindUser:
			if s.User != nil && (s.User.Name == flowcontrolv1.NameAll || s.User.Name == r.User) {
				return true
			}
		case flowcontrolv1.SubjectKindGroup:
			if s.Group == nil {
				continue
			}
			if s.Group.Name == flowcontrolv1.NameAll {
				return true
			}
			for _, g := range r.Groups {
				if g == s.Group.Name {
					return true
				}
			}
		case flowcontrolv1.SubjectKindServiceAccount:
			sa := s.ServiceAccount
			if sa == nil || !strings.HasPrefix(r.User, serviceAccountPrefix) {
				continue
			}
			ns, name, ok := strings.Cut(strings.TrimPrefix(r.User, serviceAccountPrefix), ":")
			if ok && ns == sa.Namespace && (sa.Name == flowcontrolv1.NameAll || sa.Name == name) {
				return true
			}
		}
	}
	return false
}

// contains says x is in list, or list is the lone wildcard.
func contains(list []string, x, wildcard string) bool {
	for _, y := range list {
		if y == x || y == wildcard {
			return true
		}
	}
	return false
}

func matchesResource(rule flowcontrolv1.ResourcePolicyRule, r Request) bool {
	if !contains(rule.Verbs, r.Verb, flowcontrolv1.VerbAll) {
		return false
	}
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if !contains(rule.Resources, res, flowcontrolv1.ResourceAll) {
		return false
	}
	if !contains(rule.APIGroups, r.APIGroup, flowcontrolv1.APIGroupAll) {
		return false
	}
	if r.Namespace == "" {
		return rule.ClusterScope
	}
	return contains(rule.Namespaces, r.Namespace, flowcontrolv1.NamespaceEvery)
}

func matchesNonResource(rule flowcontrolv1.NonResourcePolicyRule, r Request) bool {
	if !contains(rule.Verbs, r.Verb, flowcontrolv1.VerbAll) {
		return false
	}
	for _, u := range rule.NonResourceURLs {
		if u == flowcontrolv1.NonResourceAll || u == r.Path {
			return true
		}
		prefix := strings.TrimSuffix(u, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(r.Path, prefix) {
			return true
		}
	}
	return false
}

// flowDistinguisher is the part of the flow that the schema's
// distinguisher method takes from the request.
func flowDistinguisher(fs *flowcontrolv1.FlowSchema, r Request) string {
	if fs.Spec.DistinguisherMethod == nil {
		return ""
	}
	switch fs.Spec.DistinguisherMethod.Type {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		return r.User
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return r.Namespace
	}
	return ""
}

// shuffleShard deals a hand of handSize distinct queue indices out of
// deckSize from the hash, as upstream's dealer: each card is picked from
// the cards left, using the hash as a mixed-radix number.
func shuffleShard(hash uint64, deckSize, handSize int) []int {
	hand := make([]int, 0, handSize)
	for i := 0; i < handSize && i < deckSize; i++ {
		n := uint64(deckSize - i)
		idx := int(hash % n)
		hash /= n
		// idx counts the cards not dealt yet: skip the dealt ones, in
		// increasing order.
		for _, c := range sortedCopy(hand) {
			if idx >= c {
				idx++
			}
		}
		hand = append(hand, idx)
	}
	return hand
}

func sortedCopy(xs []int) []int {
	out := append([]int(nil), xs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
