package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Upstream's bounds for the adaptive percentage of nodes to score.
const (
	// MinFeasibleNodesToFind: with fewer nodes than this, all are
	// evaluated.
	MinFeasibleNodesToFind = 100
	// MinFeasibleNodesPercentageToFind is the floor of the adaptive
	// percentage.
	MinFeasibleNodesPercentageToFind = 5
)

// ErrNoNodesAvailable is returned when the snapshot holds no node.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// ScheduleResult is the outcome of SchedulePod.
type ScheduleResult struct {
	SuggestedHost string
	// EvaluatedNodes counts the nodes filtered (feasible or not).
	EvaluatedNodes int
	// FeasibleNodes counts the nodes that passed the filters.
	FeasibleNodes int
}

// Diagnosis records why nodes were rejected.
type Diagnosis struct {
	NodeToStatus         framework.NodeToStatus
	UnschedulablePlugins map[string]bool
	// AbsentNodesStatus applies to the nodes not in NodeToStatus that
	// were not evaluated: all of them when PreFilter rejected the pod, or
	// those left out by a PreFilterResult. It is not counted in the
	// message's histogram.
	AbsentNodesStatus *framework.Status
	// PreFilterMsg is set when PreFilter rejected the pod for all nodes.
	PreFilterMsg string
	// PostFilterMsg is set by the scheduler after PostFilter ran.
	PostFilterMsg string
}

// FitError is returned when no node fits the pod.
type FitError struct {
	Pod         *v1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error renders upstream's message, e.g.
// "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated
// taint {key: value}."
func (e *FitError) Error() string {
	msg := fmt.Sprintf("0/%v nodes are available:", e.NumAllNodes)
	if e.Diagnosis.PreFilterMsg != "" {
		msg += " " + e.Diagnosis.PreFilterMsg + "."
	}
	histogram := map[string]int{}
	for _, s := range e.Diagnosis.NodeToStatus {
		for _, r := range s.Reasons() {
			histogram[r]++
		}
	}
	parts := make([]string, 0, len(histogram))
	for r, n := range histogram {
		parts = append(parts, fmt.Sprintf("%v %v", n, r))
	}
	sort.Strings(parts)
	if len(parts) > 0 {
		msg += " " + strings.Join(parts, ", ") + "."
	}
	if e.Diagnosis.PostFilterMsg != "" {
		msg += " " + e.Diagnosis.PostFilterMsg + "."
	}
	return msg
}

// NumFeasibleNodesToFind returns how many feasible nodes to look for among
// numAllNodes, as upstream does: all below 100 nodes or at 100%; otherwise
// percentage% (adaptive when 0: 50% minus one point per 125 nodes, at least
// 5%), and never fewer than 100.
func NumFeasibleNodesToFind(percentage int32, numAllNodes int) int {
	if numAllNodes < MinFeasibleNodesToFind || percentage >= 100 {
		return numAllNodes
	}
	adaptive := int(percentage)
	if adaptive <= 0 {
		adaptive = 50 - numAllNodes/125
		if adaptive < MinFeasibleNodesPercentageToFind {
			adaptive = MinFeasibleNodesPercentageToFind
		}
	}
	n := numAllNodes * adaptive / 100
	if n < MinFeasibleNodesToFind {
		return MinFeasibleNodesToFind
	}
	return n
}

// SchedulePod picks a node for pod from the current snapshot: PreFilter,
// Filter in parallel (stopping once enough feasible nodes are found),
// PreScore, Score, and the choice of the best node (ties broken at
// random). A *FitError means no node fits. It is not safe for concurrent
// use: one scheduling cycle runs at a time.
func (f *Framework) SchedulePod(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (ScheduleResult, error) {
	all := f.nodeList()
	if len(all) == 0 {
		return ScheduleResult{}, ErrNoNodesAvailable
	}
	feasible, diag, err := f.findNodesThatFit(ctx, state, pod, all)
	if err != nil {
		return ScheduleResult{}, err
	}
	evaluated := len(feasible) + len(diag.NodeToStatus)
	if len(feasible) == 0 && diag.AbsentNodesStatus != nil && diag.PreFilterMsg == "" && len(diag.NodeToStatus) == 0 {
		diag.PreFilterMsg = diag.AbsentNodesStatus.Message()
	}
	if len(feasible) == 0 {
		return ScheduleResult{}, &FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: diag}
	}
	if len(feasible) == 1 {
		return ScheduleResult{SuggestedHost: feasible[0].Node().Name, EvaluatedNodes: evaluated, FeasibleNodes: 1}, nil
	}
	scores, err := f.prioritizeNodes(ctx, state, pod, feasible)
	if err != nil {
		return ScheduleResult{}, err
	}
	host := f.selectHost(scores)
	return ScheduleResult{SuggestedHost: host, EvaluatedNodes: evaluated, FeasibleNodes: len(feasible)}, nil
}

func (f *Framework) findNodesThatFit(ctx context.Context, state *framework.CycleState, pod *v1.Pod, all []*framework.NodeInfo) ([]*framework.NodeInfo, Diagnosis, error) {
	diag := Diagnosis{NodeToStatus: framework.NodeToStatus{}, UnschedulablePlugins: map[string]bool{}}
	pre, s := f.RunPreFilterPlugins(ctx, state, pod)
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return nil, diag, s.AsError()
		}
		// Every node is rejected for the same reason.
		diag.AbsentNodesStatus = s
		diag.PreFilterMsg = s.Message()
		diag.UnschedulablePlugins[s.Plugin()] = true
		return nil, diag, nil
	}
	nodes := all
	if !pre.AllNodes() {
		nodes = make([]*framework.NodeInfo, 0, len(pre.NodeNames))
		for _, ni := range all {
			if pre.NodeNames[ni.Node().Name] {
				nodes = append(nodes, ni)
			}
		}
		diag.AbsentNodesStatus = framework.NewStatus(framework.UnschedulableAndUnresolvable, "node is filtered out by the prefilter result")
	}
	feasible, err := f.findFeasible(ctx, state, pod, nodes, diag)
	return feasible, diag, err
}

func (f *Framework) findFeasible(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, diag Diagnosis) (_ []*framework.NodeInfo, err error) {
	if f.metrics != nil {
		// One observation for the whole Filter phase of the cycle (with
		// the nominated pods' AddPod), as upstream records it.
		start := f.clock.Now()
		defer func() {
			f.metrics.ObserveExtensionPoint(Filter, framework.AsStatus(err).Code().String(), f.profileName, f.clock.Since(start))
		}()
	}
	numAll := len(nodes)
	want := NumFeasibleNodesToFind(f.percentage, numAll)
	start := 0
	if numAll > 0 {
		start = f.nextStartNodeIndex % numAll
	}
	if !f.HasFilterPlugins() {
		out := make([]*framework.NodeInfo, want)
		for i := range out {
			out[i] = nodes[(start+i)%numAll]
		}
		f.nextStartNodeIndex = (start + want) % max(numAll, 1)
		return out, nil
	}
	// The buffers are the framework's, reused from cycle to cycle (one
	// cycle runs at a time); feasible is only read before the next cycle.
	feasible := grow(&f.feasibleBuf, want)
	var found atomic.Int32
	var processed atomic.Int32
	statuses := grow(&f.statusBuf, numAll)
	clear(statuses)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errOnce sync.Once
	var firstErr error
	f.parallelizer.Until(ctx, numAll, func(i int) {
		ni := nodes[(start+i)%numAll]
		s := f.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		if s.Code() == framework.Error {
			errOnce.Do(func() { firstErr = s.AsError(); cancel() })
			return
		}
		if s.IsSuccess() {
			n := found.Add(1)
			if int(n) > want {
				cancel()
				found.Add(-1)
				return
			}
			feasible[n-1] = ni
			processed.Add(1)
			return
		}
		statuses[(start+i)%numAll] = s
		processed.Add(1)
	})
	if firstErr != nil {
		return nil, firstErr
	}
	for i, s := range statuses {
		if s != nil {
			diag.NodeToStatus[nodes[i].Node().Name] = s
			diag.UnschedulablePlugins[s.Plugin()] = true
		}
	}
	// Upstream moves the start by the number of nodes processed, so that
	// the next cycle begins after them.
	if numAll > 0 {
		f.nextStartNodeIndex = (start + int(processed.Load())) % numAll
	}
	return feasible[:found.Load()], nil
}

// grow returns (*buf)[:n], reallocating *buf when it is too short.
func grow[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	return (*buf)[:n]
}

func (f *Framework) prioritizeNodes(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) ([]NodePluginScores, error) {
	if !f.HasScorePlugins() {
		out := make([]NodePluginScores, len(nodes))
		for i, ni := range nodes {
			out[i] = NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return out, nil
	}
	if s := f.RunPreScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
		return nil, s.AsError()
	}
	scores, s := f.runScorePlugins(ctx, state, pod, nodes, &f.scoreBuf)
	if !s.IsSuccess() {
		return nil, s.AsError()
	}
	return scores, nil
}

// selectHost returns the node with the highest total score; ties are
// broken uniformly at random by reservoir sampling.
func (f *Framework) selectHost(scores []NodePluginScores) string {
	if len(scores) == 0 {
		return ""
	}
	best := scores[0].Name
	bestScore := scores[0].TotalScore
	ties := 1
	for _, s := range scores[1:] {
		switch {
		case s.TotalScore > bestScore:
			best, bestScore, ties = s.Name, s.TotalScore, 1
		case s.TotalScore == bestScore:
			ties++
			if f.rand.IntN(ties) == 0 {
				best = s.Name
			}
		}
	}
	return best
}
