// Package nodeunschedulable filters out nodes with spec.unschedulable set,
// unless the pod tolerates the node.kubernetes.io/unschedulable taint.
package nodeunschedulable

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/tainttoleration"
)

// Name is the plugin's name.
const Name = "NodeUnschedulable"

// ErrReasonUnschedulable is upstream's failure reason.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// NodeUnschedulable is the plugin.
type NodeUnschedulable struct{}

var _ framework.FilterPlugin = (*NodeUnschedulable)(nil)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) {
	return &NodeUnschedulable{}, nil
}

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	if !ni.Node().Spec.Unschedulable {
		return nil
	}
	taint := &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	if tainttoleration.TolerationsTolerateTaint(pod.Spec.Tolerations, taint) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
