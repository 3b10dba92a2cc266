package framework

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// AffinityTerm is a parsed pod (anti-)affinity term.
type AffinityTerm struct {
	// Namespaces are the namespaces named by the term; when both this and
	// NamespaceSelector are empty, the owning pod's namespace.
	Namespaces        map[string]bool
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector
}

// Matches reports whether pod matches the term. nsLabels are the labels of
// pod's namespace (needed only when the term has a namespace selector).
func (t *AffinityTerm) Matches(pod *v1.Pod, nsLabels labels.Set) bool {
	if t.Namespaces[pod.Namespace] || t.NamespaceSelector.Matches(nsLabels) {
		return t.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// WeightedAffinityTerm is a preferred term with its weight.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// PodInfo is a pod with its affinity terms parsed once.
type PodInfo struct {
	Pod                        *v1.Pod
	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []WeightedAffinityTerm
	PreferredAntiAffinityTerms []WeightedAffinityTerm
}

// NewPodInfo parses pod's affinity. Terms whose selectors do not parse are
// reported as an error; the valid part is still returned.
func NewPodInfo(pod *v1.Pod) (*PodInfo, error) {
	pi := &PodInfo{Pod: pod}
	a := pod.Spec.Affinity
	if a == nil {
		return pi, nil
	}
	var errs []error
	if pa := a.PodAffinity; pa != nil {
		pi.RequiredAffinityTerms, errs = parseTerms(pod, pa.RequiredDuringSchedulingIgnoredDuringExecution, errs)
		pi.PreferredAffinityTerms, errs = parseWeighted(pod, pa.PreferredDuringSchedulingIgnoredDuringExecution, errs)
	}
	if paa := a.PodAntiAffinity; paa != nil {
		pi.RequiredAntiAffinityTerms, errs = parseTerms(pod, paa.RequiredDuringSchedulingIgnoredDuringExecution, errs)
		pi.PreferredAntiAffinityTerms, errs = parseWeighted(pod, paa.PreferredDuringSchedulingIgnoredDuringExecution, errs)
	}
	if len(errs) > 0 {
		return pi, fmt.Errorf("parse affinity of pod %s/%s: %w", pod.Namespace, pod.Name, errs[0])
	}
	return pi, nil
}

// MustPodInfo is NewPodInfo ignoring selector errors (the API server
// validated them).
func MustPodInfo(pod *v1.Pod) *PodInfo {
	pi, _ := NewPodInfo(pod)
	return pi
}

// NewAffinityTerm parses one term of pod.
func NewAffinityTerm(pod *v1.Pod, term *v1.PodAffinityTerm) (AffinityTerm, error) {
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return AffinityTerm{}, err
	}
	// matchLabelKeys/mismatchLabelKeys add the incoming pod's own values.
	for _, k := range term.MatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, "in", []string{v})
			if err != nil {
				return AffinityTerm{}, err
			}
			sel = sel.Add(*r)
		}
	}
	for _, k := range term.MismatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			r, err := labels.NewRequirement(k, "notin", []string{v})
			if err != nil {
				return AffinityTerm{}, err
			}
			sel = sel.Add(*r)
		}
	}
	ns := map[string]bool{}
	for _, n := range term.Namespaces {
		ns[n] = true
	}
	nsSel := labels.Nothing()
	if term.NamespaceSelector != nil {
		nsSel, err = metav1.LabelSelectorAsSelector(term.NamespaceSelector)
		if err != nil {
			return AffinityTerm{}, err
		}
	}
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		ns[pod.Namespace] = true
	}
	return AffinityTerm{Namespaces: ns, Selector: sel, TopologyKey: term.TopologyKey, NamespaceSelector: nsSel}, nil
}

func parseTerms(pod *v1.Pod, terms []v1.PodAffinityTerm, errs []error) ([]AffinityTerm, []error) {
	var out []AffinityTerm
	for i := range terms {
		t, err := NewAffinityTerm(pod, &terms[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	return out, errs
}

func parseWeighted(pod *v1.Pod, terms []v1.WeightedPodAffinityTerm, errs []error) ([]WeightedAffinityTerm, []error) {
	var out []WeightedAffinityTerm
	for i := range terms {
		t, err := NewAffinityTerm(pod, &terms[i].PodAffinityTerm)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, WeightedAffinityTerm{AffinityTerm: t, Weight: terms[i].Weight})
	}
	return out, errs
}

// QueuedPodInfo is a pod in the scheduling queue.
type QueuedPodInfo struct {
	*PodInfo
	// Timestamp is when the pod was added to the queue (or last moved).
	Timestamp time.Time
	// Attempts counts scheduling attempts.
	Attempts int
	// InitialAttemptTimestamp is the first attempt, for the e2e latency.
	InitialAttemptTimestamp *time.Time
	// UnschedulablePlugins are the plugins that rejected the pod last time.
	UnschedulablePlugins map[string]bool
}

// PodPriority returns spec.priority, or 0.
func PodPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}
