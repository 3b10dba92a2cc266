// Package noderesources holds NodeResourcesFit, which filters out nodes
// without room for the pod's requests and scores nodes by a strategy
// (LeastAllocated, MostAllocated, RequestedToCapacityRatio), and
// NodeResourcesBalancedAllocation, which prefers nodes whose resources
// would be used in balance.
package noderesources

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Plugin names.
const (
	FitName                = "NodeResourcesFit"
	BalancedAllocationName = "NodeResourcesBalancedAllocation"
)

// Scoring strategy types.
const (
	LeastAllocated           = "LeastAllocated"
	MostAllocated            = "MostAllocated"
	RequestedToCapacityRatio = "RequestedToCapacityRatio"
)

// ResourceSpec names a resource and its weight in scoring.
type ResourceSpec struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight,omitempty"`
}

// UtilizationShapePoint is a point of the RequestedToCapacityRatio curve:
// utilization in [0, 100] maps to a score in [0, 10].
type UtilizationShapePoint struct {
	Utilization int32 `json:"utilization"`
	Score       int32 `json:"score"`
}

// RequestedToCapacityRatioParam shapes the RequestedToCapacityRatio
// strategy.
type RequestedToCapacityRatioParam struct {
	Shape []UtilizationShapePoint `json:"shape,omitempty"`
}

// ScoringStrategy selects how NodeResourcesFit scores.
type ScoringStrategy struct {
	Type                     string                         `json:"type,omitempty"`
	Resources                []ResourceSpec                 `json:"resources,omitempty"`
	RequestedToCapacityRatio *RequestedToCapacityRatioParam `json:"requestedToCapacityRatio,omitempty"`
}

// FitArgs are NodeResourcesFit's args.
type FitArgs struct {
	// IgnoredResources are extended resources not checked by Filter.
	IgnoredResources []string `json:"ignoredResources,omitempty"`
	// IgnoredResourceGroups are prefixes ("example.com") of extended
	// resources not checked by Filter.
	IgnoredResourceGroups []string         `json:"ignoredResourceGroups,omitempty"`
	ScoringStrategy       *ScoringStrategy `json:"scoringStrategy,omitempty"`
}

// BalancedAllocationArgs are NodeResourcesBalancedAllocation's args.
type BalancedAllocationArgs struct {
	Resources []ResourceSpec `json:"resources,omitempty"`
}

func defaultResources() []ResourceSpec {
	return []ResourceSpec{{Name: string(v1.ResourceCPU), Weight: 1}, {Name: string(v1.ResourceMemory), Weight: 1}}
}

func validateResources(rs []ResourceSpec) error {
	for _, r := range rs {
		if r.Weight <= 0 || r.Weight > 100 {
			return fmt.Errorf("resource %q: weight %d is not in [1, 100]", r.Name, r.Weight)
		}
	}
	return nil
}

func validateShape(shape []UtilizationShapePoint) error {
	if len(shape) == 0 {
		return fmt.Errorf("requestedToCapacityRatio: at least one shape point is required")
	}
	for i, p := range shape {
		if p.Utilization < 0 || p.Utilization > 100 {
			return fmt.Errorf("shape[%d]: utilization %d is not in [0, 100]", i, p.Utilization)
		}
		if p.Score < 0 || p.Score > 10 {
			return fmt.Errorf("shape[%d]: score %d is not in [0, 10]", i, p.Score)
		}
		if i > 0 && p.Utilization <= shape[i-1].Utilization {
			return fmt.Errorf("shape[%d]: utilization values must be sorted in increasing order", i)
		}
	}
	return nil
}
