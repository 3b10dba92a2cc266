// Package zoneaffinity is ZoneAffinity, Skiff's worked example of a custom
// scheduler plugin (see docs/scheduler-plugins.md). It is in the in-tree
// registry but in no default profile: a KubeSchedulerConfiguration enables
// it.
//
//   - Filter: a pod annotated zoneaffinity.skiff.sh/required-zone: zone-a
//     (or a comma-separated list of zones) fits only nodes whose zone label
//     (topology.kubernetes.io/zone by default) has that value.
//   - Score: a pod annotated zoneaffinity.skiff.sh/preferred-zone: zone-a
//     prefers nodes to which the network cost from zone-a is low. Costs are
//     read from a ConfigMap whose data maps "zone-a.zone-b" to a
//     non-negative integer (the cost is symmetric; a zone to itself costs
//     0). The raw score is the cost, and NormalizeScore turns it into
//     0 (the most expensive node) to 100 (the cheapest).
package zoneaffinity

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "ZoneAffinity"

// The pod annotations the plugin reads.
const (
	RequiredZoneAnnotation  = "zoneaffinity.skiff.sh/required-zone"
	PreferredZoneAnnotation = "zoneaffinity.skiff.sh/preferred-zone"
)

// ErrReasonZoneMismatch is the Filter's reason for a node in another zone.
const ErrReasonZoneMismatch = "node(s) didn't match the pod's required zone"

// Args configure the plugin (pluginConfig args in a
// KubeSchedulerConfiguration profile).
type Args struct {
	// LabelKey is the node label holding the zone (default
	// topology.kubernetes.io/zone).
	LabelKey string `json:"labelKey,omitempty"`
	// CostConfigMap names the ConfigMap of zone-to-zone costs (default
	// kube-system/zone-network-costs).
	CostConfigMap ConfigMapRef `json:"costConfigMap,omitempty"`
	// UnknownCost is the cost of a pair of zones the ConfigMap does not
	// list, and of a node without a zone (default 100).
	UnknownCost *int64 `json:"unknownCost,omitempty"`
}

// ConfigMapRef names a ConfigMap.
type ConfigMapRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// Defaults of Args.
const (
	DefaultCostNamespace = "kube-system"
	DefaultCostName      = "zone-network-costs"
	DefaultUnknownCost   = 100
)

// ZoneAffinity is the plugin.
type ZoneAffinity struct {
	args      Args
	unknown   int64
	configMap corelisters.ConfigMapLister
}

var (
	_ framework.PreFilterPlugin = (*ZoneAffinity)(nil)
	_ framework.FilterPlugin    = (*ZoneAffinity)(nil)
	_ framework.PreScorePlugin  = (*ZoneAffinity)(nil)
	_ framework.ScorePlugin     = (*ZoneAffinity)(nil)
	_ framework.ScoreExtensions = (*ZoneAffinity)(nil)
)

// New builds the plugin; it is the registry's factory. The cost ConfigMap
// is read through the handle's informer factory (which the scheduler
// starts after building its plugins); without one every pair of distinct
// zones costs UnknownCost.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	a := Args{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.LabelKey == "" {
		a.LabelKey = v1.LabelTopologyZone
	}
	if a.CostConfigMap.Namespace == "" {
		a.CostConfigMap.Namespace = DefaultCostNamespace
	}
	if a.CostConfigMap.Name == "" {
		a.CostConfigMap.Name = DefaultCostName
	}
	pl := &ZoneAffinity{args: a, unknown: DefaultUnknownCost}
	if a.UnknownCost != nil {
		if *a.UnknownCost < 0 {
			return nil, fmt.Errorf("%s args: unknownCost %d must not be negative", Name, *a.UnknownCost)
		}
		pl.unknown = *a.UnknownCost
	}
	if h != nil && h.SharedInformerFactory() != nil {
		pl.configMap = h.SharedInformerFactory().Core().V1().ConfigMaps().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*ZoneAffinity) Name() string { return Name }

const (
	preFilterKey framework.StateKey = "PreFilter" + Name
	preScoreKey  framework.StateKey = "PreScore" + Name
)

// requiredZones is the set of zones a pod may run in; immutable once
// written, so Clone returns itself.
type requiredZones []string

func (r requiredZones) Clone() framework.StateData { return r }

// PreFilter parses the required zones once; a pod without the annotation
// skips Filter.
func (pl *ZoneAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	v, ok := pod.Annotations[RequiredZoneAnnotation]
	if !ok {
		return nil, framework.NewStatus(framework.Skip)
	}
	var zones requiredZones
	for _, z := range strings.Split(v, ",") {
		if z = strings.TrimSpace(z); z != "" {
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod's annotation %s names no zone", RequiredZoneAnnotation))
	}
	state.Write(preFilterKey, zones)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin: other pods
// do not matter to this plugin.
func (*ZoneAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin. Preempting pods cannot move a
// node to another zone, so a mismatch is UnschedulableAndUnresolvable.
func (pl *ZoneAffinity) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	zones, err := framework.ReadAs[requiredZones](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if zone, ok := ni.Node().Labels[pl.args.LabelKey]; ok && slices.Contains(zones, zone) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonZoneMismatch)
}

// scoreState is the preferred zone and the cost table of one cycle.
type scoreState struct {
	preferred string
	costs     Costs
}

func (s *scoreState) Clone() framework.StateData { return s }

// PreScore reads the preferred zone and the cost table; a pod without a
// preferred zone skips Score.
func (pl *ZoneAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	preferred := strings.TrimSpace(pod.Annotations[PreferredZoneAnnotation])
	if preferred == "" {
		return framework.NewStatus(framework.Skip)
	}
	costs, err := pl.costs()
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreKey, &scoreState{preferred: preferred, costs: costs})
	return nil
}

func (pl *ZoneAffinity) costs() (Costs, error) {
	if pl.configMap == nil {
		return nil, nil
	}
	ref := pl.args.CostConfigMap
	cm, err := pl.configMap.ConfigMaps(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get zone costs %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	costs, err := ParseCosts(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("zone costs %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return costs, nil
}

// Score implements framework.ScorePlugin: the raw score is the network
// cost from the preferred zone to the node's zone.
func (pl *ZoneAffinity) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*scoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	zone, ok := ni.Node().Labels[pl.args.LabelKey]
	if !ok {
		return pl.unknown, nil
	}
	return s.costs.Cost(s.preferred, zone, pl.unknown), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *ZoneAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore maps costs to scores: the cheapest cost over the nodes
// scores 100, the dearest 0, linearly in between; equal costs all score
// 100.
func (*ZoneAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = framework.MaxNodeScore
			continue
		}
		scores[i].Score = (hi - scores[i].Score) * framework.MaxNodeScore / (hi - lo)
	}
	return nil
}

// Costs maps "from.to" zone pairs to a cost.
type Costs map[string]int64

// ParseCosts reads ConfigMap data: each key is "zone-a.zone-b" and each
// value a non-negative integer.
func ParseCosts(data map[string]string) (Costs, error) {
	out := make(Costs, len(data))
	for k, v := range data {
		if strings.Count(k, ".") < 1 || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") {
			return nil, fmt.Errorf("key %q is not of the form zone-a.zone-b", k)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("cost %q of %q is not a non-negative integer", v, k)
		}
		out[k] = n
	}
	return out, nil
}

// Cost returns the cost between zones a and b: 0 for the same zone, the
// listed cost of "a.b" or else "b.a", or unknown.
func (c Costs) Cost(a, b string, unknown int64) int64 {
	if a == b {
		return 0
	}
	if v, ok := c[a+"."+b]; ok {
		return v
	}
	if v, ok := c[b+"."+a]; ok {
		return v
	}
	return unknown
}
