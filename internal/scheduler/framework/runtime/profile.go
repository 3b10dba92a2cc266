package runtime

// Profile configures one framework, in the shape of a profile of
// upstream's KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
type Profile struct {
	// SchedulerName selects the profile by spec.schedulerName.
	SchedulerName string
	// Plugins enables and disables plugins per extension point.
	Plugins Plugins
	// PluginConfig holds per-plugin args.
	PluginConfig []PluginConfig
	// PercentageOfNodesToScore: 0 means upstream's adaptive default; 100
	// means all nodes.
	PercentageOfNodesToScore int32
}

// Plugins lists the plugins of each extension point. MultiPoint plugins
// are enabled at every extension point they implement.
type Plugins struct {
	PreEnqueue PluginSet
	QueueSort  PluginSet
	PreFilter  PluginSet
	Filter     PluginSet
	PostFilter PluginSet
	PreScore   PluginSet
	Score      PluginSet
	Reserve    PluginSet
	Permit     PluginSet
	PreBind    PluginSet
	Bind       PluginSet
	PostBind   PluginSet
	MultiPoint PluginSet
}

// PluginSet enables and disables plugins; the name "*" in Disabled
// disables every plugin not enabled at this point explicitly (e.g. the
// MultiPoint ones).
type PluginSet struct {
	Enabled  []PluginRef
	Disabled []PluginRef
}

// PluginRef names a plugin; Weight matters for Score (0 means 1).
type PluginRef struct {
	Name   string
	Weight int32
}

// PluginConfig carries the args of one plugin (see framework.DecodeArgs).
type PluginConfig struct {
	Name string
	Args any
}
