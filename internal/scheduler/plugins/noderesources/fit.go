package noderesources

import (
	"context"
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

const (
	fitPreFilterKey framework.StateKey = "PreFilter" + FitName
	fitPreScoreKey  framework.StateKey = "PreScore" + FitName
)

// Fit is NodeResourcesFit.
type Fit struct {
	ignored       map[string]bool
	ignoredGroups map[string]bool
	scorer        allocationScorer
}

var (
	_ framework.PreFilterPlugin = (*Fit)(nil)
	_ framework.FilterPlugin    = (*Fit)(nil)
	_ framework.PreScorePlugin  = (*Fit)(nil)
	_ framework.ScorePlugin     = (*Fit)(nil)
)

// NewFit builds NodeResourcesFit.
func NewFit(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a := FitArgs{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	st := ScoringStrategy{Type: LeastAllocated}
	if a.ScoringStrategy != nil {
		st = *a.ScoringStrategy
	}
	if st.Type == "" {
		st.Type = LeastAllocated
	}
	if len(st.Resources) == 0 {
		st.Resources = defaultResources()
	}
	if err := validateResources(st.Resources); err != nil {
		return nil, fmt.Errorf("%s args: %w", FitName, err)
	}
	f := &Fit{ignored: map[string]bool{}, ignoredGroups: map[string]bool{}}
	for _, r := range a.IgnoredResources {
		f.ignored[r] = true
	}
	for _, g := range a.IgnoredResourceGroups {
		f.ignoredGroups[g] = true
	}
	f.scorer = allocationScorer{resources: st.Resources}
	switch st.Type {
	case LeastAllocated:
		f.scorer.scorer = scorer{kind: leastAllocated}
	case MostAllocated:
		f.scorer.scorer = scorer{kind: mostAllocated}
	case RequestedToCapacityRatio:
		if st.RequestedToCapacityRatio == nil {
			return nil, fmt.Errorf("%s args: requestedToCapacityRatio is required for the %s strategy", FitName, RequestedToCapacityRatio)
		}
		if err := validateShape(st.RequestedToCapacityRatio.Shape); err != nil {
			return nil, fmt.Errorf("%s args: %w", FitName, err)
		}
		f.scorer.scorer = newRatioScorer(st.RequestedToCapacityRatio.Shape)
	default:
		return nil, fmt.Errorf("%s args: unknown scoring strategy %q", FitName, st.Type)
	}
	return f, nil
}

// Name implements framework.Plugin.
func (*Fit) Name() string { return FitName }

type fitState struct{ framework.Resource }

func (s *fitState) Clone() framework.StateData { return s }

// PreFilter computes the pod's requests.
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	state.Write(fitPreFilterKey, &fitState{*framework.PodRequests(pod, framework.RequestsOptions{})})
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*Fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// InsufficientResource is one resource the node lacks.
type InsufficientResource struct {
	ResourceName v1.ResourceName
	Reason       string
	Requested    int64
	Used         int64
	Capacity     int64
}

// Filter implements framework.FilterPlugin.
func (f *Fit) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*fitState](state, fitPreFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	insufficient := f.fits(&s.Resource, ni)
	if len(insufficient) == 0 {
		return nil
	}
	reasons := make([]string, len(insufficient))
	for i, r := range insufficient {
		reasons[i] = r.Reason
	}
	return framework.NewStatus(framework.Unschedulable, reasons...)
}

// Fits lists what the node lacks to host a pod with these requests.
func Fits(req *framework.Resource, ni *framework.NodeInfo) []InsufficientResource {
	return (&Fit{}).fits(req, ni)
}

func (f *Fit) fits(req *framework.Resource, ni *framework.NodeInfo) []InsufficientResource {
	var out []InsufficientResource
	alloc, used := ni.Allocatable, ni.Requested
	if len(ni.Pods)+1 > alloc.AllowedPodNumber {
		out = append(out, InsufficientResource{v1.ResourcePods, "Too many pods", 1, int64(len(ni.Pods)), int64(alloc.AllowedPodNumber)})
	}
	if req.IsZero() {
		return out
	}
	check := func(name v1.ResourceName, r, u, c int64) {
		if r > 0 && r > c-u {
			out = append(out, InsufficientResource{name, "Insufficient " + string(name), r, u, c})
		}
	}
	check(v1.ResourceCPU, req.MilliCPU, used.MilliCPU, alloc.MilliCPU)
	check(v1.ResourceMemory, req.Memory, used.Memory, alloc.Memory)
	check(v1.ResourceEphemeralStorage, req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage)
	for _, name := range sortedNames(req.ScalarResources) {
		q := req.ScalarResources[name]
		if q == 0 || f.isIgnored(name) {
			continue
		}
		check(name, q, used.ScalarResources[name], alloc.ScalarResources[name])
	}
	return out
}

func (f *Fit) isIgnored(name v1.ResourceName) bool {
	if !isExtended(name) {
		return false
	}
	if f.ignored[string(name)] {
		return true
	}
	group, _, _ := strings.Cut(string(name), "/")
	return f.ignoredGroups[group]
}

// isExtended reports a domain-prefixed resource outside kubernetes.io.
func isExtended(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.HasPrefix(s, "requests.") {
		return false
	}
	domain, _, _ := strings.Cut(s, "/")
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

type fitScoreState struct{ podRequests []int64 }

func (s *fitScoreState) Clone() framework.StateData { return s }

// PreScore computes the pod's requests for the scored resources.
func (f *Fit) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(fitPreScoreKey, &fitScoreState{podRequests: f.scorer.podRequests(pod)})
	return nil
}

// Score implements framework.ScorePlugin.
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*fitScoreState](state, fitPreScoreKey)
	if err != nil {
		s = &fitScoreState{podRequests: f.scorer.podRequests(pod)}
	}
	return f.scorer.scoreNode(ni, s.podRequests), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (*Fit) ScoreExtensions() framework.ScoreExtensions { return nil }

func abs(x float64) float64  { return math.Abs(x) }
func sqrt(x float64) float64 { return math.Sqrt(x) }
