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

var _ framework.ScorePlugin = (*ImageLocality)(nil)

// New builds the plugin.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	return &ImageLocality{handle: h}, nil
}

// Name implements framework.Plugin.
func (*ImageLocality) Name() string { return Name }

// Score implements framework.ScorePlugin.
func (p *ImageLocality) Score(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	total := p.handle.SnapshotSharedLister().NodeInfos().List()
	numContainers := len(pod.Spec.Containers) + len(pod.Spec.InitContainers)
	return calculatePriority(sumImageScores(ni, pod, len(total)), numContainers), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (*ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }

func calculatePriority(sum int64, numContainers int) int64 {
	maxThreshold := maxContainerThreshold * int64(numContainers)
	sum = min(max(sum, minThreshold), maxThreshold)
	return framework.MaxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold)
}

func sumImageScores(ni *framework.NodeInfo, pod *v1.Pod, totalNodes int) int64 {
	var sum int64
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if st, ok := ni.ImageStates[NormalizedImageName(c.Image)]; ok {
				sum += int64(float64(st.Size) * float64(st.NumNodes) / float64(totalNodes))
			}
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
