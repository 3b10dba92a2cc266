package flowcontrol

import (
	"context"
	"hash/fnv"
	"math"
	"sort"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options tune APF. Zero values mean the defaults.
type Options struct {
	// ServerConcurrencyLimit is the server's seats, shared by the limited
	// priority levels (default 600: upstream's 400 + 200 in-flight).
	ServerConcurrencyLimit int
	// MaxQueueWait is how long a request may wait in a queue before it is
	// rejected (default 15s).
	MaxQueueWait time.Duration
	// Clock times queue waits (default: the real clock).
	Clock clock.WithTicker
	// Metrics receives the apiserver_flowcontrol_* figures (may be nil).
	Metrics *Metrics
}

// Source reads the configuration objects (the API server's own store).
type Source interface {
	FlowControlObjects(ctx context.Context) ([]flowcontrolv1.FlowSchema, []flowcontrolv1.PriorityLevelConfiguration, error)
}

// APF is API Priority and Fairness (see the package doc).
type APF struct {
	opts Options

	mu      sync.Mutex
	schemas []*flowcontrolv1.FlowSchema // by matchingPrecedence, then name
	levels  map[string]*level
	version string // the configuration's resourceVersions, to skip no-op reloads
}

var _ Limiter = (*APF)(nil)

type level struct {
	name, uid string
	exempt    bool
	reject    bool // limitResponse Reject: no queues
	limit     int  // nominal seats
	handSize  int
	qlen      int
	queues    []*queue
	seats     int // seats in use
	waiting   int
	rr        int
}

type queue struct {
	waiting []*waiter
	seats   int // seats in use by requests dispatched from this queue
}

type waiter struct {
	seats      int
	q          *queue
	dispatched chan struct{}
	done       bool // dispatched or withdrawn
}

// NewAPF builds the limiter with upstream's mandatory and suggested
// configuration; Configure (or Start) replaces it with the stored one.
func NewAPF(opts Options) *APF {
	if opts.ServerConcurrencyLimit <= 0 {
		opts.ServerConcurrencyLimit = 600
	}
	if opts.MaxQueueWait <= 0 {
		opts.MaxQueueWait = 15 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	a := &APF{opts: opts, levels: map[string]*level{}}
	fss, pls := Bootstrap()
	a.Configure(fss, pls)
	return a
}

// Bootstrap returns upstream's mandatory and suggested FlowSchemas and
// PriorityLevelConfigurations (from k8s.io/apiserver's bootstrap
// package, so they match upstream exactly).
func Bootstrap() ([]flowcontrolv1.FlowSchema, []flowcontrolv1.PriorityLevelConfiguration) {
	var fss []flowcontrolv1.FlowSchema
	for _, fs := range append(append([]*flowcontrolv1.FlowSchema{}, bootstrap.MandatoryFlowSchemas...), bootstrap.SuggestedFlowSchemas...) {
		fss = append(fss, *fs.DeepCopy())
	}
	var pls []flowcontrolv1.PriorityLevelConfiguration
	for _, pl := range append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, bootstrap.MandatoryPriorityLevelConfigurations...), bootstrap.SuggestedPriorityLevelConfigurations...) {
		pls = append(pls, *pl.DeepCopy())
	}
	return fss, pls
}

// Configure replaces the configuration. Levels that stay keep their
// queued and executing requests; the mandatory exempt and catch-all
// objects are put back if missing, as upstream never runs without them.
func (a *APF) Configure(fss []flowcontrolv1.FlowSchema, pls []flowcontrolv1.PriorityLevelConfiguration) {
	havePL := map[string]bool{}
	for _, pl := range pls {
		havePL[pl.Name] = true
	}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		if !havePL[pl.Name] {
			pls = append(pls, *pl.DeepCopy())
			havePL[pl.Name] = true
		}
	}
	haveFS := map[string]bool{}
	for _, fs := range fss {
		haveFS[fs.Name] = true
	}
	for _, fs := range bootstrap.MandatoryFlowSchemas {
		if !haveFS[fs.Name] {
			fss = append(fss, *fs.DeepCopy())
		}
	}

	var schemas []*flowcontrolv1.FlowSchema
	for i := range fss {
		if havePL[fss[i].Spec.PriorityLevelConfiguration.Name] { // dangling schemas are ignored
			schemas = append(schemas, &fss[i])
		}
	}
	sort.SliceStable(schemas, func(i, j int) bool {
		if schemas[i].Spec.MatchingPrecedence != schemas[j].Spec.MatchingPrecedence {
			return schemas[i].Spec.MatchingPrecedence < schemas[j].Spec.MatchingPrecedence
		}
		return schemas[i].Name < schemas[j].Name
	})

	shares := 0
	for _, pl := range pls {
		if l := pl.Spec.Limited; pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementLimited && l != nil {
			shares += int(ncs(l))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.schemas = schemas
	next := map[string]*level{}
	for _, pl := range pls {
		l := a.levels[pl.Name]
		if l == nil {
			l = &level{name: pl.Name}
		}
		l.uid = string(pl.UID)
		l.exempt = pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt || pl.Spec.Limited == nil
		l.reject, l.handSize, l.qlen = true, 0, 0
		if !l.exempt {
			lim := pl.Spec.Limited
			if shares > 0 {
				l.limit = int(math.Ceil(float64(a.opts.ServerConcurrencyLimit) * float64(ncs(lim)) / float64(shares)))
			}
			if q := lim.LimitResponse.Queuing; lim.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue && q != nil && q.Queues > 0 {
				l.reject = false
				l.handSize, l.qlen = int(q.HandSize), int(q.QueueLengthLimit)
				if len(l.queues) != int(q.Queues) {
					l.requeue(int(q.Queues))
				}
			}
		}
		if l.reject && len(l.queues) > 0 {
			l.requeue(0)
		}
		if a.opts.Metrics != nil {
			a.opts.Metrics.nominalSeats.WithLabelValues(l.name).Set(float64(l.limit))
			a.opts.Metrics.concurrency.WithLabelValues(l.name).Set(float64(l.limit))
		}
		next[pl.Name] = l
		a.dispatchLocked(l)
	}
	// A level that went away: its waiters run (they were admitted under a
	// configuration that no longer exists, as upstream lets them drain).
	for name, l := range a.levels {
		if next[name] == nil {
			l.limit = math.MaxInt32
			a.dispatchLocked(l)
		}
	}
	a.levels = next
}

func ncs(l *flowcontrolv1.LimitedPriorityLevelConfiguration) int32 {
	if l.NominalConcurrencyShares == nil {
		return 30
	}
	return *l.NominalConcurrencyShares
}

// requeue gives the level n queues, moving its waiters over in order.
func (l *level) requeue(n int) {
	var waiting []*waiter
	for _, q := range l.queues {
		waiting = append(waiting, q.waiting...)
	}
	l.queues = make([]*queue, n)
	for i := range l.queues {
		l.queues[i] = &queue{}
	}
	for i, w := range waiting {
		if n == 0 {
			w.done = true
			close(w.dispatched) // no queues left: let them run
			l.seats += w.seats
			w.q = nil
			continue
		}
		q := l.queues[i%n]
		w.q = q
		q.waiting = append(q.waiting, w)
	}
	if n == 0 {
		l.waiting = 0
	}
}

// Start keeps the configuration in step with the stored objects, reading
// them every interval, until ctx is done.
func (a *APF) Start(ctx context.Context, src Source, interval time.Duration) error {
	logger := klog.FromContext(ctx)
	t := a.opts.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		fss, pls, err := src.FlowControlObjects(ctx)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(2).Info("Reading the flow control configuration failed", "err", err)
			}
		} else if v := configVersion(fss, pls); v != a.currentVersion() {
			a.Configure(fss, pls)
			a.mu.Lock()
			a.version = v
			a.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (a *APF) currentVersion() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version
}

func configVersion(fss []flowcontrolv1.FlowSchema, pls []flowcontrolv1.PriorityLevelConfiguration) string {
	h := fnv.New64a()
	for _, fs := range fss {
		h.Write([]byte(fs.Name + "/" + fs.ResourceVersion + ";"))
	}
	h.Write([]byte("|"))
	for _, pl := range pls {
		h.Write([]byte(pl.Name + "/" + pl.ResourceVersion + ";"))
	}
	return string(h.Sum(nil))
}

// classify picks the first matching schema and its level.
func (a *APF) classifyLocked(r Request) (*flowcontrolv1.FlowSchema, *level) {
	for _, fs := range a.schemas {
		if matches(fs, r) {
			if l := a.levels[fs.Spec.PriorityLevelConfiguration.Name]; l != nil {
				return fs, l
			}
		}
	}
	// Never reached while the catch-all schema is in place.
	return bootstrap.MandatoryFlowSchemaCatchAll, a.levels[flowcontrolv1.PriorityLevelConfigurationNameCatchAll]
}

// Do classifies the request and runs fn when its level has a seat for it,
// waiting in a queue when the level allows; a request that cannot run gets
// a *RejectedError.
func (a *APF) Do(ctx context.Context, r Request, fn func()) error {
	if r.Seats < 1 {
		r.Seats = 1
	}
	a.mu.Lock()
	fs, l := a.classifyLocked(r)
	if l == nil {
		a.mu.Unlock()
		fn()
		return nil
	}
	m := a.opts.Metrics
	fsName, plName := fs.Name, l.name
	reject := func(reason string) error {
		if m != nil {
			m.rejected.WithLabelValues(fsName, plName, reason).Inc()
		}
		return &RejectedError{FlowSchema: fsName, PriorityLevel: plName, FlowSchemaUID: string(fs.UID), PriorityLevelUID: l.uid,
			Reason: reason, RetryAfterSeconds: 1}
	}
	seats := r.Seats
	if l.limit > 0 && seats > l.limit {
		seats = l.limit
	}
	start := a.opts.Clock.Now()
	var q *queue
	switch {
	case l.exempt:
	case l.waiting == 0 && l.seats+seats <= l.limit:
		if len(l.queues) > 0 {
			q = l.queues[a.pickQueue(l, fsName, flowDistinguisher(fs, r))]
			q.seats += seats
		}
		l.seats += seats
	case l.reject || len(l.queues) == 0:
		a.mu.Unlock()
		return reject("concurrency-limit")
	default:
		q = l.queues[a.pickQueue(l, fsName, flowDistinguisher(fs, r))]
		if len(q.waiting) >= l.qlen {
			a.mu.Unlock()
			return reject("queue-full")
		}
		w := &waiter{seats: seats, q: q, dispatched: make(chan struct{})}
		q.waiting = append(q.waiting, w)
		l.waiting++
		if m != nil {
			m.inQueue.WithLabelValues(fsName, plName).Inc()
		}
		a.mu.Unlock()
		timer := a.opts.Clock.NewTimer(a.opts.MaxQueueWait)
		reason := ""
		select {
		case <-w.dispatched:
		case <-timer.C():
			reason = "time-out"
		case <-ctx.Done():
			reason = "cancelled"
		}
		timer.Stop()
		a.mu.Lock()
		if m != nil {
			m.inQueue.WithLabelValues(fsName, plName).Dec()
		}
		if reason != "" && !w.done {
			w.done = true
			l.withdraw(w)
			a.mu.Unlock()
			if m != nil {
				m.waitDuration.WithLabelValues(fsName, plName, "false").Observe(a.opts.Clock.Since(start).Seconds())
			}
			return reject(reason)
		}
		q = w.q // dispatched: seats were taken for it
	}
	a.mu.Unlock()

	if m != nil {
		m.waitDuration.WithLabelValues(fsName, plName, "true").Observe(a.opts.Clock.Since(start).Seconds())
		m.dispatched.WithLabelValues(fsName, plName).Inc()
		m.executing.WithLabelValues(fsName, plName).Inc()
		m.executingSeats.WithLabelValues(fsName, plName).Add(float64(seats))
	}
	execStart := a.opts.Clock.Now()
	defer func() {
		if m != nil {
			m.executing.WithLabelValues(fsName, plName).Dec()
			m.executingSeats.WithLabelValues(fsName, plName).Sub(float64(seats))
			m.execDuration.WithLabelValues(fsName, plName, "regular").Observe(a.opts.Clock.Since(execStart).Seconds())
		}
		if l.exempt {
			return
		}
		a.mu.Lock()
		l.seats -= seats
		if q != nil {
			q.seats -= seats
		}
		a.dispatchLocked(l)
		a.mu.Unlock()
	}()
	fn()
	return nil
}

// pickQueue deals the flow its hand of queues and picks the one with the
// least work (waiting plus executing seats).
func (a *APF) pickQueue(l *level, schema, distinguisher string) int {
	h := fnv.New64a()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(distinguisher))
	hand := shuffleShard(h.Sum64(), len(l.queues), l.handSize)
	best, bestWork := hand[0], math.MaxInt
	for _, i := range hand {
		q := l.queues[i]
		work := q.seats
		for _, w := range q.waiting {
			work += w.seats
		}
		if work < bestWork {
			best, bestWork = i, work
		}
	}
	return best
}

func (l *level) withdraw(w *waiter) {
	q := w.q
	for i, x := range q.waiting {
		if x == w {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			l.waiting--
			return
		}
	}
}

// dispatchLocked starts waiting requests while the level has seats: the
// next one comes from the non-empty queue holding the fewest seats, round
// robin among equals, so a flow that fills its queues cannot take the
// level's seats from the others.
func (a *APF) dispatchLocked(l *level) {
	for l.waiting > 0 {
		best := -1
		n := len(l.queues)
		for k := 0; k < n; k++ {
			i := (l.rr + k) % n
			q := l.queues[i]
			if len(q.waiting) == 0 {
				continue
			}
			if best < 0 || q.seats < l.queues[best].seats {
				best = i
			}
		}
		if best < 0 {
			l.waiting = 0
			return
		}
		q := l.queues[best]
		w := q.waiting[0]
		if l.seats > 0 && l.seats+w.seats > l.limit {
			return
		}
		q.waiting = q.waiting[1:]
		l.waiting--
		l.rr = (best + 1) % n
		l.seats += w.seats
		q.seats += w.seats
		w.done = true
		close(w.dispatched)
	}
}
