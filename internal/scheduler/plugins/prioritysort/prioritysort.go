// Package prioritysort is the default QueueSort plugin: higher
// spec.priority first, then the pod queued earlier.
package prioritysort

import (
	"context"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "PrioritySort"

// PrioritySort orders the active queue.
type PrioritySort struct{}

var _ framework.QueueSortPlugin = (*PrioritySort)(nil)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) {
	return &PrioritySort{}, nil
}

// Name implements framework.Plugin.
func (*PrioritySort) Name() string { return Name }

// Less implements framework.QueueSortPlugin.
func (*PrioritySort) Less(a, b *framework.QueuedPodInfo) bool {
	pa, pb := framework.PodPriority(a.Pod), framework.PodPriority(b.Pod)
	return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
}
