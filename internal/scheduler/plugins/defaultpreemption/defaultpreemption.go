// Package defaultpreemption is the DefaultPreemption PostFilter plugin:
// when no node fits a pod, it looks for a node where evicting pods of
// lower priority (the victims) would make room, and evicts them.
//
// It follows upstream's algorithm. Only nodes that filters rejected as
// Unschedulable are candidates. On each, every lower-priority pod is
// removed (through the PreFilter extensions' RemovePod) and the filters
// re-run; then as many victims as possible are reprieved, the most
// important first, those protected by a PodDisruptionBudget before the
// rest. The node is chosen by fewest PDB violations, lowest priority of the
// most important victim, smallest sum of priorities, fewest victims and
// latest start of the most important victims. The victims get a
// DisruptionTarget condition (reason PreemptionByScheduler) and are
// deleted, and the preemptor's status.nominatedNodeName is set.
//
// The search (Evaluator, SelectCandidate, EligibleToPreempt) is pure and
// works on the cycle's snapshot; only the plugin's eviction talks to the
// API server, through client-go.
package defaultpreemption

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
)

// Name is the plugin's name.
const Name = "DefaultPreemption"

// Args are DefaultPreemptionArgs of kubescheduler.config.k8s.io/v1.
type Args struct {
	// MinCandidateNodesPercentage is the least share of the potential
	// nodes to dry-run (default 10).
	MinCandidateNodesPercentage *int32 `json:"minCandidateNodesPercentage,omitempty"`
	// MinCandidateNodesAbsolute is the least number of nodes to dry-run
	// (default 100).
	MinCandidateNodesAbsolute *int32 `json:"minCandidateNodesAbsolute,omitempty"`
}

// Upstream's defaults of Args.
const (
	DefaultMinCandidateNodesPercentage int32 = 10
	DefaultMinCandidateNodesAbsolute   int32 = 100
)

// Options are the plugin's optional dependencies (see NewWithOptions).
type Options struct {
	// Rand picks where the dry run starts among the nodes (default: seeded
	// randomly).
	Rand *rand.Rand
	// PDBLister overrides the lister taken from the handle's informers.
	PDBLister policylisters.PodDisruptionBudgetLister
}

// DefaultPreemption is the plugin.
type DefaultPreemption struct {
	h         framework.Handle
	eval      Evaluator
	pdbLister policylisters.PodDisruptionBudgetLister

	randMu sync.Mutex
	rand   *rand.Rand
}

var _ framework.PostFilterPlugin = (*DefaultPreemption)(nil)

// New builds the plugin; it is the registry's factory.
func New(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	return NewWithOptions(ctx, args, h, Options{})
}

// NewWithOptions builds the plugin with explicit options. The handle must
// also be a Runner (runtime.Framework is). PDBs are read through the
// handle's informer factory, which must be started after the plugin is
// built; with no factory and no lister, no PDB is honoured.
func NewWithOptions(_ context.Context, args any, h framework.Handle, opts Options) (*DefaultPreemption, error) {
	a := Args{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	pct, abs := DefaultMinCandidateNodesPercentage, DefaultMinCandidateNodesAbsolute
	if a.MinCandidateNodesPercentage != nil {
		pct = *a.MinCandidateNodesPercentage
	}
	if a.MinCandidateNodesAbsolute != nil {
		abs = *a.MinCandidateNodesAbsolute
	}
	if pct < 0 || pct > 100 {
		return nil, fmt.Errorf("%s args: minCandidateNodesPercentage %d is not in [0, 100]", Name, pct)
	}
	if abs < 0 {
		return nil, fmt.Errorf("%s args: minCandidateNodesAbsolute %d must not be negative", Name, abs)
	}
	if pct == 0 && abs == 0 {
		return nil, fmt.Errorf("%s args: minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero", Name)
	}
	runner, ok := h.(Runner)
	if !ok {
		return nil, fmt.Errorf("%s: the framework handle %T cannot run filter plugins", Name, h)
	}
	pl := &DefaultPreemption{
		h: h,
		eval: Evaluator{
			Runner: runner, Parallelizer: h.Parallelizer(),
			MinCandidateNodesPercentage: pct, MinCandidateNodesAbsolute: abs,
		},
		pdbLister: opts.PDBLister,
		rand:      opts.Rand,
	}
	if pl.pdbLister == nil && h.SharedInformerFactory() != nil {
		pl.pdbLister = h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	}
	if pl.rand == nil {
		pl.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*DefaultPreemption) Name() string { return Name }

// PostFilter implements framework.PostFilterPlugin. On success the result
// nominates the chosen node; otherwise the status says why preemption
// does not help, prefixed with "preemption: ".
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	res, s := pl.preempt(ctx, state, pod, filtered)
	if msg := s.Message(); msg != "" {
		if s.Code() == framework.Error {
			return res, framework.AsStatus(fmt.Errorf("preemption: %w", s.AsError()))
		}
		return res, framework.NewStatus(s.Code(), "preemption: "+msg)
	}
	return res, s
}

// Decide runs the pure part of PostFilter: it returns the chosen
// candidate, or nil and the unschedulable status that explains why there
// is none.
func (pl *DefaultPreemption) Decide(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered framework.NodeToStatus) (*Candidate, *framework.Status) {
	lister := pl.h.SnapshotSharedLister()
	if lister == nil {
		return nil, framework.AsStatus(fmt.Errorf("no snapshot to preempt on"))
	}
	nodes := lister.NodeInfos()
	if ok, msg := EligibleToPreempt(pod, nodes, filtered); !ok {
		return nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	pdbs, err := pl.pdbs()
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	all := nodes.List()
	pl.randMu.Lock()
	offset := 0
	if len(all) > 0 {
		offset = pl.rand.IntN(len(all))
	}
	pl.randMu.Unlock()
	cands, statuses, err := pl.eval.FindCandidates(ctx, state, pod, all, filtered, pdbs, offset)
	if err != nil && len(cands) == 0 {
		return nil, framework.AsStatus(err)
	}
	if len(cands) == 0 {
		fe := &runtime.FitError{Pod: pod, NumAllNodes: len(all), Diagnosis: runtime.Diagnosis{NodeToStatus: statuses}}
		return nil, framework.NewStatus(framework.Unschedulable, fe.Error())
	}
	best := SelectCandidate(cands)
	if best == nil || best.Node == "" {
		return nil, framework.NewStatus(framework.Unschedulable, msgNoCandidate)
	}
	return best, nil
}

func (pl *DefaultPreemption) preempt(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	best, s := pl.Decide(ctx, state, pod, filtered)
	if best == nil {
		if s.IsRejected() && pod.Status.NominatedNodeName != "" {
			// The old nomination no longer holds: clear it.
			if err := pl.nominate(ctx, pod, ""); err != nil {
				klog.FromContext(ctx).V(2).Info("Could not clear the nominated node", "pod", klog.KObj(pod), "err", err)
			}
			return &framework.PostFilterResult{}, s
		}
		return nil, s
	}
	if err := pl.evict(ctx, best, pod); err != nil {
		return nil, framework.AsStatus(err)
	}
	// Lower-priority pods nominated to the node may no longer fit there:
	// clearing their nomination sends them back to find another node.
	pl.clearNominations(ctx, LowerPriorityNominatedPods(pl.h, pod, best.Node))
	if err := pl.nominate(ctx, pod, best.Node); err != nil {
		return nil, framework.AsStatus(err)
	}
	return &framework.PostFilterResult{NominatedNodeName: best.Node}, nil
}

func (pl *DefaultPreemption) pdbs() ([]*policyv1.PodDisruptionBudget, error) {
	if pl.pdbLister == nil {
		return nil, nil
	}
	pdbs, err := pl.pdbLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list pod disruption budgets: %w", err)
	}
	return pdbs, nil
}
