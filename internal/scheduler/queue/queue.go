// Package queue is the scheduler's queue of pods waiting for a node, in the
// shape of upstream's PriorityQueue:
//
//   - activeQ, a heap ordered by the profile's QueueSort, from which the
//     scheduler pops one pod a cycle;
//   - backoffQ, pods that failed recently and wait out their backoff
//     (initial 1 s, doubled each attempt, at most 10 s) before going back
//     to activeQ;
//   - unschedulable pods, parked until a cluster event that could make them
//     fit moves them (MoveAllToActiveOrBackoffQueue), or until they have
//     waited PodMaxInUnschedulablePodsDuration (5 min);
//   - gated pods, kept out by a PreEnqueue plugin (scheduling gates) until
//     an update of the pod lets them in.
//
// Pods popped and not yet finished are "in flight": an update or a move
// request seen while a pod is in flight sends it to backoffQ rather than
// to the unschedulable pods when its attempt fails, so that no event is
// lost. The queue also tracks nominated pods (status.nominatedNodeName)
// for preemption.
//
// Time comes from an injected clock; Run drives the periodic flushes.
package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Upstream's defaults.
const (
	DefaultPodInitialBackoff                 = 1 * time.Second
	DefaultPodMaxBackoff                     = 10 * time.Second
	DefaultPodMaxInUnschedulablePodsDuration = 5 * time.Minute
	// BackoffFlushInterval and UnschedulableFlushInterval are how often Run
	// moves pods whose backoff completed, and pods left unschedulable too
	// long.
	BackoffFlushInterval       = 1 * time.Second
	UnschedulableFlushInterval = 30 * time.Second
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue is closed")

// Names of the sub-queues, as upstream's scheduler_pending_pods labels them.
const (
	Active        = "active"
	Backoff       = "backoff"
	Unschedulable = "unschedulable"
	Gated         = "gated"
)

// PreEnqueueFunc runs the PreEnqueue plugins of the pod's profile; a
// non-success keeps the pod gated.
type PreEnqueueFunc func(ctx context.Context, pod *v1.Pod) *framework.Status

// Options tune the queue; the zero value means upstream's defaults.
type Options struct {
	Clock                             clock.WithTicker
	PodInitialBackoff                 time.Duration
	PodMaxBackoff                     time.Duration
	PodMaxInUnschedulablePodsDuration time.Duration
	// PreEnqueue, if set, decides whether a pod may enter activeQ.
	PreEnqueue PreEnqueueFunc
	// Nominator tracks the nominated pods (default: a new one). The
	// scheduler shares it with its frameworks, which filter with it.
	Nominator *Nominator
}

// Event names a cluster change that may make unschedulable pods fit; it is
// used in logs and metrics.
type Event string

// The events the scheduler reports.
const (
	NodeAdd             Event = "NodeAdd"
	NodeUpdate          Event = "NodeUpdate"
	AssignedPodAdd      Event = "AssignedPodAdd"
	AssignedPodUpdate   Event = "AssignedPodUpdate"
	AssignedPodDelete   Event = "AssignedPodDelete"
	UnschedulableTimout Event = "UnschedulableTimeout"
	ForceActivate       Event = "ForceActivate"
)

type inFlight struct {
	// pod is the latest version seen while in flight.
	pod *v1.Pod
	// updated is set when the pod changed while in flight.
	updated bool
}

// PriorityQueue is the scheduling queue. It is safe for concurrent use.
type PriorityQueue struct {
	clock      clock.WithTicker
	initial    time.Duration
	maxBackoff time.Duration
	maxUnsched time.Duration
	preEnqueue PreEnqueueFunc

	mu               sync.Mutex
	cond             *sync.Cond
	active           *keyedHeap[*framework.QueuedPodInfo]
	backoff          *keyedHeap[*framework.QueuedPodInfo]
	unschedulable    map[string]*framework.QueuedPodInfo
	gated            map[string]*framework.QueuedPodInfo
	inFlight         map[string]*inFlight
	schedulingCycle  int64
	moveRequestCycle int64
	closed           bool

	nominator *Nominator
}

// New returns a queue ordering activeQ by less.
func New(less framework.LessFunc, opts Options) *PriorityQueue {
	q := &PriorityQueue{
		clock:            opts.Clock,
		initial:          opts.PodInitialBackoff,
		maxBackoff:       opts.PodMaxBackoff,
		maxUnsched:       opts.PodMaxInUnschedulablePodsDuration,
		preEnqueue:       opts.PreEnqueue,
		unschedulable:    map[string]*framework.QueuedPodInfo{},
		gated:            map[string]*framework.QueuedPodInfo{},
		inFlight:         map[string]*inFlight{},
		moveRequestCycle: -1,
		nominator:        opts.Nominator,
	}
	if q.nominator == nil {
		q.nominator = NewNominator()
	}
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	if q.initial <= 0 {
		q.initial = DefaultPodInitialBackoff
	}
	if q.maxBackoff <= 0 {
		q.maxBackoff = DefaultPodMaxBackoff
	}
	if q.maxUnsched <= 0 {
		q.maxUnsched = DefaultPodMaxInUnschedulablePodsDuration
	}
	q.cond = sync.NewCond(&q.mu)
	q.active = newKeyedHeap(qpiKey, func(a, b *framework.QueuedPodInfo) bool { return less(a, b) })
	q.backoff = newKeyedHeap(qpiKey, func(a, b *framework.QueuedPodInfo) bool {
		return q.backoffExpiry(a).Before(q.backoffExpiry(b))
	})
	return q
}

// Key is how the queue names a pod: namespace/name.
func Key(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

func qpiKey(p *framework.QueuedPodInfo) string { return Key(p.Pod) }

// Nominator returns the nominated pods tracker.
func (q *PriorityQueue) Nominator() *Nominator { return q.nominator }

// Run flushes completed backoffs every second and pods left unschedulable
// too long every 30 s, until ctx is done; then it closes the queue.
func (q *PriorityQueue) Run(ctx context.Context) {
	backoff := q.clock.NewTicker(BackoffFlushInterval)
	defer backoff.Stop()
	unsched := q.clock.NewTicker(UnschedulableFlushInterval)
	defer unsched.Stop()
	defer q.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-backoff.C():
			q.FlushBackoffCompleted()
		case <-unsched.C():
			q.FlushUnschedulableLeftover()
		}
	}
}

// Close wakes Pop callers, which then return ErrClosed.
func (q *PriorityQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *PriorityQueue) newInfo(pod *v1.Pod) *framework.QueuedPodInfo {
	now := q.clock.Now()
	return &framework.QueuedPodInfo{PodInfo: framework.MustPodInfo(pod), Timestamp: now}
}

// Add queues a new unscheduled pod (gated if a PreEnqueue plugin says
// so). A pod already known is updated instead.
func (q *PriorityQueue) Add(ctx context.Context, pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.knownLocked(Key(pod)) {
		q.updateLocked(ctx, pod)
		return
	}
	q.nominator.AddFromStatus(pod)
	q.enqueueLocked(ctx, q.newInfo(pod))
}

func (q *PriorityQueue) knownLocked(key string) bool {
	if _, ok := q.active.Get(key); ok {
		return true
	}
	if _, ok := q.backoff.Get(key); ok {
		return true
	}
	_, u := q.unschedulable[key]
	_, g := q.gated[key]
	_, f := q.inFlight[key]
	return u || g || f
}

// enqueueLocked runs PreEnqueue and puts qpi in activeQ or among the gated.
func (q *PriorityQueue) enqueueLocked(ctx context.Context, qpi *framework.QueuedPodInfo) {
	key := qpiKey(qpi)
	if q.preEnqueue != nil {
		if s := q.preEnqueue(ctx, qpi.Pod); !s.IsSuccess() {
			if qpi.UnschedulablePlugins == nil {
				qpi.UnschedulablePlugins = map[string]bool{}
			}
			qpi.UnschedulablePlugins[s.Plugin()] = true
			q.gated[key] = qpi
			return
		}
	}
	delete(q.gated, key)
	q.active.AddOrUpdate(qpi)
	q.cond.Broadcast()
}

// Update records a new version of an unscheduled pod. A pod parked as
// unschedulable whose spec or metadata changed is moved on (it may fit
// now); a gated pod is checked again.
func (q *PriorityQueue) Update(ctx context.Context, oldPod, newPod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.updateLocked(ctx, newPod)
}

func (q *PriorityQueue) updateLocked(ctx context.Context, pod *v1.Pod) {
	key := Key(pod)
	q.nominator.AddFromStatus(pod)
	if f, ok := q.inFlight[key]; ok {
		f.updated = f.updated || podChanged(f.pod, pod)
		f.pod = pod
		return
	}
	if qpi, ok := q.active.Get(key); ok {
		qpi.PodInfo = framework.MustPodInfo(pod)
		q.active.AddOrUpdate(qpi)
		return
	}
	if qpi, ok := q.backoff.Get(key); ok {
		qpi.PodInfo = framework.MustPodInfo(pod)
		q.backoff.AddOrUpdate(qpi)
		return
	}
	if qpi, ok := q.unschedulable[key]; ok {
		changed := podChanged(qpi.Pod, pod)
		qpi.PodInfo = framework.MustPodInfo(pod)
		if changed {
			delete(q.unschedulable, key)
			q.moveLocked(ctx, qpi)
		}
		return
	}
	if qpi, ok := q.gated[key]; ok {
		qpi.PodInfo = framework.MustPodInfo(pod)
		q.enqueueLocked(ctx, qpi)
		return
	}
	q.enqueueLocked(ctx, q.newInfo(pod))
}

// podChanged reports a change that could affect scheduling: anything but
// the bookkeeping metadata, the finalizers and the status, of which only
// the claims' names count (the resource-claim controller writes them once
// it has made a pod's claims from their templates: until then
// DynamicResources cannot find them), as upstream's queue counts them.
func podChanged(a, b *v1.Pod) bool {
	if a == nil || b == nil {
		return true
	}
	strip := func(p *v1.Pod) *v1.Pod {
		c := p.DeepCopy()
		c.ResourceVersion = ""
		c.Generation = 0
		c.ManagedFields = nil
		c.Finalizers = nil
		c.Status = v1.PodStatus{ResourceClaimStatuses: p.Status.ResourceClaimStatuses}
		return c
	}
	return !equality.Semantic.DeepEqual(strip(a), strip(b))
}

// Delete forgets a pod (deleted, or bound by someone).
func (q *PriorityQueue) Delete(pod *v1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := Key(pod)
	q.active.Delete(key)
	q.backoff.Delete(key)
	delete(q.unschedulable, key)
	delete(q.gated, key)
	delete(q.inFlight, key)
	q.nominator.Delete(pod)
}

// Pop blocks until a pod is active and returns it, now in flight. It
// returns ErrClosed once the queue is closed.
func (q *PriorityQueue) Pop() (*framework.QueuedPodInfo, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return nil, ErrClosed
	}
	qpi, _ := q.active.PopFirst()
	q.schedulingCycle++
	qpi.Attempts++
	if qpi.InitialAttemptTimestamp == nil {
		now := q.clock.Now()
		qpi.InitialAttemptTimestamp = &now
	}
	q.inFlight[qpiKey(qpi)] = &inFlight{pod: qpi.Pod}
	return qpi, nil
}

// SchedulingCycle is the number of pods popped so far; the scheduler
// passes the value of a pod's cycle back to AddUnschedulableIfNotPresent.
func (q *PriorityQueue) SchedulingCycle() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.schedulingCycle
}

// Done ends a pod's flight after it was scheduled (or dropped).
func (q *PriorityQueue) Done(pod *v1.Pod) {
	q.mu.Lock()
	delete(q.inFlight, Key(pod))
	q.mu.Unlock()
}

// AddUnschedulableIfNotPresent returns a pod whose attempt failed. A pod
// deleted or already queued meanwhile is dropped. It goes to backoffQ when
// the failure was an error (no UnschedulablePlugins), when it changed while
// in flight, or when a move request came after its cycle began
// (podSchedulingCycle); otherwise it is parked as unschedulable.
func (q *PriorityQueue) AddUnschedulableIfNotPresent(ctx context.Context, qpi *framework.QueuedPodInfo, podSchedulingCycle int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := qpiKey(qpi)
	f, ok := q.inFlight[key]
	if !ok {
		return // deleted or bound while in flight
	}
	delete(q.inFlight, key)
	if _, ok := q.active.Get(key); ok {
		return
	}
	if _, ok := q.backoff.Get(key); ok {
		return
	}
	if f.pod != nil && f.pod != qpi.Pod {
		qpi.PodInfo = framework.MustPodInfo(f.pod)
	}
	qpi.Timestamp = q.clock.Now()
	if len(qpi.UnschedulablePlugins) == 0 || f.updated || q.moveRequestCycle >= podSchedulingCycle {
		q.moveLocked(ctx, qpi)
		return
	}
	q.unschedulable[key] = qpi
}

// moveLocked puts a pod in backoffQ, or in activeQ if its backoff is over
// (through PreEnqueue).
func (q *PriorityQueue) moveLocked(ctx context.Context, qpi *framework.QueuedPodInfo) {
	if q.isBackingOff(qpi) {
		q.backoff.AddOrUpdate(qpi)
		return
	}
	q.enqueueLocked(ctx, qpi)
}

// BackoffDuration is the backoff after qpi's attempts: the initial
// backoff doubled for each attempt after the first, at most the maximum.
func (q *PriorityQueue) BackoffDuration(qpi *framework.QueuedPodInfo) time.Duration {
	d := q.initial
	for i := 1; i < qpi.Attempts; i++ {
		if d > q.maxBackoff-d {
			return q.maxBackoff
		}
		d += d
	}
	return min(d, q.maxBackoff)
}

func (q *PriorityQueue) backoffExpiry(qpi *framework.QueuedPodInfo) time.Time {
	return qpi.Timestamp.Add(q.BackoffDuration(qpi))
}

func (q *PriorityQueue) isBackingOff(qpi *framework.QueuedPodInfo) bool {
	if qpi.Attempts == 0 {
		return false
	}
	return q.backoffExpiry(qpi).After(q.clock.Now())
}

// MoveAllToActiveOrBackoffQueue moves the unschedulable pods accepted by
// filter (all when nil) after event: to activeQ, or to backoffQ while they
// back off. Gated pods stay. It also marks the current cycle, so that pods
// in flight now are not parked when they fail.
func (q *PriorityQueue) MoveAllToActiveOrBackoffQueue(ctx context.Context, event Event, filter func(*framework.QueuedPodInfo) bool) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.moveRequestCycle = q.schedulingCycle
	moved := 0
	for key, qpi := range q.unschedulable {
		if filter != nil && !filter(qpi) {
			continue
		}
		delete(q.unschedulable, key)
		q.moveLocked(ctx, qpi)
		moved++
	}
	return moved
}

// AssignedPodAdded moves the unschedulable pods with a required pod
// affinity term that pod matches (it may now satisfy them).
func (q *PriorityQueue) AssignedPodAdded(ctx context.Context, pod *v1.Pod, event Event) int {
	return q.MoveAllToActiveOrBackoffQueue(ctx, event, func(qpi *framework.QueuedPodInfo) bool {
		for i := range qpi.RequiredAffinityTerms {
			t := &qpi.RequiredAffinityTerms[i]
			if t.Namespaces[pod.Namespace] || !t.NamespaceSelector.Empty() {
				if t.Selector.Matches(labelsOf(pod)) {
					return true
				}
			}
		}
		return false
	})
}

// FlushBackoffCompleted moves the pods whose backoff is over to activeQ.
func (q *PriorityQueue) FlushBackoffCompleted() {
	q.mu.Lock()
	defer q.mu.Unlock()
	ctx := context.Background()
	for {
		qpi, ok := q.backoff.Peek()
		if !ok || q.isBackingOff(qpi) {
			return
		}
		q.backoff.PopFirst()
		q.enqueueLocked(ctx, qpi)
	}
}

// FlushUnschedulableLeftover moves pods parked as unschedulable for longer
// than PodMaxInUnschedulablePodsDuration.
func (q *PriorityQueue) FlushUnschedulableLeftover() {
	now := q.clock.Now()
	q.MoveAllToActiveOrBackoffQueue(context.Background(), UnschedulableTimout, func(qpi *framework.QueuedPodInfo) bool {
		return now.Sub(qpi.Timestamp) > q.maxUnsched
	})
}

// Pending counts the pods of each sub-queue (in flight pods are not
// counted).
type Pending struct {
	Active, Backoff, Unschedulable, Gated int
}

// PendingPods counts the pods waiting in each sub-queue.
func (q *PriorityQueue) PendingPods() Pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Pending{Active: q.active.Len(), Backoff: q.backoff.Len(), Unschedulable: len(q.unschedulable), Gated: len(q.gated)}
}

// Where returns the sub-queue holding the pod with key ("" if none; "inflight"
// while popped), for tests and debugging.
func (q *PriorityQueue) Where(key string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.has(q.active, key):
		return Active
	case q.has(q.backoff, key):
		return Backoff
	case q.unschedulable[key] != nil:
		return Unschedulable
	case q.gated[key] != nil:
		return Gated
	case q.inFlight[key] != nil:
		return "inflight"
	}
	return ""
}

func (q *PriorityQueue) has(h *keyedHeap[*framework.QueuedPodInfo], key string) bool {
	_, ok := h.Get(key)
	return ok
}
