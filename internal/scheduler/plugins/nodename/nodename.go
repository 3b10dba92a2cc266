// Package nodename filters out every node but the one named by
// spec.nodeName, when it is set.
package nodename

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeName"

// ErrReason is upstream's failure reason.
const ErrReason = "node(s) didn't match the requested node name"

// NodeName is the plugin.
type NodeName struct{}

var _ framework.FilterPlugin = (*NodeName)(nil)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) { return &NodeName{}, nil }

// Name implements framework.Plugin.
func (*NodeName) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != ni.Node().Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}
