package noderesources

import (
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// scorer turns requested/allocatable vectors (resources with no
// allocatable already left out) into a node score.
type scorer func(requested, allocatable []int64, weights []int64) int64

// allocationScorer computes per-resource requested and allocatable
// amounts for a node with the pod added.
type allocationScorer struct {
	resources []ResourceSpec
	// useRequested counts the actual requests; otherwise the non-zero
	// defaults for CPU and memory of containers without requests.
	useRequested bool
	score        scorer
}

// podRequests returns the pod's requests for each scoring resource.
func (a *allocationScorer) podRequests(pod *v1.Pod) []int64 {
	r := framework.PodRequests(pod, framework.RequestsOptions{NonZero: !a.useRequested})
	out := make([]int64, len(a.resources))
	for i, rs := range a.resources {
		out[i] = r.Get(v1.ResourceName(rs.Name))
	}
	return out
}

func (a *allocationScorer) scoreNode(ni *framework.NodeInfo, podReqs []int64) int64 {
	requested := make([]int64, 0, len(a.resources))
	allocatable := make([]int64, 0, len(a.resources))
	weights := make([]int64, 0, len(a.resources))
	for i, rs := range a.resources {
		alloc, req := a.allocatableRequested(ni, v1.ResourceName(rs.Name), podReqs[i])
		if alloc == 0 {
			continue
		}
		requested = append(requested, req)
		allocatable = append(allocatable, alloc)
		weights = append(weights, rs.Weight)
	}
	return a.score(requested, allocatable, weights)
}

func (a *allocationScorer) allocatableRequested(ni *framework.NodeInfo, name v1.ResourceName, podReq int64) (int64, int64) {
	used := ni.NonZeroRequested
	if a.useRequested {
		used = ni.Requested
	}
	switch name {
	case v1.ResourceCPU:
		return ni.Allocatable.MilliCPU, used.MilliCPU + podReq
	case v1.ResourceMemory:
		return ni.Allocatable.Memory, used.Memory + podReq
	case v1.ResourceEphemeralStorage:
		return ni.Allocatable.EphemeralStorage, ni.Requested.EphemeralStorage + podReq
	case v1.ResourcePods:
		return 0, 0
	}
	// An extended resource the pod does not request is not scored.
	if podReq == 0 {
		return 0, 0
	}
	return ni.Allocatable.ScalarResources[name], ni.Requested.ScalarResources[name] + podReq
}

func leastAllocatedScorer(requested, allocatable, weights []int64) int64 {
	var score, weightSum int64
	for i := range requested {
		s := int64(0)
		if requested[i] <= allocatable[i] {
			s = (allocatable[i] - requested[i]) * framework.MaxNodeScore / allocatable[i]
		}
		score += s * weights[i]
		weightSum += weights[i]
	}
	if weightSum == 0 {
		return 0
	}
	return score / weightSum
}

func mostAllocatedScorer(requested, allocatable, weights []int64) int64 {
	var score, weightSum int64
	for i := range requested {
		req := min(requested[i], allocatable[i])
		score += req * framework.MaxNodeScore / allocatable[i] * weights[i]
		weightSum += weights[i]
	}
	if weightSum == 0 {
		return 0
	}
	return score / weightSum
}

// maxCustomPriorityScore is the top of the RequestedToCapacityRatio shape
// scores, scaled to MaxNodeScore.
const maxCustomPriorityScore = 10

func requestedToCapacityRatioScorer(shape []UtilizationShapePoint) scorer {
	scaled := make([]UtilizationShapePoint, len(shape))
	for i, p := range shape {
		scaled[i] = UtilizationShapePoint{Utilization: p.Utilization, Score: p.Score * int32(framework.MaxNodeScore/maxCustomPriorityScore)}
	}
	raw := func(p int64) int64 {
		for i, pt := range scaled {
			if p <= int64(pt.Utilization) {
				if i == 0 {
					return int64(pt.Score)
				}
				prev := scaled[i-1]
				return int64(prev.Score) + (int64(pt.Score)-int64(prev.Score))*(p-int64(prev.Utilization))/(int64(pt.Utilization)-int64(prev.Utilization))
			}
		}
		return int64(scaled[len(scaled)-1].Score)
	}
	return func(requested, allocatable, weights []int64) int64 {
		var score, weightSum int64
		for i := range requested {
			util := int64(100)
			if requested[i] <= allocatable[i] {
				util = requested[i] * 100 / allocatable[i]
			}
			score += raw(util) * weights[i]
			weightSum += weights[i]
		}
		if weightSum == 0 {
			return 0
		}
		return (score*2 + weightSum) / (weightSum * 2) // round half up
	}
}

func balancedScorer(requested, allocatable, _ []int64) int64 {
	fractions := make([]float64, 0, len(requested))
	var total float64
	for i := range requested {
		f := min(float64(requested[i])/float64(allocatable[i]), 1)
		fractions = append(fractions, f)
		total += f
	}
	var std float64
	switch {
	case len(fractions) == 2:
		std = abs(fractions[0]-fractions[1]) / 2
	case len(fractions) > 2:
		mean := total / float64(len(fractions))
		var sum float64
		for _, f := range fractions {
			sum += (f - mean) * (f - mean)
		}
		std = sqrt(sum / float64(len(fractions)))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}
