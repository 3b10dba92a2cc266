// Package interpodaffinity filters and scores nodes by pod (anti-)affinity:
// the incoming pod's required and preferred terms against the pods already
// placed, by topology domain, and the placed pods' terms against the
// incoming pod (an existing pod's required anti-affinity keeps matching
// pods out of its domain).
package interpodaffinity

import (
	"context"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "InterPodAffinity"

// Upstream's failure reasons.
const (
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	ErrReasonAffinityRulesNotMatch             = "node(s) didn't match pod affinity rules"
	ErrReasonAntiAffinityRulesNotMatch         = "node(s) didn't match pod anti-affinity rules"
)

const (
	preFilterKey framework.StateKey = "PreFilter" + Name
	preScoreKey  framework.StateKey = "PreScore" + Name
)

// Args are InterPodAffinityArgs.
type Args struct {
	// HardPodAffinityWeight is the score weight of an existing pod's
	// required affinity term that the incoming pod matches (default 1).
	HardPodAffinityWeight *int32 `json:"hardPodAffinityWeight,omitempty"`
	// IgnorePreferredTermsOfExistingPods skips existing pods' preferred
	// terms when scoring.
	IgnorePreferredTermsOfExistingPods bool `json:"ignorePreferredTermsOfExistingPods,omitempty"`
}

// InterPodAffinity is the plugin.
type InterPodAffinity struct {
	handle         framework.Handle
	hardWeight     int32
	ignoreExisting bool
	nsLister       corelisters.NamespaceLister
}

var (
	_ framework.PreFilterPlugin     = (*InterPodAffinity)(nil)
	_ framework.PreFilterExtensions = (*InterPodAffinity)(nil)
	_ framework.FilterPlugin        = (*InterPodAffinity)(nil)
	_ framework.PreScorePlugin      = (*InterPodAffinity)(nil)
	_ framework.ScorePlugin         = (*InterPodAffinity)(nil)
	_ framework.ScoreExtensions     = (*InterPodAffinity)(nil)
)

// New builds the plugin.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	a := Args{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	pl := &InterPodAffinity{handle: h, hardWeight: 1, ignoreExisting: a.IgnorePreferredTermsOfExistingPods}
	if a.HardPodAffinityWeight != nil {
		pl.hardWeight = *a.HardPodAffinityWeight
	}
	if f := h.SharedInformerFactory(); f != nil {
		pl.nsLister = f.Core().V1().Namespaces().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*InterPodAffinity) Name() string { return Name }

func (pl *InterPodAffinity) nsLabels(ns string) labels.Set {
	if pl.nsLister == nil {
		return labels.Set{}
	}
	n, err := pl.nsLister.Get(ns)
	if err != nil {
		return labels.Set{}
	}
	return labels.Set(n.Labels)
}

type topologyPair struct{ key, value string }

type topologyCounts map[topologyPair]int64

func (c topologyCounts) add(term *framework.AffinityTerm, node *v1.Node, n int64) {
	if v, ok := node.Labels[term.TopologyKey]; ok {
		p := topologyPair{term.TopologyKey, v}
		c[p] += n
		if c[p] == 0 {
			delete(c, p)
		}
	}
}

func (c topologyCounts) clone() topologyCounts {
	out := make(topologyCounts, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

type preFilterState struct {
	// existingAnti counts, per domain, placed pods whose required
	// anti-affinity the incoming pod matches.
	existingAnti topologyCounts
	// affinity counts, per domain, placed pods matching all the incoming
	// pod's required affinity terms.
	affinity topologyCounts
	// anti counts, per domain, placed pods matching the incoming pod's
	// required anti-affinity terms.
	anti     topologyCounts
	podInfo  *framework.PodInfo
	nsLabels labels.Set
}

func (s *preFilterState) Clone() framework.StateData {
	return &preFilterState{existingAnti: s.existingAnti.clone(), affinity: s.affinity.clone(), anti: s.anti.clone(), podInfo: s.podInfo, nsLabels: s.nsLabels}
}

// PreFilter counts the matching pods per topology domain; Skip when
// neither the pod nor any placed pod has required (anti-)affinity.
func (pl *InterPodAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	withAnti := lister.HavePodsWithRequiredAntiAffinityList()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	if len(pi.RequiredAffinityTerms) == 0 && len(pi.RequiredAntiAffinityTerms) == 0 && len(withAnti) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	s := &preFilterState{existingAnti: topologyCounts{}, affinity: topologyCounts{}, anti: topologyCounts{}, podInfo: pi, nsLabels: pl.nsLabels(pod.Namespace)}
	for _, ni := range withAnti {
		for _, existing := range ni.PodsWithRequiredAntiAffinity {
			s.addExistingAnti(existing, ni.Node(), 1)
		}
	}
	if len(pi.RequiredAffinityTerms) > 0 || len(pi.RequiredAntiAffinityTerms) > 0 {
		for _, ni := range lister.List() {
			for _, existing := range ni.Pods {
				s.addIncoming(existing, ni.Node(), 1, pl.nsLabels(existing.Pod.Namespace))
			}
		}
	}
	state.Write(preFilterKey, s)
	return nil, nil
}

func (s *preFilterState) addExistingAnti(existing *framework.PodInfo, node *v1.Node, n int64) {
	for i := range existing.RequiredAntiAffinityTerms {
		t := &existing.RequiredAntiAffinityTerms[i]
		if t.Matches(s.podInfo.Pod, s.nsLabels) {
			s.existingAnti.add(t, node, n)
		}
	}
}

func (s *preFilterState) addIncoming(existing *framework.PodInfo, node *v1.Node, n int64, existingNSLabels labels.Set) {
	terms := s.podInfo.RequiredAffinityTerms
	if len(terms) > 0 && matchesAll(terms, existing.Pod, existingNSLabels) {
		for i := range terms {
			s.affinity.add(&terms[i], node, n)
		}
	}
	for i := range s.podInfo.RequiredAntiAffinityTerms {
		t := &s.podInfo.RequiredAntiAffinityTerms[i]
		if t.Matches(existing.Pod, existingNSLabels) {
			s.anti.add(t, node, n)
		}
	}
}

func matchesAll(terms []framework.AffinityTerm, pod *v1.Pod, nsLabels labels.Set) bool {
	for i := range terms {
		if !terms[i].Matches(pod, nsLabels) {
			return false
		}
	}
	return true
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *InterPodAffinity) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod updates the counts as if the pod were placed on the node.
func (pl *InterPodAffinity) AddPod(_ context.Context, state *framework.CycleState, _ *v1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, add, ni, 1)
}

// RemovePod updates the counts as if the pod were removed from the node.
func (pl *InterPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, _ *v1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, remove, ni, -1)
}

func (pl *InterPodAffinity) update(state *framework.CycleState, pi *framework.PodInfo, ni *framework.NodeInfo, n int64) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.addExistingAnti(pi, ni.Node(), n)
	s.addIncoming(pi, ni.Node(), n, pl.nsLabels(pi.Pod.Namespace))
	return nil
}

// Filter implements framework.FilterPlugin.
func (pl *InterPodAffinity) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	for k, v := range node.Labels {
		if s.existingAnti[topologyPair{k, v}] > 0 {
			return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
		}
	}
	for i := range s.podInfo.RequiredAntiAffinityTerms {
		t := &s.podInfo.RequiredAntiAffinityTerms[i]
		if v, ok := node.Labels[t.TopologyKey]; ok && s.anti[topologyPair{t.TopologyKey, v}] > 0 {
			return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
		}
	}
	if !s.satisfiesAffinity(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	}
	return nil
}

func (s *preFilterState) satisfiesAffinity(node *v1.Node) bool {
	terms := s.podInfo.RequiredAffinityTerms
	all := true
	for i := range terms {
		v, ok := node.Labels[terms[i].TopologyKey]
		if !ok {
			return false
		}
		if s.affinity[topologyPair{terms[i].TopologyKey, v}] <= 0 {
			all = false
		}
	}
	if all {
		return true
	}
	// No placed pod matches at all: the first pod of a group that has
	// affinity to itself may go anywhere its topology keys exist.
	return len(s.affinity) == 0 && matchesAll(terms, s.podInfo.Pod, s.nsLabels)
}

type preScoreState struct {
	scores  map[string]map[string]int64 // topology key → value → score
	podInfo *framework.PodInfo
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore sums, per topology domain, the weights of the terms between
// the incoming pod and the placed pods. Skip when there are none.
func (pl *InterPodAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	lister := pl.handle.SnapshotSharedLister().NodeInfos()
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	hasPreferred := len(pi.PreferredAffinityTerms) > 0 || len(pi.PreferredAntiAffinityTerms) > 0
	nodes := lister.HavePodsWithAffinityList()
	if hasPreferred {
		nodes = lister.List()
	}
	if !hasPreferred && len(nodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preScoreState{scores: map[string]map[string]int64{}, podInfo: pi}
	incomingNS := pl.nsLabels(pod.Namespace)
	add := func(t *framework.AffinityTerm, node *v1.Node, w int64) {
		v, ok := node.Labels[t.TopologyKey]
		if !ok || w == 0 {
			return
		}
		if s.scores[t.TopologyKey] == nil {
			s.scores[t.TopologyKey] = map[string]int64{}
		}
		s.scores[t.TopologyKey][v] += w
	}
	for _, ni := range nodes {
		podsToCheck := ni.PodsWithAffinity
		if hasPreferred {
			podsToCheck = ni.Pods
		}
		for _, existing := range podsToCheck {
			existingNS := pl.nsLabels(existing.Pod.Namespace)
			// The incoming pod's preferences about the placed pod.
			for i := range pi.PreferredAffinityTerms {
				t := &pi.PreferredAffinityTerms[i]
				if t.Matches(existing.Pod, existingNS) {
					add(&t.AffinityTerm, ni.Node(), int64(t.Weight))
				}
			}
			for i := range pi.PreferredAntiAffinityTerms {
				t := &pi.PreferredAntiAffinityTerms[i]
				if t.Matches(existing.Pod, existingNS) {
					add(&t.AffinityTerm, ni.Node(), -int64(t.Weight))
				}
			}
			// The placed pod's rules about the incoming pod.
			if pl.hardWeight > 0 {
				for i := range existing.RequiredAffinityTerms {
					t := &existing.RequiredAffinityTerms[i]
					if t.Matches(pod, incomingNS) {
						add(t, ni.Node(), int64(pl.hardWeight))
					}
				}
			}
			if pl.ignoreExisting {
				continue
			}
			for i := range existing.PreferredAffinityTerms {
				t := &existing.PreferredAffinityTerms[i]
				if t.Matches(pod, incomingNS) {
					add(&t.AffinityTerm, ni.Node(), int64(t.Weight))
				}
			}
			for i := range existing.PreferredAntiAffinityTerms {
				t := &existing.PreferredAntiAffinityTerms[i]
				if t.Matches(pod, incomingNS) {
					add(&t.AffinityTerm, ni.Node(), -int64(t.Weight))
				}
			}
		}
	}
	state.Write(preScoreKey, s)
	return nil
}

// Score sums the scores of the node's topology domains.
func (pl *InterPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	for key, byValue := range s.scores {
		if v, ok := ni.Node().Labels[key]; ok {
			score += byValue[v]
		}
	}
	return score, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *InterPodAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps [min, max] onto [0, MaxNodeScore].
func (pl *InterPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(s.scores) == 0 {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, sc := range scores {
		lo, hi = min(lo, sc.Score), max(hi, sc.Score)
	}
	diff := hi - lo
	for i := range scores {
		if diff > 0 {
			scores[i].Score = framework.MaxNodeScore * (scores[i].Score - lo) / diff
		} else {
			scores[i].Score = 0
		}
	}
	return nil
}
