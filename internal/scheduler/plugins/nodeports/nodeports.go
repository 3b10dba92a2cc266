// Package nodeports filters out nodes where a host port the pod asks for
// is already in use.
package nodeports

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodePorts"

// ErrReason is upstream's failure reason.
const ErrReason = "node(s) didn't have free ports for the requested pod ports"

const preFilterKey framework.StateKey = "PreFilter" + Name

// NodePorts is the plugin.
type NodePorts struct{}

var (
	_ framework.PreFilterPlugin = (*NodePorts)(nil)
	_ framework.FilterPlugin    = (*NodePorts)(nil)
)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) { return &NodePorts{}, nil }

// Name implements framework.Plugin.
func (*NodePorts) Name() string { return Name }

type preFilterState []v1.ContainerPort

func (s preFilterState) Clone() framework.StateData { return s }

// HostPorts returns the container ports of pod that use a host port.
func HostPorts(pod *v1.Pod) []v1.ContainerPort {
	var out []v1.ContainerPort
	add := func(cs []v1.Container) {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					out = append(out, p)
				}
			}
		}
	}
	add(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add([]v1.Container{c})
		}
	}
	return out
}

// PreFilter collects the pod's host ports; Skip when there are none.
func (*NodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	ports := HostPorts(pod)
	if len(ports) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, preFilterState(ports))
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*NodePorts) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (*NodePorts) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	ports, err := framework.ReadAs[preFilterState](state, preFilterKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if !Fits(ports, ni) {
		return framework.NewStatus(framework.Unschedulable, ErrReason)
	}
	return nil
}

// Fits reports whether all ports are free on the node.
func Fits(ports []v1.ContainerPort, ni *framework.NodeInfo) bool {
	for _, p := range ports {
		if ni.UsedPorts.CheckConflict(p.HostIP, string(p.Protocol), p.HostPort) {
			return false
		}
	}
	return true
}
