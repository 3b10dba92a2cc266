// Package nodeaffinity filters nodes by the pod's nodeSelector and
// required node affinity, and scores them by its preferred node affinity.
package nodeaffinity

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeAffinity"

// Upstream's failure reasons.
const (
	ErrReasonPod      = "node(s) didn't match Pod's node affinity/selector"
	ErrReasonEnforced = "node(s) didn't match scheduler-enforced node affinity"
	ErrReasonConflict = "pod affinity terms conflict"
	preFilterKey      = framework.StateKey("PreFilter" + Name)
	preScoreKey       = framework.StateKey("PreScore" + Name)
	metadataNameField = "metadata.name"
)

// Args are the plugin's args (NodeAffinityArgs upstream).
type Args struct {
	// AddedAffinity applies to every pod of the profile, on top of the
	// pod's own.
	AddedAffinity *v1.NodeAffinity `json:"addedAffinity,omitempty"`
}

// NodeAffinity is the plugin.
type NodeAffinity struct {
	addedRequired  []v1.NodeSelectorTerm
	hasAdded       bool
	addedPreferred []v1.PreferredSchedulingTerm
}

var (
	_ framework.PreFilterPlugin = (*NodeAffinity)(nil)
	_ framework.FilterPlugin    = (*NodeAffinity)(nil)
	_ framework.PreScorePlugin  = (*NodeAffinity)(nil)
	_ framework.ScorePlugin     = (*NodeAffinity)(nil)
	_ framework.ScoreExtensions = (*NodeAffinity)(nil)
)

// New builds the plugin.
func New(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	var a Args
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	pl := &NodeAffinity{}
	if a.AddedAffinity != nil {
		if r := a.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			pl.addedRequired, pl.hasAdded = r.NodeSelectorTerms, true
		}
		pl.addedPreferred = a.AddedAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return Name }

type preFilterState struct{ required RequiredAffinity }

func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter reads the pod's constraints; Skip when there are none. When
// every required term names nodes by metadata.name, only those nodes are
// evaluated.
func (pl *NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	req := GetRequiredAffinity(pod)
	if req.Empty() && !pl.hasAdded {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, &preFilterState{required: req})
	if !req.hasTerms {
		return nil, nil
	}
	var names map[string]bool
	for _, t := range req.terms {
		termNames := namesOf(t)
		if termNames == nil {
			return nil, nil // some term is not restricted to names
		}
		if names == nil {
			names = map[string]bool{}
		}
		for n := range termNames {
			names[n] = true
		}
	}
	if names != nil && len(names) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
	}
	return &framework.PreFilterResult{NodeNames: names}, nil
}

// namesOf returns the node names a term allows through metadata.name In
// requirements, or nil if it does not restrict names.
func namesOf(t v1.NodeSelectorTerm) map[string]bool {
	var out map[string]bool
	for _, r := range t.MatchFields {
		if r.Key != metadataNameField || r.Operator != v1.NodeSelectorOpIn {
			continue
		}
		set := map[string]bool{}
		for _, v := range r.Values {
			if out == nil || out[v] {
				set[v] = true
			}
		}
		out = set
	}
	return out
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*NodeAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (pl *NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	node := ni.Node()
	if pl.hasAdded && !MatchTerms(pl.addedRequired, node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonEnforced)
	}
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		s = &preFilterState{required: GetRequiredAffinity(pod)}
	}
	if !s.required.Match(node) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	}
	return nil
}

type preScoreState struct{ preferred []v1.PreferredSchedulingTerm }

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore collects the preferred terms; Skip when there are none.
func (pl *NodeAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	preferred := append([]v1.PreferredSchedulingTerm(nil), pl.addedPreferred...)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		preferred = append(preferred, a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	}
	if len(preferred) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreKey, &preScoreState{preferred: preferred})
	return nil
}

// Score sums the weights of the preferred terms the node matches.
func (pl *NodeAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	for i := range s.preferred {
		t := &s.preferred[i]
		if t.Weight != 0 && MatchTerm(&t.Preference, ni.Node()) {
			score += int64(t.Weight)
		}
	}
	return score, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *NodeAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore scales the highest sum to MaxNodeScore.
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
	return nil
}
