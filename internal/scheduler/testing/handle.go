package testing

import (
	"context"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Handle is a framework.Handle over a fixed snapshot, for plugin tests.
type Handle struct {
	Snapshot  *framework.Snapshot
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Recorder receives events (default: a recorder that drops them).
	Recorder events.EventRecorder
	// Nominated are the pods nominated to each node.
	Nominated map[string][]*framework.PodInfo
}

var _ framework.Handle = (*Handle)(nil)

// NewHandle builds a handle over a snapshot of pods and nodes.
func NewHandle(pods []*v1.Pod, nodes []*v1.Node) *Handle {
	return &Handle{Snapshot: framework.NewSnapshot(pods, nodes)}
}

func (h *Handle) SnapshotSharedLister() framework.SharedLister { return h.Snapshot }
func (h *Handle) ClientSet() kubernetes.Interface              { return h.Client }
func (h *Handle) SharedInformerFactory() informers.SharedInformerFactory {
	return h.Informers
}
func (h *Handle) Parallelizer() framework.Parallelizer              { return framework.NewParallelizer(1) }
func (h *Handle) GetWaitingPod(types.UID) framework.WaitingPod      { return nil }
func (h *Handle) IterateOverWaitingPods(func(framework.WaitingPod)) {}
func (h *Handle) RejectWaitingPod(types.UID) bool                   { return false }

// EventRecorder implements framework.Handle.
func (h *Handle) EventRecorder() events.EventRecorder {
	if h.Recorder == nil {
		return &events.FakeRecorder{}
	}
	return h.Recorder
}

// NominatedPodsForNode implements framework.Handle.
func (h *Handle) NominatedPodsForNode(node string) []*framework.PodInfo { return h.Nominated[node] }

// RunFilter runs the plugin's PreFilter (if any) and then Filter on every
// node of the snapshot, returning the non-success statuses by node name
// (nil when all fit). A PreFilter rejection is returned for every node; a
// PreFilter Skip skips Filter.
func RunFilter(t interface{ Fatalf(string, ...any) }, h *Handle, p framework.FilterPlugin, pod *v1.Pod) map[string]*framework.Status {
	ctx := context.Background()
	state := framework.NewCycleState()
	nodes := h.Snapshot.List()
	if pf, ok := p.(framework.PreFilterPlugin); ok {
		_, s := pf.PreFilter(ctx, state, pod, nodes)
		if s.IsSkip() {
			return nil
		}
		if !s.IsSuccess() {
			out := map[string]*framework.Status{}
			for _, ni := range nodes {
				out[ni.Node().Name] = s
			}
			return out
		}
	}
	var out map[string]*framework.Status
	for _, ni := range nodes {
		if s := p.Filter(ctx, state, pod, ni); !s.IsSuccess() {
			if out == nil {
				out = map[string]*framework.Status{}
			}
			out[ni.Node().Name] = s
		}
	}
	return out
}

// RunScore runs PreScore (if any), Score on every node of the snapshot
// and NormalizeScore, returning the scores sorted by node name. A PreScore
// Skip returns nil.
func RunScore(t interface{ Fatalf(string, ...any) }, h *Handle, p framework.ScorePlugin, pod *v1.Pod) framework.NodeScoreList {
	ctx := context.Background()
	state := framework.NewCycleState()
	nodes := h.Snapshot.List()
	if ps, ok := p.(framework.PreScorePlugin); ok {
		s := ps.PreScore(ctx, state, pod, nodes)
		if s.IsSkip() {
			return nil
		}
		if !s.IsSuccess() {
			t.Fatalf("PreScore: %v", s)
		}
	}
	scores := make(framework.NodeScoreList, 0, len(nodes))
	for _, ni := range nodes {
		v, s := p.Score(ctx, state, pod, ni)
		if !s.IsSuccess() {
			t.Fatalf("Score %s: %v", ni.Node().Name, s)
		}
		scores = append(scores, framework.NodeScore{Name: ni.Node().Name, Score: v})
	}
	if ext := p.ScoreExtensions(); ext != nil {
		if s := ext.NormalizeScore(ctx, state, pod, scores); !s.IsSuccess() {
			t.Fatalf("NormalizeScore: %v", s)
		}
	}
	sort.Slice(scores, func(i, j int) bool { return scores[i].Name < scores[j].Name })
	return scores
}

// Scores builds an expected score list from name/score pairs.
func Scores(pairs ...any) framework.NodeScoreList {
	var out framework.NodeScoreList
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, framework.NodeScore{Name: pairs[i].(string), Score: int64(pairs[i+1].(int))})
	}
	return out
}
