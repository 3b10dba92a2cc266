package noderesources

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

const balancedPreScoreKey framework.StateKey = "PreScore" + BalancedAllocationName

// BalancedAllocation is NodeResourcesBalancedAllocation: score = (1 - the
// standard deviation of the requested fractions) × MaxNodeScore.
type BalancedAllocation struct {
	scorer allocationScorer
}

var (
	_ framework.PreScorePlugin = (*BalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*BalancedAllocation)(nil)
)

// NewBalancedAllocation builds the plugin.
func NewBalancedAllocation(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a := BalancedAllocationArgs{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	if len(a.Resources) == 0 {
		a.Resources = defaultResources()
	}
	for i := range a.Resources {
		if a.Resources[i].Weight == 0 {
			a.Resources[i].Weight = 1
		}
	}
	if err := validateResources(a.Resources); err != nil {
		return nil, fmt.Errorf("%s args: %w", BalancedAllocationName, err)
	}
	return &BalancedAllocation{scorer: allocationScorer{resources: a.Resources, useRequested: true, scorer: scorer{kind: balanced}}}, nil
}

// Name implements framework.Plugin.
func (*BalancedAllocation) Name() string { return BalancedAllocationName }

// PreScore computes the pod's requests; Skip for a pod requesting nothing
// (so that best-effort pods do not all pile onto one node).
func (b *BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	reqs := b.scorer.podRequests(pod)
	if !slices.ContainsFunc(reqs, func(v int64) bool { return v != 0 }) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(balancedPreScoreKey, &fitScoreState{podRequests: reqs})
	return nil
}

// Score implements framework.ScorePlugin.
func (b *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*fitScoreState](state, balancedPreScoreKey)
	if err != nil {
		s = &fitScoreState{podRequests: b.scorer.podRequests(pod)}
	}
	return b.scorer.scoreNode(ni, s.podRequests), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (*BalancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }

func sortedNames(m map[v1.ResourceName]int64) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
