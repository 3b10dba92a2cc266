// Package podtopologyspread spreads matching pods over topology domains:
// DoNotSchedule constraints filter out nodes that would raise the skew
// above maxSkew (with minDomains), ScheduleAnyway constraints score nodes
// with fewer matching pods higher, and pods without constraints get the
// cluster's default constraints (by zone and hostname, ScheduleAnyway).
package podtopologyspread

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeaffinity"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/tainttoleration"
)

// Name is the plugin's name.
const Name = "PodTopologySpread"

// Upstream's failure reasons.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// Defaulting types.
const (
	SystemDefaulting = "System"
	ListDefaulting   = "List"
)

const (
	preFilterKey framework.StateKey = "PreFilter" + Name
	preScoreKey  framework.StateKey = "PreScore" + Name
)

// SystemDefaultConstraints are upstream's cluster defaults.
func SystemDefaultConstraints() []v1.TopologySpreadConstraint {
	return []v1.TopologySpreadConstraint{
		{TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 5},
		{TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway, MaxSkew: 3},
	}
}

// Args are PodTopologySpreadArgs.
type Args struct {
	// DefaultConstraints apply to pods without constraints when
	// DefaultingType is List. They must not have a label selector: the
	// selector is derived from the services, replica sets, replication
	// controllers and stateful sets selecting the pod.
	DefaultConstraints []v1.TopologySpreadConstraint `json:"defaultConstraints,omitempty"`
	// DefaultingType is System (default) or List.
	DefaultingType string `json:"defaultingType,omitempty"`
}

// SelectorFunc returns the selector for a pod's default constraints, or an
// empty selector for none.
type SelectorFunc func(pod *v1.Pod) labels.Selector

// PodTopologySpread is the plugin.
type PodTopologySpread struct {
	handle          framework.Handle
	defaults        []v1.TopologySpreadConstraint
	systemDefaulted bool
	defaultSelector SelectorFunc
	// index keeps the matching pods per node between cycles.
	index *countIndex
}

var (
	_ framework.PreFilterPlugin     = (*PodTopologySpread)(nil)
	_ framework.PreFilterExtensions = (*PodTopologySpread)(nil)
	_ framework.FilterPlugin        = (*PodTopologySpread)(nil)
	_ framework.PreScorePlugin      = (*PodTopologySpread)(nil)
	_ framework.ScorePlugin         = (*PodTopologySpread)(nil)
	_ framework.ScoreExtensions     = (*PodTopologySpread)(nil)
)

// New builds the plugin; default constraints get their selector from the
// handle's informers (none without informers).
func New(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	var sel SelectorFunc
	if f := h.SharedInformerFactory(); f != nil {
		sel = ListerSelector(f)
	}
	return NewWithSelector(ctx, args, h, sel)
}

// NewWithSelector builds the plugin with an explicit default selector.
func NewWithSelector(_ context.Context, args any, h framework.Handle, sel SelectorFunc) (framework.Plugin, error) {
	a := Args{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	pl := &PodTopologySpread{handle: h, defaultSelector: sel, index: newCountIndex()}
	switch a.DefaultingType {
	case "", SystemDefaulting:
		if len(a.DefaultConstraints) > 0 {
			return nil, fmt.Errorf("%s args: defaultConstraints must be empty with the System defaulting type", Name)
		}
		pl.defaults, pl.systemDefaulted = SystemDefaultConstraints(), true
	case ListDefaulting:
		for i, c := range a.DefaultConstraints {
			if c.LabelSelector != nil {
				return nil, fmt.Errorf("%s args: defaultConstraints[%d]: labelSelector must not be set", Name, i)
			}
			if c.MaxSkew <= 0 {
				return nil, fmt.Errorf("%s args: defaultConstraints[%d]: maxSkew must be greater than zero", Name, i)
			}
		}
		pl.defaults = a.DefaultConstraints
	default:
		return nil, fmt.Errorf("%s args: unknown defaultingType %q", Name, a.DefaultingType)
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*PodTopologySpread) Name() string { return Name }

type constraint struct {
	maxSkew       int32
	topologyKey   string
	selector      labels.Selector
	minDomains    int32
	honorAffinity bool
	honorTaints   bool
}

func (c *constraint) matchesNode(pod *v1.Pod, node *v1.Node, req nodeaffinity.RequiredAffinity) bool {
	if c.honorAffinity && !req.Match(node) {
		return false
	}
	if c.honorTaints {
		if _, bad := tainttoleration.FindUntolerated(node.Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
			return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
		}); bad {
			return false
		}
	}
	return true
}

// constraints returns the pod's constraints with the given action, or the
// defaults when the pod has none.
func (pl *PodTopologySpread) constraints(pod *v1.Pod, action v1.UnsatisfiableConstraintAction) ([]constraint, error) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return build(pod, pod.Spec.TopologySpreadConstraints, action, nil)
	}
	if pl.defaultSelector == nil || len(pl.defaults) == 0 {
		return nil, nil
	}
	sel := pl.defaultSelector(pod)
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	return build(pod, pl.defaults, action, sel)
}

func build(pod *v1.Pod, in []v1.TopologySpreadConstraint, action v1.UnsatisfiableConstraintAction, sel labels.Selector) ([]constraint, error) {
	var out []constraint
	for _, c := range in {
		if c.WhenUnsatisfiable != action {
			continue
		}
		s := sel
		if s == nil {
			var err error
			s, err = metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("topology spread constraint %q: %w", c.TopologyKey, err)
			}
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					r, err := labels.NewRequirement(k, "in", []string{v})
					if err != nil {
						return nil, err
					}
					s = s.Add(*r)
				}
			}
		}
		cc := constraint{maxSkew: c.MaxSkew, topologyKey: c.TopologyKey, selector: s, minDomains: 1, honorAffinity: true}
		if c.MinDomains != nil {
			cc.minDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil && *c.NodeAffinityPolicy == v1.NodeInclusionPolicyIgnore {
			cc.honorAffinity = false
		}
		if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == v1.NodeInclusionPolicyHonor {
			cc.honorTaints = true
		}
		out = append(out, cc)
	}
	return out, nil
}

func hasAllKeys(node *v1.Node, cs []constraint) bool {
	for _, c := range cs {
		if _, ok := node.Labels[c.topologyKey]; !ok {
			return false
		}
	}
	return true
}

func countMatching(pods []*framework.PodInfo, sel labels.Selector, ns string) int {
	n := 0
	for _, p := range pods {
		if p.Pod.DeletionTimestamp != nil || p.Pod.Namespace != ns {
			continue
		}
		if sel.Matches(labels.Set(p.Pod.Labels)) {
			n++
		}
	}
	return n
}

type pair struct{ key, value string }

type preFilterState struct {
	constraints []constraint
	counts      map[pair]int
	// minMatch and domains per topology key.
	minMatch map[string]int
	domains  map[string]int
	required nodeaffinity.RequiredAffinity
	// filter holds, per constraint, what Filter needs for every node,
	// derived from the above once (recompute) rather than per node.
	filter []filterBound
}

// filterBound is one constraint's bound for Filter: a node in domain v
// fits while counts[v] + self - min <= maxSkew.
type filterBound struct {
	// self is 1 when the incoming pod matches the constraint's selector.
	self int
	// min is the global minimum (0 below minDomains); valid says there is
	// an eligible domain at all.
	min   int
	valid bool
}

func (s *preFilterState) Clone() framework.StateData {
	out := *s
	out.counts = make(map[pair]int, len(s.counts))
	for k, v := range s.counts {
		out.counts[k] = v
	}
	out.filter = append([]filterBound(nil), s.filter...)
	out.recompute()
	return &out
}

func (s *preFilterState) recompute() {
	s.minMatch, s.domains = map[string]int{}, map[string]int{}
	for p, n := range s.counts {
		s.domains[p.key]++
		if m, ok := s.minMatch[p.key]; !ok || n < m {
			s.minMatch[p.key] = n
		}
	}
	for i := range s.filter {
		c := &s.constraints[i]
		m, ok := s.minMatch[c.topologyKey]
		if ok && s.domains[c.topologyKey] < int(c.minDomains) {
			m = 0
		}
		s.filter[i].min, s.filter[i].valid = m, ok
	}
}

// PreFilter counts matching pods per domain; Skip with no DoNotSchedule
// constraint.
func (pl *PodTopologySpread) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	cs, err := pl.constraints(pod, v1.DoNotSchedule)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	s := &preFilterState{constraints: cs, counts: map[pair]int{}, required: nodeaffinity.GetRequiredAffinity(pod), filter: make([]filterBound, len(cs))}
	podLabels := labels.Set(pod.Labels)
	for i := range cs {
		if cs[i].selector.Matches(podLabels) {
			s.filter[i].self = 1
		}
	}
	nodes := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if !pl.countFromIndex(s, pod, nodes) {
		s.counts = map[pair]int{}
		for _, ni := range nodes {
			node := ni.Node()
			if !hasAllKeys(node, cs) {
				continue
			}
			for i := range cs {
				c := &cs[i]
				if !c.matchesNode(pod, node, s.required) {
					continue
				}
				s.counts[pair{c.topologyKey, node.Labels[c.topologyKey]}] += countMatching(ni.Pods, c.selector, pod.Namespace)
			}
		}
	}
	s.recompute()
	state.Write(preFilterKey, s)
	return nil, nil
}

// countFromIndex fills s.counts from the index when every constraint's
// eligible nodes are just those with all the topology keys; it reports
// false when the counts must be taken node by node.
func (pl *PodTopologySpread) countFromIndex(s *preFilterState, pod *v1.Pod, nodes []*framework.NodeInfo) bool {
	keys := make([]string, len(s.constraints))
	for i := range s.constraints {
		c := &s.constraints[i]
		if c.honorTaints || (c.honorAffinity && !s.required.Empty()) {
			return false
		}
		keys[i] = c.topologyKey
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		totals, ok := pl.index.domainCounts(nodes, c, keys, pod.Namespace)
		if !ok {
			return false
		}
		for v, n := range totals {
			s.counts[pair{c.topologyKey, v}] += n
		}
	}
	return true
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *PodTopologySpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod counts a pod placed on the node.
func (pl *PodTopologySpread) AddPod(_ context.Context, state *framework.CycleState, pod *v1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, add, ni, 1)
}

// RemovePod uncounts a pod removed from the node.
func (pl *PodTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, pod *v1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.update(state, pod, remove, ni, -1)
}

func (pl *PodTopologySpread) update(state *framework.CycleState, pod *v1.Pod, pi *framework.PodInfo, ni *framework.NodeInfo, delta int) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	if pi.Pod.Namespace != pod.Namespace || !hasAllKeys(node, s.constraints) {
		return nil
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		if c.matchesNode(pod, node, s.required) && c.selector.Matches(labels.Set(pi.Pod.Labels)) {
			s.counts[pair{c.topologyKey, node.Labels[c.topologyKey]}] += delta
		}
	}
	s.recompute()
	return nil
}

// Filter implements framework.FilterPlugin.
func (pl *PodTopologySpread) Filter(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*preFilterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	for i := range s.constraints {
		c := &s.constraints[i]
		v, ok := node.Labels[c.topologyKey]
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		b := &s.filter[i]
		if !b.valid {
			continue // no eligible domain: nothing to skew against
		}
		if skew := s.counts[pair{c.topologyKey, v}] + b.self - b.min; skew > int(c.maxSkew) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}

type preScoreState struct {
	constraints []constraint
	ignored     map[string]bool
	// counts[i][value] is constraint i's count in a domain (not used for
	// hostname, which is counted per node in Score).
	counts  []map[string]*int64
	weights []float64
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore counts matching pods in the domains of the feasible nodes; Skip
// with no ScheduleAnyway constraint.
func (pl *PodTopologySpread) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, filtered []*framework.NodeInfo) *framework.Status {
	all := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if len(all) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	cs, err := pl.constraints(pod, v1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	// Nodes without all topology keys are not scored, except with the
	// system defaults (so that nodes without a zone still spread by host).
	requireAll := len(pod.Spec.TopologySpreadConstraints) > 0 || !pl.systemDefaulted
	s := &preScoreState{constraints: cs, ignored: map[string]bool{}, counts: make([]map[string]*int64, len(cs)), weights: make([]float64, len(cs))}
	sizes := make([]int, len(cs))
	for i := range cs {
		s.counts[i] = map[string]*int64{}
	}
	for _, ni := range filtered {
		node := ni.Node()
		if requireAll && !hasAllKeys(node, cs) {
			s.ignored[node.Name] = true
			continue
		}
		for i, c := range cs {
			if c.topologyKey == v1.LabelHostname {
				continue
			}
			v, ok := node.Labels[c.topologyKey]
			if !ok {
				continue
			}
			if s.counts[i][v] == nil {
				s.counts[i][v] = new(int64)
				sizes[i]++
			}
		}
	}
	for i, c := range cs {
		size := sizes[i]
		if c.topologyKey == v1.LabelHostname {
			size = len(filtered) - len(s.ignored)
		}
		s.weights[i] = math.Log(float64(size + 2))
	}
	req := nodeaffinity.GetRequiredAffinity(pod)
	for _, ni := range all {
		node := ni.Node()
		if requireAll && !hasAllKeys(node, cs) {
			continue
		}
		for i := range cs {
			c := &cs[i]
			if !c.matchesNode(pod, node, req) {
				continue
			}
			cnt := s.counts[i][node.Labels[c.topologyKey]]
			if cnt == nil || c.topologyKey == v1.LabelHostname {
				continue
			}
			*cnt += int64(countMatching(ni.Pods, c.selector, pod.Namespace))
		}
	}
	state.Write(preScoreKey, s)
	return nil
}

// Score is the weighted number of matching pods in the node's domains
// (lower is better; NormalizeScore inverts it).
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	node := ni.Node()
	if s.ignored[node.Name] {
		return 0, nil
	}
	var score float64
	for i, c := range s.constraints {
		v, ok := node.Labels[c.topologyKey]
		if !ok {
			continue
		}
		var cnt int64
		if c.topologyKey == v1.LabelHostname {
			cnt = int64(countMatching(ni.Pods, c.selector, pod.Namespace))
		} else if p := s.counts[i][v]; p != nil {
			cnt = *p
		}
		score += float64(cnt)*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *PodTopologySpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps scores onto [0, MaxNodeScore], fewer matching pods
// scoring higher; ignored nodes score 0.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, sc := range scores {
		if s.ignored[sc.Name] {
			continue
		}
		lo, hi = min(lo, sc.Score), max(hi, sc.Score)
	}
	for i := range scores {
		switch {
		case s.ignored[scores[i].Name]:
			scores[i].Score = 0
		case hi == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (hi + lo - scores[i].Score) / hi
		}
	}
	return nil
}
