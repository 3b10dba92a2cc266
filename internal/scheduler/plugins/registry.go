// Package plugins assembles the in-tree plugins: the registry that names
// them and upstream's default profile.
package plugins

import (
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultbinder"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/defaultpreemption"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/dynamicresources"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/imagelocality"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/interpodaffinity"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeaffinity"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodename"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeports"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/noderesources"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeunschedulable"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/podtopologyspread"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/prioritysort"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/schedulinggates"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/tainttoleration"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/volumebinding"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/volumerestrictions"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/zoneaffinity"
)

// DefaultSchedulerName is the profile used for pods without
// spec.schedulerName.
const DefaultSchedulerName = "default-scheduler"

// NewInTreeRegistry returns a registry of every in-tree plugin.
func NewInTreeRegistry() framework.Registry {
	return framework.Registry{
		schedulinggates.Name:                 schedulinggates.New,
		prioritysort.Name:                    prioritysort.New,
		nodeunschedulable.Name:               nodeunschedulable.New,
		nodename.Name:                        nodename.New,
		tainttoleration.Name:                 tainttoleration.New,
		nodeaffinity.Name:                    nodeaffinity.New,
		nodeports.Name:                       nodeports.New,
		noderesources.FitName:                noderesources.NewFit,
		noderesources.BalancedAllocationName: noderesources.NewBalancedAllocation,
		podtopologyspread.Name:               podtopologyspread.New,
		interpodaffinity.Name:                interpodaffinity.New,
		imagelocality.Name:                   imagelocality.New,
		defaultbinder.Name:                   defaultbinder.New,
		defaultpreemption.Name:               defaultpreemption.New,
		zoneaffinity.Name:                    zoneaffinity.New,
		volumebinding.Name:                   volumebinding.New,
		volumerestrictions.Name:              volumerestrictions.New,
		dynamicresources.Name:                dynamicresources.New,
	}
}

// DefaultProfile is upstream's default profile (kubescheduler.config.k8s.io/v1
// MultiPoint plugins and score weights). Of the volume plugins
// VolumeRestrictions (ReadWriteOncePod only) and VolumeBinding are there
// (NodeVolumeLimits and VolumeZone are not built; VolumeBinding has no
// Score here).
func DefaultProfile() runtime.Profile {
	return runtime.Profile{
		SchedulerName: DefaultSchedulerName,
		Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{
			{Name: schedulinggates.Name},
			{Name: prioritysort.Name},
			{Name: nodeunschedulable.Name},
			{Name: nodename.Name},
			{Name: tainttoleration.Name, Weight: 3},
			{Name: nodeaffinity.Name, Weight: 2},
			{Name: nodeports.Name},
			{Name: noderesources.FitName, Weight: 1},
			{Name: volumerestrictions.Name},
			{Name: volumebinding.Name},
			{Name: podtopologyspread.Name, Weight: 2},
			{Name: interpodaffinity.Name, Weight: 2},
			{Name: dynamicresources.Name},
			{Name: noderesources.BalancedAllocationName, Weight: 1},
			{Name: imagelocality.Name, Weight: 1},
			{Name: defaultpreemption.Name},
			{Name: defaultbinder.Name},
		}}},
	}
}
