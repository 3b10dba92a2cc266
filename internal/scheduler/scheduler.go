// Package scheduler is Skiff's scheduler loop: it watches pods and nodes
// through client-go informers, keeps unscheduled pods of its profiles in
// the queue and bound ones in the cache, and schedules one pod a cycle —
// snapshot, SchedulePod (PreFilter, Filter, Score), PostFilter when no node
// fits, assume, Reserve, Permit — then binds asynchronously (WaitOnPermit,
// PreBind, Bind, PostBind) so that the next cycle does not wait for the API
// call. A failed bind forgets the assumed pod and requeues it with backoff.
//
// Outcomes are reported as upstream's kube-scheduler reports them: a
// Scheduled event "Successfully assigned ns/pod to node", or a
// FailedScheduling event with the FitError text ("0/3 nodes are available:
// ...") and the pod condition PodScheduled=False reason Unschedulable (or
// SchedulerError); a PostFilter plugin's nominated node is written to
// status.nominatedNodeName.
//
// The scheduler talks to the cluster only through client-go. Leader
// election, flags and serving metrics are the caller's (see
// internal/scheduler/app).
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
	"github.com/skiff-sh/skiff/internal/scheduler/metrics"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

// noNodes marks pods that failed because the cluster had no node, so that
// they wait among the unschedulable pods for a node to be added.
const noNodes = "NoNodesAvailable"

// maxEventMessage is upstream's cap on a FailedScheduling message.
const maxEventMessage = 1024

// Binding runs in a fixed set of goroutines fed by a bounded queue, rather
// than in a goroutine per placed pod (upstream's way): a scheduling cycle
// takes a fraction of a millisecond and a binding API call several, so a
// backlog of thousands of pods would otherwise start thousands of binding
// calls at once, each with its goroutine, stack and HTTP/2 stream; the API
// server's flow control answers the excess with 429, and the retries, the
// FailedScheduling events and status patches then multiply the load. A
// few dozen calls in flight keep the API server as busy as it can be.
const (
	DefaultBinders     = 32
	DefaultBindBacklog = 1024
)

// Options configure a Scheduler. Profiles and Registry are required.
type Options struct {
	// Profiles are the frameworks to build, selected by spec.schedulerName.
	// They must all use the same QueueSort plugin.
	Profiles []runtime.Profile
	// Registry knows the plugins the profiles name.
	Registry framework.Registry
	// Parallelism is the number of Filter/Score workers (default 16).
	Parallelism int
	// Binders is the number of binding cycles run at once (default
	// DefaultBinders): the scheduling loop hands each pod it placed to a
	// binder and goes on, and waits only when DefaultBindBacklog placed
	// pods wait for a binder.
	Binders int
	// PodInitialBackoff and PodMaxBackoff bound the queue's backoff
	// (default 1 s and 10 s).
	PodInitialBackoff time.Duration
	PodMaxBackoff     time.Duration
	// AssumedPodTTL is how long a bound pod may stay unconfirmed.
	AssumedPodTTL time.Duration
	// Metrics receives the metrics (default: unregistered metrics).
	Metrics *metrics.Metrics
	// EventClient writes events (default the scheduler's client).
	EventClient kubernetes.Interface
	// Clock is the time source of the queue, the cache and Permit.
	Clock clock.WithTickerAndDelayedExecution
}

// Scheduler schedules the pods of its profiles.
type Scheduler struct {
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	profiles  map[string]*runtime.Framework
	queue     *queue.PriorityQueue
	cache     *cache.Cache
	snapshot  *cache.Snapshot
	metrics   *metrics.Metrics
	clock     clock.WithTickerAndDelayedExecution
	opts      Options

	broadcaster events.EventBroadcasterAdapter
	recorders   map[string]events.EventRecorder

	// handlers are the informer handler registrations; Run waits until
	// they have seen the initial objects.
	handlers []toolscache.ResourceEventHandlerRegistration

	// binds feeds the binders.
	binds chan bindJob
	// binding counts the binders and the other goroutines that write to
	// the API, so that Run waits for them.
	binding sync.WaitGroup
}

// bindJob is a placed pod waiting for a binder.
type bindJob struct {
	fwk     *runtime.Framework
	state   *framework.CycleState
	qpi     *framework.QueuedPodInfo
	assumed *v1.Pod
	cycle   int64
	start   time.Time
}

// New builds the frameworks (whose plugins may ask factory for informers)
// and registers the scheduler's event handlers. Nothing runs until Run.
func New(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Scheduler, error) {
	if len(opts.Profiles) == 0 {
		return nil, errors.New("scheduler: at least one profile is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		m, err := metrics.New(prometheus.NewRegistry())
		if err != nil {
			return nil, err
		}
		opts.Metrics = m
	}
	if opts.EventClient == nil {
		opts.EventClient = client
	}
	if opts.Binders <= 0 {
		opts.Binders = DefaultBinders
	}
	s := &Scheduler{
		client:    client,
		factory:   factory,
		podLister: factory.Core().V1().Pods().Lister(),
		profiles:  map[string]*runtime.Framework{},
		cache:     cache.New(cache.Options{Clock: opts.Clock, AssumedPodTTL: opts.AssumedPodTTL}),
		snapshot:  cache.NewSnapshot(),
		metrics:   opts.Metrics,
		clock:     opts.Clock,
		opts:      opts,
		recorders: map[string]events.EventRecorder{},
		binds:     make(chan bindJob, DefaultBindBacklog),
	}
	// As kube-scheduler: events.k8s.io/v1 events (core/v1 where the server
	// has no such group), each written by a goroutine of its own. The
	// core/v1 broadcaster writes one event at a time and drops what does
	// not fit its queue of 1,000: at hundreds of bindings a second most
	// Scheduled events were lost.
	s.broadcaster = events.NewEventBroadcasterAdapterWithContext(ctx, opts.EventClient)
	// The queue's nominator, shared with the frameworks so that Filter
	// sees the pods nominated to each node.
	nominator := queue.NewNominator()
	var queueSort string
	var less framework.LessFunc
	for _, p := range opts.Profiles {
		if _, dup := s.profiles[p.SchedulerName]; dup {
			return nil, fmt.Errorf("scheduler: duplicate profile %q", p.SchedulerName)
		}
		recorder := s.broadcaster.NewRecorder(p.SchedulerName)
		fwk, err := runtime.New(ctx, opts.Registry, p, runtime.Options{
			ClientSet:            client,
			InformerFactory:      factory,
			SnapshotSharedLister: s.snapshot,
			Parallelism:          opts.Parallelism,
			Clock:                opts.Clock,
			PodNominator:         nominator,
			EventRecorder:        recorder,
			Metrics:              opts.Metrics,
		})
		if err != nil {
			return nil, fmt.Errorf("scheduler: %w", err)
		}
		qs := fwk.PluginNames()["QueueSort"][0]
		if less == nil {
			queueSort, less = qs, fwk.QueueSortFunc()
		} else if qs != queueSort {
			return nil, fmt.Errorf("scheduler: profile %q uses queue sort plugin %q, but other profiles use %q; all profiles must use the same queue sort plugin", p.SchedulerName, qs, queueSort)
		}
		s.profiles[p.SchedulerName] = fwk
		s.recorders[p.SchedulerName] = recorder
	}
	s.queue = queue.New(less, queue.Options{
		Clock:             opts.Clock,
		PodInitialBackoff: opts.PodInitialBackoff,
		PodMaxBackoff:     opts.PodMaxBackoff,
		Nominator:         nominator,
		PreEnqueue: func(ctx context.Context, pod *v1.Pod) *framework.Status {
			if fwk, ok := s.profiles[pod.Spec.SchedulerName]; ok {
				return fwk.RunPreEnqueuePlugins(ctx, pod)
			}
			return nil
		},
	})
	if err := s.addEventHandlers(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Queue is the scheduling queue (for metrics and tests).
func (s *Scheduler) Queue() *queue.PriorityQueue { return s.queue }

// Cache is the scheduler's cache (for tests).
func (s *Scheduler) Cache() *cache.Cache { return s.cache }

// Profile returns the framework of a profile, or nil.
func (s *Scheduler) Profile(name string) *runtime.Framework { return s.profiles[name] }

// Run starts the informers, waits for their caches, then schedules until
// ctx is done; it waits for the bindings in flight before returning.
func (s *Scheduler) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.broadcaster.StartRecordingToSink(ctx.Done())
	defer s.broadcaster.Shutdown()

	s.factory.Start(ctx.Done())
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("scheduler: informer cache of %v did not sync", typ)
		}
	}
	synced := make([]toolscache.InformerSynced, len(s.handlers))
	for i, h := range s.handlers {
		synced[i] = h.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // ctx is done
	}
	logger.Info("Scheduler started", "profiles", len(s.profiles), "nodes", s.cache.NodeCount())
	p := s.queue.PendingPods
	s.metrics.SetPending(func() (int, int, int, int) {
		c := p()
		return c.Active, c.Backoff, c.Unschedulable, c.Gated
	})
	defer s.metrics.SetPending(nil)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.queue.Run(ctx) }()
	go func() { defer wg.Done(); s.cache.Run(ctx) }()
	for range s.opts.Binders {
		s.binding.Go(func() {
			for j := range s.binds {
				s.bindingCycle(ctx, j)
			}
		})
	}
	for ctx.Err() == nil {
		s.ScheduleOne(ctx)
	}
	s.queue.Close()
	wg.Wait()
	close(s.binds)
	s.binding.Wait()
	return nil
}

// ScheduleOne pops one pod and runs its scheduling cycle; the binding
// cycle continues in a binder (or, for a pod a Permit plugin holds, in a
// goroutine of its own).
func (s *Scheduler) ScheduleOne(ctx context.Context) {
	qpi, err := s.queue.Pop()
	if err != nil {
		return
	}
	pod := qpi.Pod
	cycle := s.queue.SchedulingCycle()
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	fwk, ok := s.profiles[pod.Spec.SchedulerName]
	if !ok || pod.DeletionTimestamp != nil || s.cache.IsAssumedPod(pod) {
		s.queue.Done(pod)
		return
	}
	start := s.clock.Now()
	s.cache.UpdateSnapshot(s.snapshot)
	state := framework.NewCycleState()
	// As upstream, a sample of the cycles times each plugin.
	state.SetRecordPluginMetrics(rand.IntN(100) < metrics.PluginMetricsSamplePercent)

	result, err := fwk.SchedulePod(ctx, state, pod)
	if err != nil {
		f := failure{qpi: qpi, cycle: cycle, start: start, err: err, reason: v1.PodReasonSchedulerError, result: metrics.Error}
		var fitErr *runtime.FitError
		switch {
		case errors.As(err, &fitErr):
			f.reason, f.result = v1.PodReasonUnschedulable, metrics.Unschedulable
			qpi.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins
			if fwk.HasPostFilterPlugins() {
				t := s.clock.Now()
				r, st := fwk.RunPostFilterPlugins(ctx, state, pod, fitErr.Diagnosis.NodeToStatus)
				s.metrics.ObserveExtensionPoint(metrics.PostFilter, st.Code().String(), fwk.ProfileName(), s.clock.Since(t))
				if st.Code() == framework.Error {
					logger.Error(st.AsError(), "PostFilter failed")
				} else if !st.IsSuccess() {
					fitErr.Diagnosis.PostFilterMsg = st.Message()
				}
				if r != nil && r.NominatedNodeName != "" {
					f.nominate, f.nominatedNode = true, r.NominatedNodeName
				}
			}
		case errors.Is(err, runtime.ErrNoNodesAvailable):
			f.reason, f.result = v1.PodReasonUnschedulable, metrics.Unschedulable
			qpi.UnschedulablePlugins = map[string]bool{noNodes: true}
		}
		s.handleFailure(ctx, fwk, f)
		return
	}

	host := result.SuggestedHost
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.handleFailure(ctx, fwk, failure{qpi: qpi, cycle: cycle, start: start, err: err, reason: v1.PodReasonSchedulerError, result: metrics.Error})
		return
	}
	s.queue.Nominator().Delete(pod)

	t := s.clock.Now()
	st := fwk.RunReservePluginsReserve(ctx, state, assumed, host)
	s.metrics.ObserveExtensionPoint(metrics.Reserve, st.Code().String(), fwk.ProfileName(), s.clock.Since(t))
	if !st.IsSuccess() {
		s.undo(ctx, fwk, state, assumed)
		s.handleFailure(ctx, fwk, statusFailure(qpi, cycle, start, st))
		return
	}
	t = s.clock.Now()
	st = fwk.RunPermitPlugins(ctx, state, assumed, host)
	s.metrics.ObserveExtensionPoint(metrics.Permit, st.Code().String(), fwk.ProfileName(), s.clock.Since(t))
	if !st.IsSuccess() && !st.IsWait() {
		s.undo(ctx, fwk, state, assumed)
		s.handleFailure(ctx, fwk, statusFailure(qpi, cycle, start, st))
		return
	}

	j := bindJob{fwk: fwk, state: state, qpi: qpi, assumed: assumed, cycle: cycle, start: start}
	if st.IsWait() {
		// Waiting on Permit may last until other pods are placed: it must
		// hold neither the loop nor a binder.
		s.binding.Go(func() { s.bindingCycle(ctx, j) })
		return
	}
	select {
	case s.binds <- j:
	case <-ctx.Done():
		// Stopping: the binding fails at once and undoes the assumption.
		s.bindingCycle(ctx, j)
	}
}

func (s *Scheduler) bindingCycle(ctx context.Context, j bindJob) {
	fwk, state, qpi, assumed, cycle, start := j.fwk, j.state, j.qpi, j.assumed, j.cycle, j.start
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(assumed), "node", assumed.Spec.NodeName)
	host := assumed.Spec.NodeName
	fail := func(st *framework.Status) {
		s.undo(ctx, fwk, state, assumed)
		// The forgotten pod freed room that others may use.
		s.queue.MoveAllToActiveOrBackoffQueue(ctx, queue.AssignedPodDelete, nil)
		f := statusFailure(qpi, cycle, start, st)
		if st.IsRejected() {
			// A rejection at binding time is retried after backoff.
			qpi.UnschedulablePlugins = nil
		}
		s.handleFailure(ctx, fwk, f)
	}
	if st := fwk.WaitOnPermit(ctx, assumed); !st.IsSuccess() {
		fail(st)
		return
	}
	t := s.clock.Now()
	st := fwk.RunPreBindPlugins(ctx, state, assumed, host)
	s.metrics.ObserveExtensionPoint(metrics.PreBind, st.Code().String(), fwk.ProfileName(), s.clock.Since(t))
	if !st.IsSuccess() {
		fail(st)
		return
	}
	t = s.clock.Now()
	st = fwk.RunBindPlugins(ctx, state, assumed, host)
	s.metrics.ObserveExtensionPoint(metrics.Bind, st.Code().String(), fwk.ProfileName(), s.clock.Since(t))
	if !st.IsSuccess() {
		fail(st)
		return
	}
	s.cache.FinishBinding(assumed)
	now := s.clock.Now()
	s.metrics.ObserveAttempt(metrics.Scheduled, fwk.ProfileName(), now.Sub(start))
	if qpi.InitialAttemptTimestamp != nil {
		s.metrics.ObservePodScheduled(qpi.Attempts, now.Sub(*qpi.InitialAttemptTimestamp))
	}
	s.recorders[fwk.ProfileName()].Eventf(assumed, nil, v1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", assumed.Namespace, assumed.Name, host)
	logger.V(2).Info("Bound pod")
	t = s.clock.Now()
	fwk.RunPostBindPlugins(ctx, state, assumed, host)
	s.metrics.ObserveExtensionPoint(metrics.PostBind, framework.Success.String(), fwk.ProfileName(), s.clock.Since(t))
	s.queue.Done(assumed)
}

// undo runs Unreserve and forgets the assumed pod.
func (s *Scheduler) undo(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, assumed *v1.Pod) {
	t := s.clock.Now()
	fwk.RunReservePluginsUnreserve(ctx, state, assumed, assumed.Spec.NodeName)
	s.metrics.ObserveExtensionPoint(metrics.Unreserve, framework.Success.String(), fwk.ProfileName(), s.clock.Since(t))
	if err := s.cache.ForgetPod(klog.FromContext(ctx), assumed); err != nil {
		klog.FromContext(ctx).Error(err, "Forgetting assumed pod")
	}
}

// failure describes a failed attempt.
type failure struct {
	qpi    *framework.QueuedPodInfo
	cycle  int64
	start  time.Time
	err    error
	reason string // PodScheduled condition reason
	result string // metric result
	// nominate sets status.nominatedNodeName to nominatedNode.
	nominate      bool
	nominatedNode string
}

func statusFailure(qpi *framework.QueuedPodInfo, cycle int64, start time.Time, st *framework.Status) failure {
	f := failure{qpi: qpi, cycle: cycle, start: start, err: st.AsError(), reason: v1.PodReasonSchedulerError, result: metrics.Error}
	if f.err == nil {
		f.err = errors.New(st.Message())
	}
	if st.IsRejected() {
		f.reason, f.result = v1.PodReasonUnschedulable, metrics.Unschedulable
		qpi.UnschedulablePlugins = map[string]bool{st.Plugin(): true}
	}
	return f
}

// handleFailure requeues the pod (unless it is gone or bound), records
// FailedScheduling and the PodScheduled condition.
func (s *Scheduler) handleFailure(ctx context.Context, fwk *runtime.Framework, f failure) {
	logger := klog.FromContext(ctx)
	pod := f.qpi.Pod
	s.metrics.ObserveAttempt(f.result, fwk.ProfileName(), s.clock.Since(f.start))
	current, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(3).Info("Pod no longer exists; not requeued", "pod", klog.KObj(pod))
		s.queue.Done(pod)
		return
	case err != nil:
		logger.Error(err, "Reading pod from the informer", "pod", klog.KObj(pod))
	case current.UID != pod.UID || current.Spec.NodeName != "":
		logger.V(3).Info("Pod was replaced or bound meanwhile; not requeued", "pod", klog.KObj(pod))
		s.queue.Done(pod)
		return
	}
	s.queue.AddUnschedulableIfNotPresent(ctx, f.qpi, f.cycle)
	if f.nominate {
		s.queue.Nominator().Add(pod, f.nominatedNode)
	}
	msg := f.err.Error()
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	if f.result == metrics.Unschedulable {
		logger.V(2).Info("Unable to schedule pod; waiting", "pod", klog.KObj(pod), "err", msg)
	} else {
		logger.Error(f.err, "Error scheduling pod; retrying", "pod", klog.KObj(pod))
	}
	s.recorders[fwk.ProfileName()].Eventf(pod, nil, v1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", msg)
	cond := v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: f.reason, Message: f.err.Error()}
	if !conditionChanged(pod, cond) && (!f.nominate || pod.Status.NominatedNodeName == f.nominatedNode) {
		return
	}
	s.binding.Add(1)
	go func() {
		defer s.binding.Done()
		if err := s.patchStatus(ctx, pod, cond, f.nominate, f.nominatedNode); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Updating pod condition", "pod", klog.KObj(pod))
		}
	}()
}

func conditionChanged(pod *v1.Pod, c v1.PodCondition) bool {
	for _, cur := range pod.Status.Conditions {
		if cur.Type == c.Type {
			return cur.Status != c.Status || cur.Reason != c.Reason || cur.Message != c.Message
		}
	}
	return true
}

// patchStatus writes the PodScheduled condition (and the nominated node)
// with a strategic merge patch of the status, keyed by the pod's UID.
func (s *Scheduler) patchStatus(ctx context.Context, pod *v1.Pod, cond v1.PodCondition, nominate bool, node string) error {
	now := metav1.NewTime(s.clock.Now())
	cond.LastProbeTime = metav1.Time{}
	cond.LastTransitionTime = now
	for _, cur := range pod.Status.Conditions {
		if cur.Type == cond.Type && cur.Status == cond.Status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
	}
	status := map[string]any{"conditions": []v1.PodCondition{cond}}
	if nominate {
		status["nominatedNodeName"] = node
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// Informer event handlers.

func assigned(pod *v1.Pod) bool { return pod.Spec.NodeName != "" }

func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func asPod(obj any) (*v1.Pod, bool) {
	switch t := obj.(type) {
	case *v1.Pod:
		return t, true
	case toolscache.DeletedFinalStateUnknown:
		p, ok := t.Obj.(*v1.Pod)
		return p, ok
	}
	return nil, false
}

func asNode(obj any) (*v1.Node, bool) {
	switch t := obj.(type) {
	case *v1.Node:
		return t, true
	case toolscache.DeletedFinalStateUnknown:
		n, ok := t.Obj.(*v1.Node)
		return n, ok
	}
	return nil, false
}

func (s *Scheduler) addEventHandlers(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	pods := s.factory.Core().V1().Pods().Informer()
	// Bound pods feed the cache.
	if err := s.handle(pods, toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			p, ok := asPod(obj)
			return ok && assigned(p) && !terminal(p)
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				p, _ := asPod(obj)
				s.cache.AddPod(logger, p)
				s.queue.AssignedPodAdded(ctx, p, queue.AssignedPodAdd)
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := asPod(oldObj)
				p, _ := asPod(newObj)
				s.cache.UpdatePod(logger, o, p)
				if !equality.Semantic.DeepEqual(o.Labels, p.Labels) {
					s.queue.AssignedPodAdded(ctx, p, queue.AssignedPodUpdate)
				}
			},
			DeleteFunc: func(obj any) {
				p, ok := asPod(obj)
				if !ok {
					return
				}
				s.cache.RemovePod(logger, p)
				s.queue.MoveAllToActiveOrBackoffQueue(ctx, queue.AssignedPodDelete, nil)
			},
		},
	}); err != nil {
		return fmt.Errorf("scheduler: pod handler: %w", err)
	}
	// Unscheduled pods of our profiles feed the queue.
	if err := s.handle(pods, toolscache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			p, ok := asPod(obj)
			if !ok || assigned(p) || terminal(p) {
				return false
			}
			_, ours := s.profiles[p.Spec.SchedulerName]
			return ours
		},
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				p, _ := asPod(obj)
				s.queue.Add(ctx, p)
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := asPod(oldObj)
				p, _ := asPod(newObj)
				if s.cache.IsAssumedPod(p) {
					return // binding in progress
				}
				s.queue.Update(ctx, o, p)
			},
			DeleteFunc: func(obj any) {
				p, ok := asPod(obj)
				if !ok {
					return
				}
				s.queue.Delete(p)
				if fwk, ok := s.profiles[p.Spec.SchedulerName]; ok {
					fwk.RejectWaitingPod(p.UID)
				}
			},
		},
	}); err != nil {
		return fmt.Errorf("scheduler: pod handler: %w", err)
	}
	nodes := s.factory.Core().V1().Nodes().Informer()
	if err := s.handle(nodes, toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			n, _ := asNode(obj)
			s.cache.AddNode(n)
			s.queue.MoveAllToActiveOrBackoffQueue(ctx, queue.NodeAdd, nil)
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := asNode(oldObj)
			n, _ := asNode(newObj)
			s.cache.UpdateNode(o, n)
			if NodeSchedulingPropertiesChanged(o, n) {
				s.queue.MoveAllToActiveOrBackoffQueue(ctx, queue.NodeUpdate, nil)
			}
		},
		DeleteFunc: func(obj any) {
			if n, ok := asNode(obj); ok {
				s.cache.RemoveNode(n)
			}
		},
	}); err != nil {
		return fmt.Errorf("scheduler: node handler: %w", err)
	}
	return s.addVolumeEventHandlers(ctx)
}

// addVolumeEventHandlers moves unschedulable pods when a claim, a volume
// or a storage class appears or changes, so that a pod waiting for its
// claims to bind (VolumeBinding) is tried again at once.
func (s *Scheduler) addVolumeEventHandlers(ctx context.Context) error {
	move := func(event queue.Event) toolscache.ResourceEventHandlerFuncs {
		return toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.queue.MoveAllToActiveOrBackoffQueue(ctx, event, nil) },
			UpdateFunc: func(any, any) { s.queue.MoveAllToActiveOrBackoffQueue(ctx, event, nil) },
		}
	}
	if err := s.handle(s.factory.Core().V1().PersistentVolumeClaims().Informer(), move("PersistentVolumeClaimChange")); err != nil {
		return fmt.Errorf("scheduler: claim handler: %w", err)
	}
	if err := s.handle(s.factory.Core().V1().PersistentVolumes().Informer(), move("PersistentVolumeChange")); err != nil {
		return fmt.Errorf("scheduler: volume handler: %w", err)
	}
	if err := s.handle(s.factory.Storage().V1().StorageClasses().Informer(), move("StorageClassChange")); err != nil {
		return fmt.Errorf("scheduler: storage class handler: %w", err)
	}
	// DynamicResources: a claim created from a template, allocated,
	// released or deallocated, or new devices or classes.
	if err := s.handle(s.factory.Resource().V1().ResourceClaims().Informer(), move("ResourceClaimChange")); err != nil {
		return fmt.Errorf("scheduler: resource claim handler: %w", err)
	}
	if err := s.handle(s.factory.Resource().V1().ResourceSlices().Informer(), move("ResourceSliceChange")); err != nil {
		return fmt.Errorf("scheduler: resource slice handler: %w", err)
	}
	if err := s.handle(s.factory.Resource().V1().DeviceClasses().Informer(), move("DeviceClassChange")); err != nil {
		return fmt.Errorf("scheduler: device class handler: %w", err)
	}
	return nil
}

func (s *Scheduler) handle(inf toolscache.SharedIndexInformer, h toolscache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, reg)
	return nil
}

// NodeSchedulingPropertiesChanged reports a node change that could make a
// pod fit: allocatable, labels, taints, spec.unschedulable, or the status
// of a condition (heartbeats alone are not).
func NodeSchedulingPropertiesChanged(old, n *v1.Node) bool {
	if old.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, n.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) {
		return true
	}
	status := func(node *v1.Node) map[v1.NodeConditionType]v1.ConditionStatus {
		m := map[v1.NodeConditionType]v1.ConditionStatus{}
		for _, c := range node.Status.Conditions {
			m[c.Type] = c.Status
		}
		return m
	}
	return !equality.Semantic.DeepEqual(status(old), status(n))
}
