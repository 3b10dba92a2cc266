package framework

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Score bounds: every Score plugin's normalized score is in [MinNodeScore,
// MaxNodeScore]; the framework then multiplies it by the plugin's weight.
const (
	MinNodeScore int64 = 0
	MaxNodeScore int64 = 100
)

// Plugin is what every plugin implements.
type Plugin interface {
	Name() string
}

// LessFunc orders pods in the active queue.
type LessFunc func(a, b *QueuedPodInfo) bool

// QueueSortPlugin orders the active queue; exactly one is enabled.
type QueueSortPlugin interface {
	Plugin
	Less(a, b *QueuedPodInfo) bool
}

// PreEnqueuePlugin decides whether a pod may enter the active queue. A
// non-success status keeps it among the unschedulable pods.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(ctx context.Context, pod *v1.Pod) *Status
}

// PreFilterResult narrows the nodes to evaluate. A nil result, or nil
// NodeNames, means all nodes.
type PreFilterResult struct {
	NodeNames map[string]bool
}

// AllNodes reports whether the result does not narrow the nodes.
func (r *PreFilterResult) AllNodes() bool { return r == nil || r.NodeNames == nil }

// Merge intersects two results.
func (r *PreFilterResult) Merge(o *PreFilterResult) *PreFilterResult {
	if r.AllNodes() {
		return o
	}
	if o.AllNodes() {
		return r
	}
	out := map[string]bool{}
	for n := range r.NodeNames {
		if o.NodeNames[n] {
			out[n] = true
		}
	}
	return &PreFilterResult{NodeNames: out}
}

// PreFilterExtensions update a plugin's PreFilter state when preemption
// simulates adding or removing a pod on a node.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *v1.Pod, podInfoToRemove *PodInfo, nodeInfo *NodeInfo) *Status
}

// PreFilterPlugin runs once a cycle before Filter. Skip skips the plugin's
// Filter for this pod; a rejection makes the pod unschedulable at once.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) (*PreFilterResult, *Status)
	// PreFilterExtensions may return nil.
	PreFilterExtensions() PreFilterExtensions
}

// FilterPlugin decides whether pod fits one node. It is called in parallel
// for many nodes.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) *Status
}

// NodeToStatus holds why each rejected node was rejected.
type NodeToStatus map[string]*Status

// PostFilterResult is what a PostFilter plugin proposes: a nominated node.
type PostFilterResult struct {
	NominatedNodeName string
}

// PostFilterPlugin runs when no node fits (preemption).
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *v1.Pod, filtered NodeToStatus) (*PostFilterResult, *Status)
}

// PreScorePlugin runs once before Score with the feasible nodes. Skip
// skips the plugin's Score.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *v1.Pod, nodes []*NodeInfo) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// NodeScoreList is the scores of one plugin over the feasible nodes.
type NodeScoreList []NodeScore

// ScoreExtensions normalizes a plugin's raw scores into [0, MaxNodeScore].
type ScoreExtensions interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *v1.Pod, scores NodeScoreList) *Status
}

// ScorePlugin ranks feasible nodes; called in parallel over nodes.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *v1.Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions may return nil.
	ScoreExtensions() ScoreExtensions
}

// ReservePlugin is told when the pod is assumed on a node (Reserve) and
// when that is undone (Unreserve, which must be idempotent).
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}

// PermitPlugin may approve, reject or hold (Wait, for at most the returned
// timeout) a pod before binding.
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin runs before binding (e.g. to provision volumes).
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// BindPlugin binds the pod to the node. Skip hands over to the next one.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string) *Status
}

// PostBindPlugin is told after a successful bind.
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *v1.Pod, nodeName string)
}

// WaitingPod is a pod held by Permit plugins.
type WaitingPod interface {
	GetPod() *v1.Pod
	// GetPendingPlugins lists the plugins that have not allowed it yet.
	GetPendingPlugins() []string
	// Allow records plugin's approval; the pod goes on once all approve.
	Allow(pluginName string)
	// Reject fails the pod's permit with msg.
	Reject(pluginName, msg string)
}

// PodNominator knows the pods nominated to nodes by preemption (pods
// waiting for the room their victims leave), which the filters treat as
// already there when they are at least as important as the pod being
// scheduled.
type PodNominator interface {
	// NominatedPodsForNode returns the pods nominated to node; the caller
	// must not change the list.
	NominatedPodsForNode(nodeName string) []*PodInfo
}

// Handle is what plugins get from the framework.
type Handle interface {
	PodNominator
	// SnapshotSharedLister is the snapshot of the current cycle.
	SnapshotSharedLister() SharedLister
	// ClientSet is for Bind plugins only; nil in pure tests.
	ClientSet() kubernetes.Interface
	// SharedInformerFactory gives listers for kinds outside the snapshot
	// (services, replica sets, namespaces); may be nil in tests.
	SharedInformerFactory() informers.SharedInformerFactory
	// Parallelizer runs work over nodes with bounded workers.
	Parallelizer() Parallelizer
	// GetWaitingPod returns a pod held at Permit, or nil.
	GetWaitingPod(uid types.UID) WaitingPod
	// IterateOverWaitingPods calls fn for each held pod.
	IterateOverWaitingPods(fn func(WaitingPod))
	// RejectWaitingPod rejects a held pod; false if none was held.
	RejectWaitingPod(uid types.UID) bool
	// EventRecorder records events about pods (e.g. Preempted on a
	// victim); it is never nil.
	EventRecorder() events.EventRecorder
}
