package defaultpreemption

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Messages of the statuses preemption reports, as upstream words them.
const (
	msgNotHelpful        = "Preemption is not helpful for scheduling"
	msgNoVictims         = "No preemption victims found for incoming pod"
	msgPolicyNever       = "not eligible due to preemptionPolicy=Never."
	msgTerminatingVictim = "not eligible due to a terminating pod on the nominated node."
	msgNoCandidate       = "no candidate node for preemption"
)

// Runner is the part of the framework that preemption drives: it re-runs
// the Filter plugins (with the pods nominated to the node, as the
// scheduling cycle does) on a node from which pods were removed, after
// telling the PreFilter extensions. runtime.Framework implements it.
type Runner interface {
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status
	RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, pod *v1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, pod *v1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status
}

// Candidate is a node where the preemptor fits once Victims are gone.
type Candidate struct {
	Node string
	// Victims are ordered from the most to the least important.
	Victims []*v1.Pod
	// NumPDBViolations counts the victims whose eviction would break a
	// PodDisruptionBudget.
	NumPDBViolations int
}

// Evaluator is the pure core of preemption: it finds the candidate nodes
// and their victims on a snapshot, without any I/O.
type Evaluator struct {
	Runner       Runner
	Parallelizer framework.Parallelizer
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute bound the
	// number of candidates the dry run looks for (see NumCandidates).
	MinCandidateNodesPercentage int32
	MinCandidateNodesAbsolute   int32
}

// NumCandidates is how many candidates to look for among n potential
// nodes: the larger of the percentage and the absolute floor, at most n.
func (e *Evaluator) NumCandidates(n int) int {
	c := n * int(e.MinCandidateNodesPercentage) / 100
	if c < int(e.MinCandidateNodesAbsolute) {
		c = int(e.MinCandidateNodesAbsolute)
	}
	return min(c, n)
}

// PotentialNodes returns the nodes where removing pods might help: those
// rejected as Unschedulable. Nodes rejected as UnschedulableAndUnresolvable,
// and nodes without a status (never evaluated, or cut by a PreFilter
// result), get the "not helpful" status in the returned map.
func PotentialNodes(nodes []*framework.NodeInfo, filtered framework.NodeToStatus) ([]*framework.NodeInfo, framework.NodeToStatus) {
	var potential []*framework.NodeInfo
	statuses := framework.NodeToStatus{}
	for _, ni := range nodes {
		name := ni.Node().Name
		if s, ok := filtered[name]; ok && s.Code() == framework.Unschedulable {
			potential = append(potential, ni)
			continue
		}
		statuses[name] = framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNotHelpful)
	}
	return potential, statuses
}

// FindCandidates dry-runs preemption on the potential nodes among nodes,
// starting at offset (modulo their number) and stopping once enough
// candidates are found. It returns the candidates, those that violate no
// PDB first, each group in the order the nodes were visited, and the
// status of every node that is not a candidate.
func (e *Evaluator) FindCandidates(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, filtered framework.NodeToStatus, pdbs []*policyv1.PodDisruptionBudget, offset int) ([]Candidate, framework.NodeToStatus, error) {
	potential, statuses := PotentialNodes(nodes, filtered)
	if len(potential) == 0 {
		return nil, statuses, nil
	}
	want := e.NumCandidates(len(potential))
	offset = ((offset % len(potential)) + len(potential)) % len(potential)

	results := make([]*Candidate, len(potential))
	nodeStatus := make([]*framework.Status, len(potential))
	var nonViolating, violating atomic.Int32
	var errOnce sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.Parallelizer.Until(ctx, len(potential), func(i int) {
		ni := potential[(offset+i)%len(potential)].Clone()
		victims, violations, s := e.SelectVictimsOnNode(ctx, state.Clone(), pod, ni, pdbs)
		switch {
		case s.IsSuccess() && len(victims) > 0:
			results[i] = &Candidate{Node: ni.Node().Name, Victims: victims, NumPDBViolations: violations}
			var nv, vv int32
			if violations == 0 {
				nv = nonViolating.Add(1)
				vv = violating.Load()
			} else {
				vv = violating.Add(1)
				nv = nonViolating.Load()
			}
			if nv > 0 && int(nv+vv) >= want {
				cancel()
			}
		case s.IsSuccess():
			nodeStatus[i] = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", ni.Node().Name))
		case s.Code() == framework.Error:
			errOnce.Do(func() { firstErr = s.AsError() })
			nodeStatus[i] = s
		default:
			nodeStatus[i] = s
		}
	})
	var out, violators []Candidate
	for i := range potential {
		name := potential[(offset+i)%len(potential)].Node().Name
		switch {
		case results[i] != nil && results[i].NumPDBViolations == 0:
			out = append(out, *results[i])
		case results[i] != nil:
			violators = append(violators, *results[i])
		case nodeStatus[i] != nil:
			statuses[name] = nodeStatus[i]
		}
	}
	return append(out, violators...), statuses, firstErr
}

// SelectVictimsOnNode finds the fewest, least important pods to remove
// from ni (which it changes; pass a clone) so that pod fits, as upstream
// does: remove every pod of lower priority, check that pod then fits, and
// put back ("reprieve") as many as possible, the most important first,
// those whose eviction would violate a PDB before the others. It returns
// the victims (most important first) and how many of them violate a PDB.
func (e *Evaluator) SelectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo, pdbs []*policyv1.PodDisruptionBudget) ([]*v1.Pod, int, *framework.Status) {
	remove := func(pi *framework.PodInfo) error {
		if err := ni.RemovePod(pi.Pod); err != nil {
			return err
		}
		return e.Runner.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, ni).AsError()
	}
	add := func(pi *framework.PodInfo) error {
		ni.AddPodInfo(pi)
		return e.Runner.RunPreFilterExtensionAddPod(ctx, state, pod, pi, ni).AsError()
	}

	priority := framework.PodPriority(pod)
	var potential []*framework.PodInfo
	for _, pi := range slices.Clone(ni.Pods) {
		if framework.PodPriority(pi.Pod) < priority {
			potential = append(potential, pi)
			if err := remove(pi); err != nil {
				return nil, 0, framework.AsStatus(err)
			}
		}
	}
	if len(potential) == 0 {
		return nil, 0, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	// Affinity of the preemptor to the very pods it would evict is not
	// considered, as upstream does not either.
	if s := e.Runner.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); !s.IsSuccess() {
		return nil, 0, s
	}

	sort.SliceStable(potential, func(i, j int) bool { return MoreImportantPod(potential[i].Pod, potential[j].Pod) })
	violatingPods, nonViolatingPods := SplitByPDBViolation(potential, pdbs)
	var victims []*v1.Pod
	reprieve := func(pi *framework.PodInfo) (bool, error) {
		if err := add(pi); err != nil {
			return false, err
		}
		if e.Runner.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() {
			return true, nil
		}
		if err := remove(pi); err != nil {
			return false, err
		}
		victims = append(victims, pi.Pod)
		return false, nil
	}
	violations := 0
	for _, pi := range violatingPods {
		fits, err := reprieve(pi)
		if err != nil {
			return nil, 0, framework.AsStatus(err)
		}
		if !fits {
			violations++
		}
	}
	for _, pi := range nonViolatingPods {
		if _, err := reprieve(pi); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	if len(violatingPods) > 0 && len(nonViolatingPods) > 0 {
		sort.SliceStable(victims, func(i, j int) bool { return MoreImportantPod(victims[i], victims[j]) })
	}
	return victims, violations, nil
}

// SplitByPDBViolation splits pods (keeping their order) into those whose
// eviction, one after the other, would take some matching PDB below zero
// disruptions allowed, and the rest. Pods already listed among a PDB's
// disrupted pods do not count against it.
func SplitByPDBViolation(pods []*framework.PodInfo, pdbs []*policyv1.PodDisruptionBudget) (violating, nonViolating []*framework.PodInfo) {
	allowed := make([]int32, len(pdbs))
	selectors := make([]labels.Selector, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			sel = labels.Nothing()
		}
		selectors[i] = sel
	}
	for _, pi := range pods {
		pod := pi.Pod
		violates := false
		if len(pod.Labels) > 0 {
			for i, pdb := range pdbs {
				if pdb.Namespace != pod.Namespace || selectors[i].Empty() || !selectors[i].Matches(labels.Set(pod.Labels)) {
					continue
				}
				if _, disrupted := pdb.Status.DisruptedPods[pod.Name]; disrupted {
					continue
				}
				allowed[i]--
				if allowed[i] < 0 {
					violates = true
				}
			}
		}
		if violates {
			violating = append(violating, pi)
		} else {
			nonViolating = append(nonViolating, pi)
		}
	}
	return violating, nonViolating
}

// startNanos is a pod's start time; a pod that has not started counts as
// starting now, i.e. after every pod that has.
func startNanos(pod *v1.Pod) int64 {
	if pod.Status.StartTime == nil {
		return math.MaxInt64
	}
	return pod.Status.StartTime.UnixNano()
}

// MoreImportantPod orders pods by priority, then by start time (the one
// running longer is more important).
func MoreImportantPod(a, b *v1.Pod) bool {
	pa, pb := framework.PodPriority(a), framework.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return startNanos(a) < startNanos(b)
}

// SelectCandidate picks the node to preempt on by upstream's criteria, in
// order, each one breaking the ties of the previous: fewest PDB
// violations, lowest priority of the most important victim, smallest sum
// of the victims' priorities, fewest victims, latest start among the
// highest-priority victims; then the first candidate. It returns nil for
// no candidates.
func SelectCandidate(cands []Candidate) *Candidate {
	if len(cands) == 0 {
		return nil
	}
	for i := range cands {
		if len(cands[i].Victims) == 0 {
			return &cands[i]
		}
	}
	left := make([]int, len(cands))
	for i := range left {
		left[i] = i
	}
	scores := []func(c *Candidate) int64{
		func(c *Candidate) int64 { return -int64(c.NumPDBViolations) },
		func(c *Candidate) int64 { return -int64(framework.PodPriority(c.Victims[0])) },
		func(c *Candidate) int64 {
			var sum int64
			for _, p := range c.Victims {
				// Shift priorities to be positive, so that more victims
				// of negative priority do not make a smaller sum.
				sum += int64(framework.PodPriority(p)) + int64(math.MaxInt32) + 1
			}
			return -sum
		},
		func(c *Candidate) int64 { return -int64(len(c.Victims)) },
		func(c *Candidate) int64 { return earliestStartOfHighest(c.Victims) },
	}
	for _, score := range scores {
		best := int64(math.MinInt64)
		var kept []int
		for _, i := range left {
			s := score(&cands[i])
			switch {
			case s > best:
				best, kept = s, []int{i}
			case s == best:
				kept = append(kept, i)
			}
		}
		left = kept
		if len(left) == 1 {
			break
		}
	}
	return &cands[left[0]]
}

// earliestStartOfHighest is the earliest start among the victims of the
// highest priority.
func earliestStartOfHighest(victims []*v1.Pod) int64 {
	top := framework.PodPriority(victims[0])
	for _, p := range victims {
		top = max(top, framework.PodPriority(p))
	}
	earliest := int64(math.MaxInt64)
	for _, p := range victims {
		if framework.PodPriority(p) == top {
			earliest = min(earliest, startNanos(p))
		}
	}
	return earliest
}

// EligibleToPreempt reports whether pod may preempt others, and why not:
// not with preemptionPolicy Never, and not while a lower-priority pod on
// its nominated node is still terminating because of an earlier
// preemption (unless the filters now reject that node for good).
func EligibleToPreempt(pod *v1.Pod, nodes framework.NodeInfoLister, filtered framework.NodeToStatus) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false, msgPolicyNever
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" {
		return true, ""
	}
	if s, ok := filtered[nominated]; ok && s.Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	ni, err := nodes.Get(nominated)
	if err != nil {
		return true, ""
	}
	priority := framework.PodPriority(pod)
	for _, pi := range ni.Pods {
		if framework.PodPriority(pi.Pod) < priority && TerminatingByPreemption(pi.Pod) {
			return false, msgTerminatingVictim
		}
	}
	return true, ""
}

// TerminatingByPreemption reports whether pod is being deleted after the
// scheduler marked it as a preemption victim.
func TerminatingByPreemption(pod *v1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}
