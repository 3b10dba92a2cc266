// Package imagelocality prefers nodes that already have the pod's images,
// weighting each image by how widely it is spread over the nodes (so that
// pods do not all pile onto the one node with a rare image).
package imagelocality

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "ImageLocality"

// Upstream's thresholds: below minThreshold the score is 0; the maximum is
// maxContainerThreshold per container.
const (
	mb                    int64 = 1024 * 1024
	minThreshold                = 23 * mb
	maxContainerThreshold       = 1000 * mb
)

// ImageLocality is the plugin.
type ImageLocality struct {
	handle framework.Handle
}

var (
	_ framework.PreScorePlugin = (*ImageLocality)(nil)
	_ framework.ScorePlugin    = (*ImageLocality)(nil)
)

const preScoreKey framework.StateKey = "PreScore" + Name

// preScoreState is what PreScore computes once for the cycle.
type preScoreState struct {
	// images are the pod's images, normalized, init containers first.
	images []string
	// totalNodes is the number of nodes in the snapshot.
	totalNodes int
	// numContainers counts the pod's containers and init containers.
	numContainers int
}

// Clone implements framework.StateData; the state is immutable.
func (s *preScoreState) Clone() framework.StateData { return s }

// New builds the plugin.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	return &ImageLocality{handle: h}, nil
}

// Name implements framework.Plugin.
func (*ImageLocality) Name() string { return Name }

func (p *ImageLocality) newState(pod *v1.Pod) *preScoreState {
	st := &preScoreState{numContainers: len(pod.Spec.Containers) + len(pod.Spec.InitContainers)}
	if lister := p.handle.SnapshotSharedLister(); lister != nil {
		st.totalNodes = len(lister.NodeInfos().List())
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			st.images = append(st.images, NormalizedImageName(c.Image))
		}
	}
	return st
}

// PreScore normalizes the pod's image names once, and returns Skip when
// none of the nodes has any of them: every node would score 0 (the sizes
// sum to nothing, below the minimum threshold), so Score need not run.
func (p *ImageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	st := p.newState(pod)
	if !anyNodeHasImage(nodes, st.images) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreKey, st)
	return nil
}

func anyNodeHasImage(nodes []*framework.NodeInfo, images []string) bool {
	for _, ni := range nodes {
		if len(ni.ImageStates) == 0 {
			continue
		}
		for _, img := range images {
			if _, ok := ni.ImageStates[img]; ok {
				return true
			}
		}
	}
	return false
}

// Score implements framework.ScorePlugin.
func (p *ImageLocality) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	st, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		st = p.newState(pod)
	}
	return calculatePriority(sumImageScores(ni, st.images, st.totalNodes), st.numContainers), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (*ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }

func calculatePriority(sum int64, numContainers int) int64 {
	maxThreshold := maxContainerThreshold * int64(numContainers)
	sum = min(max(sum, minThreshold), maxThreshold)
	return framework.MaxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold)
}

func sumImageScores(ni *framework.NodeInfo, images []string, totalNodes int) int64 {
	var sum int64
	for _, img := range images {
		if st, ok := ni.ImageStates[img]; ok {
			sum += int64(float64(st.Size) * float64(st.NumNodes) / float64(totalNodes))
		}
	}
	return sum
}

// NormalizedImageName adds the ":latest" tag to an image named with
// neither tag nor digest, as node status reports them.
func NormalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") && !strings.Contains(name, "@") {
		name += ":latest"
	}
	return name
}
