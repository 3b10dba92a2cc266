// Package framework defines the scheduler's plugin contract: one small
// interface per upstream extension point (QueueSort, PreEnqueue, PreFilter,
// Filter, PostFilter, PreScore, Score, Reserve, Permit, PreBind, Bind,
// PostBind), the per-cycle state plugins share, the nil-safe Status they
// return, and the NodeInfo/Snapshot view of the cluster they decide on.
//
// The package is pure: it holds no client and does no I/O. Plugins read the
// cluster only through the Snapshot taken at the start of each cycle (and,
// when they need other kinds, through the informer listers of the Handle);
// only a Bind plugin writes to the API server. The Handle also gives the
// pods nominated to each node by preemption (PodNominator; the framework
// runtime's Filter counts those of equal or higher priority as placed) and
// an EventRecorder (DefaultPreemption records Preempted on its victims).
//
// Plugins are built by an explicit Registry (name → Factory); nothing is
// registered by init().
package framework
