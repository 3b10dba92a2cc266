// Package runtime builds a scheduling framework from a Profile and runs
// its plugins: the extension points of one scheduling cycle (PreFilter,
// Filter, PostFilter, PreScore, Score, Reserve, Permit) and of the binding
// cycle (PreBind, Bind, PostBind), plus the node selection of a cycle
// (SchedulePod).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// MaxTimeout bounds how long a Permit plugin may hold a pod.
const MaxTimeout = 15 * time.Minute

// Options are the framework's optional dependencies; the zero value works
// for pure tests.
type Options struct {
	ClientSet       kubernetes.Interface
	InformerFactory informers.SharedInformerFactory
	// SnapshotSharedLister is the snapshot plugins read; the scheduler
	// points it at the snapshot it refreshes each cycle. SetSnapshot
	// replaces it.
	SnapshotSharedLister framework.SharedLister
	// Parallelism is the number of workers for Filter/Score
	// (default framework.DefaultParallelism).
	Parallelism int
	// Clock drives Permit timeouts (default the real clock).
	Clock clock.WithDelayedExecution
	// Rand breaks ties between best-scoring nodes (default: seeded
	// randomly). It is used only from SchedulePod.
	Rand *rand.Rand
	// PodNominator knows the pods nominated to nodes (the scheduling
	// queue's); Filter then counts those of equal or higher priority as
	// already placed. Default: none.
	PodNominator framework.PodNominator
	// EventRecorder is handed to plugins (default: drops the events).
	EventRecorder events.EventRecorder
	// Metrics receives the timings of the extension points and, in the
	// cycles whose state asks for it, of each plugin (default: none).
	Metrics MetricsRecorder
}

// MetricsRecorder receives the framework's timings: the hook behind
// scheduler_framework_extension_point_duration_seconds and
// scheduler_plugin_execution_duration_seconds.
type MetricsRecorder interface {
	// ObserveExtensionPoint records one run of all the plugins of an
	// extension point (Filter: over all the nodes of a cycle).
	ObserveExtensionPoint(point, status, profile string, d time.Duration)
	// ObservePlugin records one call of one plugin.
	ObservePlugin(point, plugin, status string, d time.Duration)
}

// Extension points as the metrics label them.
const (
	PreFilter = "PreFilter"
	Filter    = "Filter"
	PreScore  = "PreScore"
	Score     = "Score"
)

// nopRecorder drops events.
type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

type scorePlugin struct {
	framework.ScorePlugin
	weight int64
}

// Framework is a built profile.
type Framework struct {
	profileName string
	percentage  int32

	preEnqueue []framework.PreEnqueuePlugin
	queueSort  framework.QueueSortPlugin
	preFilter  []framework.PreFilterPlugin
	filter     []framework.FilterPlugin
	postFilter []framework.PostFilterPlugin
	preScore   []framework.PreScorePlugin
	score      []scorePlugin
	reserve    []framework.ReservePlugin
	permit     []framework.PermitPlugin
	preBind    []framework.PreBindPlugin
	bind       []framework.BindPlugin
	postBind   []framework.PostBindPlugin

	clientSet    kubernetes.Interface
	informers    informers.SharedInformerFactory
	parallelizer framework.Parallelizer
	clock        clock.WithDelayedExecution
	waiting      *waitingPods
	nominator    framework.PodNominator
	recorder     events.EventRecorder
	metrics      MetricsRecorder

	mu       sync.RWMutex
	snapshot framework.SharedLister

	// nextStartNodeIndex rotates where SchedulePod starts over the nodes,
	// so that all nodes get evaluated over successive cycles.
	nextStartNodeIndex int
	rand               *rand.Rand
	// feasibleBuf and statusBuf are SchedulePod's buffers, reused from
	// cycle to cycle.
	feasibleBuf []*framework.NodeInfo
	statusBuf   []*framework.Status
	scoreBuf    scoreBuffers
}

var _ framework.Handle = (*Framework)(nil)

// New builds the plugins named by profile from registry.
func New(ctx context.Context, registry framework.Registry, profile Profile, opts Options) (*Framework, error) {
	f := &Framework{
		profileName:  profile.SchedulerName,
		percentage:   profile.PercentageOfNodesToScore,
		clientSet:    opts.ClientSet,
		informers:    opts.InformerFactory,
		parallelizer: framework.NewParallelizer(cmpOr(opts.Parallelism, framework.DefaultParallelism)),
		clock:        opts.Clock,
		waiting:      &waitingPods{pods: map[types.UID]*waitingPod{}},
		snapshot:     opts.SnapshotSharedLister,
		rand:         opts.Rand,
		nominator:    opts.PodNominator,
		recorder:     opts.EventRecorder,
		metrics:      opts.Metrics,
	}
	if f.recorder == nil {
		f.recorder = nopRecorder{}
	}
	if f.clock == nil {
		f.clock = clock.RealClock{}
	}
	if f.rand == nil {
		f.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if f.percentage < 0 || f.percentage > 100 {
		return nil, fmt.Errorf("profile %q: percentageOfNodesToScore %d is not in [0, 100]", profile.SchedulerName, f.percentage)
	}

	args := map[string]any{}
	for _, pc := range profile.PluginConfig {
		if _, dup := args[pc.Name]; dup {
			return nil, fmt.Errorf("profile %q: repeated config for plugin %q", profile.SchedulerName, pc.Name)
		}
		args[pc.Name] = pc.Args
	}

	// Build every plugin named anywhere, once.
	plugins := map[string]framework.Plugin{}
	build := func(name string) (framework.Plugin, error) {
		if p, ok := plugins[name]; ok {
			return p, nil
		}
		factory, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("profile %q: plugin %q is not registered", profile.SchedulerName, name)
		}
		p, err := factory(ctx, args[name], f)
		if err != nil {
			return nil, fmt.Errorf("profile %q: build plugin %q: %w", profile.SchedulerName, name, err)
		}
		plugins[name] = p
		return p, nil
	}

	pl := profile.Plugins
	type point struct {
		set   PluginSet
		match func(framework.Plugin) bool
		add   func(framework.Plugin, int32)
	}
	points := []point{
		{pl.PreEnqueue, is[framework.PreEnqueuePlugin], func(p framework.Plugin, _ int32) { f.preEnqueue = append(f.preEnqueue, p.(framework.PreEnqueuePlugin)) }},
		{pl.QueueSort, is[framework.QueueSortPlugin], func(p framework.Plugin, _ int32) {
			if f.queueSort == nil {
				f.queueSort = p.(framework.QueueSortPlugin)
			}
		}},
		{pl.PreFilter, is[framework.PreFilterPlugin], func(p framework.Plugin, _ int32) { f.preFilter = append(f.preFilter, p.(framework.PreFilterPlugin)) }},
		{pl.Filter, is[framework.FilterPlugin], func(p framework.Plugin, _ int32) { f.filter = append(f.filter, p.(framework.FilterPlugin)) }},
		{pl.PostFilter, is[framework.PostFilterPlugin], func(p framework.Plugin, _ int32) { f.postFilter = append(f.postFilter, p.(framework.PostFilterPlugin)) }},
		{pl.PreScore, is[framework.PreScorePlugin], func(p framework.Plugin, _ int32) { f.preScore = append(f.preScore, p.(framework.PreScorePlugin)) }},
		{pl.Score, is[framework.ScorePlugin], func(p framework.Plugin, w int32) {
			f.score = append(f.score, scorePlugin{ScorePlugin: p.(framework.ScorePlugin), weight: int64(max(w, 1))})
		}},
		{pl.Reserve, is[framework.ReservePlugin], func(p framework.Plugin, _ int32) { f.reserve = append(f.reserve, p.(framework.ReservePlugin)) }},
		{pl.Permit, is[framework.PermitPlugin], func(p framework.Plugin, _ int32) { f.permit = append(f.permit, p.(framework.PermitPlugin)) }},
		{pl.PreBind, is[framework.PreBindPlugin], func(p framework.Plugin, _ int32) { f.preBind = append(f.preBind, p.(framework.PreBindPlugin)) }},
		{pl.Bind, is[framework.BindPlugin], func(p framework.Plugin, _ int32) { f.bind = append(f.bind, p.(framework.BindPlugin)) }},
		{pl.PostBind, is[framework.PostBindPlugin], func(p framework.Plugin, _ int32) { f.postBind = append(f.postBind, p.(framework.PostBindPlugin)) }},
	}
	multiDisabled := names(pl.MultiPoint.Disabled)
	for _, pt := range points {
		disabled := names(pt.set.Disabled)
		seen := map[string]bool{}
		// Plugins enabled at this point explicitly come first, in order.
		for _, ref := range pt.set.Enabled {
			if seen[ref.Name] {
				return nil, fmt.Errorf("profile %q: plugin %q enabled twice at one extension point", profile.SchedulerName, ref.Name)
			}
			p, err := build(ref.Name)
			if err != nil {
				return nil, err
			}
			if !pt.match(p) {
				return nil, fmt.Errorf("profile %q: plugin %q does not implement this extension point", profile.SchedulerName, ref.Name)
			}
			seen[ref.Name] = true
			pt.add(p, ref.Weight)
		}
		if disabled["*"] || multiDisabled["*"] {
			continue
		}
		for _, ref := range pl.MultiPoint.Enabled {
			if seen[ref.Name] || disabled[ref.Name] || multiDisabled[ref.Name] {
				continue
			}
			p, err := build(ref.Name)
			if err != nil {
				return nil, err
			}
			if !pt.match(p) {
				continue
			}
			seen[ref.Name] = true
			pt.add(p, ref.Weight)
		}
	}
	for name := range args {
		if _, ok := plugins[name]; !ok {
			return nil, fmt.Errorf("profile %q: config for plugin %q, which is not enabled", profile.SchedulerName, name)
		}
	}
	if f.queueSort == nil {
		return nil, fmt.Errorf("profile %q: no queue sort plugin is enabled", profile.SchedulerName)
	}
	if len(f.bind) == 0 {
		return nil, fmt.Errorf("profile %q: no bind plugin is enabled", profile.SchedulerName)
	}
	return f, nil
}

func is[T any](p framework.Plugin) bool { _, ok := p.(T); return ok }

func names(refs []PluginRef) map[string]bool {
	out := map[string]bool{}
	for _, r := range refs {
		out[r.Name] = true
	}
	return out
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// ProfileName is the profile's scheduler name.
func (f *Framework) ProfileName() string { return f.profileName }

// SetSnapshot points the plugins at the snapshot of the coming cycle.
func (f *Framework) SetSnapshot(s framework.SharedLister) {
	f.mu.Lock()
	f.snapshot = s
	f.mu.Unlock()
}

// SnapshotSharedLister implements framework.Handle.
func (f *Framework) SnapshotSharedLister() framework.SharedLister {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.snapshot
}

// ClientSet implements framework.Handle.
func (f *Framework) ClientSet() kubernetes.Interface { return f.clientSet }

// SharedInformerFactory implements framework.Handle.
func (f *Framework) SharedInformerFactory() informers.SharedInformerFactory { return f.informers }

// Parallelizer implements framework.Handle.
func (f *Framework) Parallelizer() framework.Parallelizer { return f.parallelizer }

// GetWaitingPod implements framework.Handle.
func (f *Framework) GetWaitingPod(uid types.UID) framework.WaitingPod {
	if wp := f.waiting.get(uid); wp != nil {
		return wp
	}
	return nil
}

// IterateOverWaitingPods implements framework.Handle.
func (f *Framework) IterateOverWaitingPods(fn func(framework.WaitingPod)) { f.waiting.each(fn) }

// RejectWaitingPod implements framework.Handle.
func (f *Framework) RejectWaitingPod(uid types.UID) bool {
	if wp := f.waiting.get(uid); wp != nil {
		wp.Reject("", "removed")
		return true
	}
	return false
}

// EventRecorder implements framework.Handle.
func (f *Framework) EventRecorder() events.EventRecorder { return f.recorder }

// NominatedPodsForNode implements framework.Handle.
func (f *Framework) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	if f.nominator == nil {
		return nil
	}
	return f.nominator.NominatedPodsForNode(nodeName)
}

// QueueSortFunc returns the Less of the queue sort plugin.
func (f *Framework) QueueSortFunc() framework.LessFunc { return f.queueSort.Less }

// PluginNames lists the enabled plugins per extension point, for logs and
// tests.
func (f *Framework) PluginNames() map[string][]string {
	out := map[string][]string{}
	add := func(point string, p framework.Plugin) { out[point] = append(out[point], p.Name()) }
	for _, p := range f.preEnqueue {
		add("PreEnqueue", p)
	}
	add("QueueSort", f.queueSort)
	for _, p := range f.preFilter {
		add("PreFilter", p)
	}
	for _, p := range f.filter {
		add("Filter", p)
	}
	for _, p := range f.postFilter {
		add("PostFilter", p)
	}
	for _, p := range f.preScore {
		add("PreScore", p)
	}
	for _, p := range f.score {
		add("Score", p)
	}
	for _, p := range f.reserve {
		add("Reserve", p)
	}
	for _, p := range f.permit {
		add("Permit", p)
	}
	for _, p := range f.preBind {
		add("PreBind", p)
	}
	for _, p := range f.bind {
		add("Bind", p)
	}
	for _, p := range f.postBind {
		add("PostBind", p)
	}
	return out
}

// ScoreWeights returns the weight of each Score plugin.
func (f *Framework) ScoreWeights() map[string]int64 {
	out := map[string]int64{}
	for _, p := range f.score {
		out[p.Name()] = p.weight
	}
	return out
}

// HasFilterPlugins reports whether any Filter plugin is enabled.
func (f *Framework) HasFilterPlugins() bool { return len(f.filter) > 0 }

// HasPostFilterPlugins reports whether any PostFilter plugin is enabled.
func (f *Framework) HasPostFilterPlugins() bool { return len(f.postFilter) > 0 }

// HasScorePlugins reports whether any Score plugin is enabled.
func (f *Framework) HasScorePlugins() bool { return len(f.score) > 0 }

// RunPreEnqueuePlugins runs PreEnqueue; the first non-success stops.
func (f *Framework) RunPreEnqueuePlugins(ctx context.Context, pod *v1.Pod) *framework.Status {
	for _, p := range f.preEnqueue {
		if s := p.PreEnqueue(ctx, pod); !s.IsSuccess() {
			return s.WithPlugin(p.Name())
		}
	}
	return nil
}

// RunPreFilterPlugins runs PreFilter. It returns the merged node
// restriction, and a rejection (with the plugin set) or an Error. Plugins
// returning Skip are recorded in state so that their Filter is skipped.
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (_ *framework.PreFilterResult, status *framework.Status) {
	if f.metrics != nil {
		defer f.observePoint(PreFilter, f.clock.Now(), &status)
	}
	nodes := f.nodeList()
	var result *framework.PreFilterResult
	skip := map[string]bool{}
	for _, p := range f.preFilter {
		var r *framework.PreFilterResult
		var s *framework.Status
		f.timed(state, PreFilter, p, func() *framework.Status { r, s = p.PreFilter(ctx, state, pod, nodes); return s })
		if s.IsSkip() {
			skip[p.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			s.WithPlugin(p.Name())
			if s.IsRejected() {
				return nil, s
			}
			return nil, framework.AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
		result = result.Merge(r)
		if !result.AllNodes() && len(result.NodeNames) == 0 {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
				"node(s) didn't satisfy plugin(s) ["+p.Name()+"] simultaneously").WithPlugin(p.Name())
		}
	}
	state.SetSkipFilter(skip)
	return result, nil
}

// RunPreFilterExtensionAddPod runs AddPod of the PreFilter extensions.
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, pod *v1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	for _, p := range f.preFilter {
		ext := p.PreFilterExtensions()
		if ext == nil || state.SkipFilter(p.Name()) {
			continue
		}
		if s := ext.AddPod(ctx, state, pod, add, ni); !s.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running AddPod on PreFilter plugin %q: %w", p.Name(), s.AsError()))
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod runs RemovePod of the PreFilter extensions.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, pod *v1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	for _, p := range f.preFilter {
		ext := p.PreFilterExtensions()
		if ext == nil || state.SkipFilter(p.Name()) {
			continue
		}
		if s := ext.RemovePod(ctx, state, pod, remove, ni); !s.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running RemovePod on PreFilter plugin %q: %w", p.Name(), s.AsError()))
		}
	}
	return nil
}

// RunFilterPlugins runs Filter on one node; the first failure stops and
// is returned with the plugin's name.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	for _, p := range f.filter {
		if state.SkipFilter(p.Name()) {
			continue
		}
		var s *framework.Status
		if f.metrics != nil && state.ShouldRecordPluginMetrics() {
			f.timed(state, Filter, p, func() *framework.Status { s = p.Filter(ctx, state, pod, ni); return s })
		} else {
			s = p.Filter(ctx, state, pod, ni)
		}
		if s.IsSuccess() {
			continue
		}
		if !s.IsRejected() {
			return framework.AsStatus(fmt.Errorf("running %q filter plugin: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
		return s.WithPlugin(p.Name())
	}
	return nil
}

// RunFilterPluginsWithNominatedPods runs Filter on one node the way
// upstream does when pods are nominated to it: if some nominated pods
// (other than pod) have a priority equal to or higher than pod's, the
// filters run first with them added to a copy of the node and of the
// cycle state (through the PreFilter extensions' AddPod), so that pod
// cannot take the room a preemptor freed for them; if that passes, they
// run again without them, because filters such as inter-pod affinity may
// only pass while the nominated pods are absent. Pods of lower priority
// are ignored: pod may take room freed for them. Preemption calls it too,
// on a node from which it removed the victims.
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	added, addedState, addedInfo, err := f.addNominatedPods(ctx, state, pod, ni)
	if err != nil {
		return framework.AsStatus(err)
	}
	if added {
		if s := f.RunFilterPlugins(ctx, addedState, pod, addedInfo); !s.IsSuccess() {
			return s
		}
	}
	return f.RunFilterPlugins(ctx, state, pod, ni)
}

// addNominatedPods returns copies of state and ni with the pods nominated
// to ni's node whose priority is at least pod's, and whether there were
// any (if not, state and ni are returned as they are).
func (f *Framework) addNominatedPods(ctx context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (bool, *framework.CycleState, *framework.NodeInfo, error) {
	if f.nominator == nil || ni.Node() == nil {
		return false, state, ni, nil
	}
	nominated := f.nominator.NominatedPodsForNode(ni.Node().Name)
	if len(nominated) == 0 {
		return false, state, ni, nil
	}
	priority := framework.PodPriority(pod)
	var stateOut *framework.CycleState
	var niOut *framework.NodeInfo
	for _, pi := range nominated {
		if pi.Pod.UID == pod.UID || framework.PodPriority(pi.Pod) < priority {
			continue
		}
		if niOut == nil {
			stateOut, niOut = state.Clone(), ni.Clone()
		}
		niOut.AddPodInfo(pi)
		if s := f.RunPreFilterExtensionAddPod(ctx, stateOut, pod, pi, niOut); !s.IsSuccess() {
			return false, state, ni, s.AsError()
		}
	}
	if niOut == nil {
		return false, state, ni, nil
	}
	return true, stateOut, niOut, nil
}

// RunPostFilterPlugins runs PostFilter until one succeeds or errors.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, filtered framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	var reasons []string
	var result *framework.PostFilterResult
	for _, p := range f.postFilter {
		r, s := p.PostFilter(ctx, state, pod, filtered)
		if s.IsSuccess() {
			return r, s
		}
		if s.Code() == framework.UnschedulableAndUnresolvable {
			return r, s.WithPlugin(p.Name())
		}
		if !s.IsRejected() {
			return nil, framework.AsStatus(s.AsError()).WithPlugin(p.Name())
		}
		reasons = append(reasons, s.Reasons()...)
		if r != nil && result == nil {
			result = r
		}
	}
	return result, framework.NewStatus(framework.Unschedulable, reasons...)
}

// RunPreScorePlugins runs PreScore; plugins returning Skip are recorded in
// state so that their Score is skipped.
func (f *Framework) RunPreScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (status *framework.Status) {
	if f.metrics != nil {
		defer f.observePoint(PreScore, f.clock.Now(), &status)
	}
	skip := map[string]bool{}
	for _, p := range f.preScore {
		var s *framework.Status
		f.timed(state, PreScore, p, func() *framework.Status { s = p.PreScore(ctx, state, pod, nodes); return s })
		if s.IsSkip() {
			skip[p.Name()] = true
			continue
		}
		if !s.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running PreScore plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	state.SetSkipScore(skip)
	return nil
}

// PluginScore is one plugin's weighted score of a node.
type PluginScore struct {
	Name  string
	Score int64
}

// NodePluginScores are the scores of one node.
type NodePluginScores struct {
	Name       string
	Scores     []PluginScore
	TotalScore int64
}

// RunScorePlugins scores nodes with every non-skipped Score plugin, in
// parallel over nodes, then normalizes each plugin's scores and applies the
// weights.
func (f *Framework) RunScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) ([]NodePluginScores, *framework.Status) {
	return f.runScorePlugins(ctx, state, pod, nodes, &scoreBuffers{})
}

// scoreBuffers hold the score lists of a cycle; SchedulePod keeps one in
// the framework and reuses it from cycle to cycle (one cycle runs at a
// time, and the scores are read before the next one).
type scoreBuffers struct {
	flat    []framework.NodeScore
	perNode []PluginScore
	out     []NodePluginScores
}

func (f *Framework) runScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo, buf *scoreBuffers) (_ []NodePluginScores, status *framework.Status) {
	if f.metrics != nil {
		defer f.observePoint(Score, f.clock.Now(), &status)
	}
	sampled := f.metrics != nil && state.ShouldRecordPluginMetrics()
	plugins := make([]scorePlugin, 0, len(f.score))
	for _, p := range f.score {
		if !state.SkipScore(p.Name()) {
			plugins = append(plugins, p)
		}
	}
	// One backing array for every plugin's list, and one for every
	// node's plugin scores: no allocation a node.
	flat := framework.NodeScoreList(grow(&buf.flat, len(plugins)*len(nodes)))
	scores := make([]framework.NodeScoreList, len(plugins))
	for i := range scores {
		scores[i] = flat[i*len(nodes) : (i+1)*len(nodes) : (i+1)*len(nodes)]
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var firstErr *framework.Status
	fail := func(s *framework.Status) {
		once.Do(func() { firstErr = s; cancel() })
	}
	if len(plugins) > 0 {
		f.parallelizer.Until(ctx, len(nodes), func(n int) {
			for i, p := range plugins {
				var v int64
				var s *framework.Status
				if sampled {
					f.timed(state, Score, p, func() *framework.Status { v, s = p.Score(ctx, state, pod, nodes[n]); return s })
				} else {
					v, s = p.Score(ctx, state, pod, nodes[n])
				}
				if !s.IsSuccess() {
					fail(framework.AsStatus(fmt.Errorf("plugin %q failed with: %w", p.Name(), s.AsError())).WithPlugin(p.Name()))
					return
				}
				scores[i][n] = framework.NodeScore{Name: nodes[n].Node().Name, Score: v}
			}
		})
	}
	if firstErr != nil {
		return nil, firstErr
	}
	for i, p := range plugins {
		ext := p.ScoreExtensions()
		if ext == nil {
			continue
		}
		if s := ext.NormalizeScore(ctx, state, pod, scores[i]); !s.IsSuccess() {
			return nil, framework.AsStatus(fmt.Errorf("plugin %q failed with: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	out := grow(&buf.out, len(nodes))
	perNode := grow(&buf.perNode, len(nodes)*len(plugins))
	for n, ni := range nodes {
		out[n] = NodePluginScores{Name: ni.Node().Name, Scores: perNode[n*len(plugins) : (n+1)*len(plugins) : (n+1)*len(plugins)]}
	}
	for i, p := range plugins {
		for n := range nodes {
			v := scores[i][n].Score
			if v > framework.MaxNodeScore || v < framework.MinNodeScore {
				return nil, framework.AsStatus(fmt.Errorf("plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing",
					p.Name(), v, framework.MinNodeScore, framework.MaxNodeScore)).WithPlugin(p.Name())
			}
			w := v * p.weight
			out[n].Scores[i] = PluginScore{Name: p.Name(), Score: w}
			out[n].TotalScore += w
		}
	}
	return out, nil
}

// RunReservePluginsReserve runs Reserve; on failure the caller runs
// Unreserve.
func (f *Framework) RunReservePluginsReserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	for _, p := range f.reserve {
		if s := p.Reserve(ctx, state, pod, nodeName); !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(p.Name())
			}
			return framework.AsStatus(fmt.Errorf("running Reserve plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	return nil
}

// RunReservePluginsUnreserve runs Unreserve in reverse order.
func (f *Framework) RunReservePluginsUnreserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	for i := len(f.reserve) - 1; i >= 0; i-- {
		f.reserve[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// RunPermitPlugins runs Permit. If any plugin asks to wait, the pod is
// held and Wait is returned; WaitOnPermit then blocks for the outcome.
func (f *Framework) RunPermitPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	timeouts := map[string]time.Duration{}
	for _, p := range f.permit {
		s, timeout := p.Permit(ctx, state, pod, nodeName)
		switch {
		case s.IsSuccess():
		case s.IsRejected():
			return s.WithPlugin(p.Name())
		case s.IsWait():
			timeouts[p.Name()] = min(timeout, MaxTimeout)
		default:
			return framework.AsStatus(fmt.Errorf("running Permit plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	if len(timeouts) == 0 {
		return nil
	}
	f.waiting.add(newWaitingPod(f.clock, pod, timeouts))
	return framework.NewStatus(framework.Wait, fmt.Sprintf("one or more plugins asked to wait and no plugin rejected pod %q", pod.Name))
}

// WaitOnPermit blocks until a held pod is allowed, rejected or times out;
// it returns nil at once for a pod that is not held.
func (f *Framework) WaitOnPermit(ctx context.Context, pod *v1.Pod) *framework.Status {
	wp := f.waiting.get(pod.UID)
	if wp == nil {
		return nil
	}
	defer f.waiting.remove(pod.UID)
	select {
	case s := <-wp.done:
		return s
	case <-ctx.Done():
		wp.Reject("", "context done")
		return framework.AsStatus(fmt.Errorf("waiting on permit for pod %s/%s: %w", pod.Namespace, pod.Name, ctx.Err()))
	}
}

// RunPreBindPlugins runs PreBind; the first failure stops.
func (f *Framework) RunPreBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	for _, p := range f.preBind {
		if s := p.PreBind(ctx, state, pod, nodeName); !s.IsSuccess() && !s.IsSkip() {
			if s.IsRejected() {
				return s.WithPlugin(p.Name())
			}
			return framework.AsStatus(fmt.Errorf("running PreBind plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
	}
	return nil
}

// ErrNoBinder is returned when every Bind plugin skipped the pod.
var ErrNoBinder = errors.New("no bind plugin bound the pod")

// RunBindPlugins runs Bind plugins until one does not Skip.
func (f *Framework) RunBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	for _, p := range f.bind {
		s := p.Bind(ctx, state, pod, nodeName)
		if s.IsSkip() {
			continue
		}
		if !s.IsSuccess() {
			if s.IsRejected() {
				return s.WithPlugin(p.Name())
			}
			return framework.AsStatus(fmt.Errorf("running Bind plugin %q: %w", p.Name(), s.AsError())).WithPlugin(p.Name())
		}
		return nil
	}
	return framework.AsStatus(ErrNoBinder)
}

// RunPostBindPlugins runs PostBind.
func (f *Framework) RunPostBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	for _, p := range f.postBind {
		p.PostBind(ctx, state, pod, nodeName)
	}
}

// observePoint records an extension point's duration since start with the
// code of *status (read when the deferred call runs).
func (f *Framework) observePoint(point string, start time.Time, status **framework.Status) {
	f.metrics.ObserveExtensionPoint(point, (*status).Code().String(), f.profileName, f.clock.Since(start))
}

// timed runs call, timing it as plugin p at point when the cycle's state
// samples plugin metrics.
func (f *Framework) timed(state *framework.CycleState, point string, p framework.Plugin, call func() *framework.Status) {
	if f.metrics == nil || !state.ShouldRecordPluginMetrics() {
		call()
		return
	}
	start := f.clock.Now()
	s := call()
	f.metrics.ObservePlugin(point, p.Name(), s.Code().String(), f.clock.Since(start))
}

func (f *Framework) nodeList() []*framework.NodeInfo {
	s := f.SnapshotSharedLister()
	if s == nil {
		return nil
	}
	return s.NodeInfos().List()
}

// sortedKeys returns map keys in order (for deterministic messages).
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
