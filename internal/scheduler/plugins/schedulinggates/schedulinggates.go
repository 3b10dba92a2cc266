// Package schedulinggates keeps pods with spec.schedulingGates out of the
// active queue (PreEnqueue) until every gate is removed.
package schedulinggates

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "SchedulingGates"

// SchedulingGates is the plugin.
type SchedulingGates struct{}

var _ framework.PreEnqueuePlugin = (*SchedulingGates)(nil)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) {
	return &SchedulingGates{}, nil
}

// Name implements framework.Plugin.
func (*SchedulingGates) Name() string { return Name }

// PreEnqueue implements framework.PreEnqueuePlugin.
func (*SchedulingGates) PreEnqueue(_ context.Context, pod *v1.Pod) *framework.Status {
	if len(pod.Spec.SchedulingGates) == 0 {
		return nil
	}
	gates := make([]string, len(pod.Spec.SchedulingGates))
	for i, g := range pod.Spec.SchedulingGates {
		gates[i] = g.Name
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for scheduling gates: %v", gates))
}
