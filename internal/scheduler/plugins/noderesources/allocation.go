package noderesources

import (
	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// scoreKind selects the formula of a scorer.
type scoreKind int

const (
	leastAllocated scoreKind = iota
	mostAllocated
	requestedToCapacityRatio
	balanced
)

// scorer turns requested/allocatable vectors (resources with no
// allocatable already left out) into a node score. It is a value with a
// switch rather than a func, so that the vectors, which scoreNode keeps on
// its stack, do not escape to the heap through an indirect call.
type scorer struct {
	kind scoreKind
	// shape is RequestedToCapacityRatio's, with scores scaled to
	// MaxNodeScore.
	shape []UtilizationShapePoint
}

func (s scorer) score(requested, allocatable, weights []int64) int64 {
	switch s.kind {
	case mostAllocated:
		return mostAllocatedScorer(requested, allocatable, weights)
	case requestedToCapacityRatio:
		return ratioScore(s.shape, requested, allocatable, weights)
	case balanced:
		return balancedScorer(requested, allocatable, weights)
	}
	return leastAllocatedScorer(requested, allocatable, weights)
}

// maxStackResources is how many scoring resources scoreNode handles
// without allocating.
const maxStackResources = 8

// allocationScorer computes per-resource requested and allocatable
// amounts for a node with the pod added.
type allocationScorer struct {
	resources []ResourceSpec
	// useRequested counts the actual requests; otherwise the non-zero
	// defaults for CPU and memory of containers without requests.
	useRequested bool
	scorer       scorer
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
	var reqBuf, allocBuf, weightBuf [maxStackResources]int64
	requested, allocatable, weights := reqBuf[:0], allocBuf[:0], weightBuf[:0]
	for i, rs := range a.resources {
		alloc, req := a.allocatableRequested(ni, v1.ResourceName(rs.Name), podReqs[i])
		if alloc == 0 {
			continue
		}
		requested = append(requested, req)
		allocatable = append(allocatable, alloc)
		weights = append(weights, rs.Weight)
	}
	return a.scorer.score(requested, allocatable, weights)
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

// newRatioScorer scales shape's scores (0-10) to MaxNodeScore.
func newRatioScorer(shape []UtilizationShapePoint) scorer {
	scaled := make([]UtilizationShapePoint, len(shape))
	for i, p := range shape {
		scaled[i] = UtilizationShapePoint{Utilization: p.Utilization, Score: p.Score * int32(framework.MaxNodeScore/maxCustomPriorityScore)}
	}
	return scorer{kind: requestedToCapacityRatio, shape: scaled}
}

// shapeScore interpolates the scaled shape at utilization p (percent).
func shapeScore(scaled []UtilizationShapePoint, p int64) int64 {
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

func ratioScore(scaled []UtilizationShapePoint, requested, allocatable, weights []int64) int64 {
	var score, weightSum int64
	for i := range requested {
		util := int64(100)
		if requested[i] <= allocatable[i] {
			util = requested[i] * 100 / allocatable[i]
		}
		score += shapeScore(scaled, util) * weights[i]
		weightSum += weights[i]
	}
	if weightSum == 0 {
		return 0
	}
	return (score*2 + weightSum) / (weightSum * 2) // round half up
}

func balancedScorer(requested, allocatable, _ []int64) int64 {
	fraction := func(i int) float64 { return min(float64(requested[i])/float64(allocatable[i]), 1) }
	var std float64
	switch n := len(requested); {
	case n == 2:
		std = abs(fraction(0)-fraction(1)) / 2
	case n > 2:
		var total float64
		for i := range n {
			total += fraction(i)
		}
		mean := total / float64(n)
		var sum float64
		for i := range n {
			d := fraction(i) - mean
			sum += d * d
		}
		std = sqrt(sum / float64(n))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}
