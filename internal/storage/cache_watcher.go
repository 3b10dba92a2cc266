package storage

import (
	"context"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watcherBuffer is how many events a slow watcher may fall behind before it
// is closed (the client then watches again from its last revision).
const watcherBuffer = 1000

type cacheWatcher struct {
	prefix    string
	pred      Predicate // in the stored version's field names
	bookmarks bool
	served    *ServedVersion // nil: objects as stored
	// queued holds the events offered and not yet sent, at most
	// watcherBuffer; queuedSignal has a value when events were added. A
	// slice that grows as needed rather than a channel of watcherBuffer
	// slots: those were 8 KiB per watch, most of them never used (a
	// kubelet alone keeps several watches).
	queueMu      sync.Mutex
	queued       []*CacheEvent
	queuedSignal chan struct{}
	takenSignal  chan struct{} // has a value when events were taken (offerWait)
	bookmark     chan int64
	result       chan WatchEvent
	done         chan struct{}
	once         sync.Once
}

func newCacheWatcher(prefix string, pred Predicate, bookmarks bool, served *ServedVersion) *cacheWatcher {
	return &cacheWatcher{
		prefix: prefix, pred: pred, bookmarks: bookmarks, served: served,
		queuedSignal: make(chan struct{}, 1), takenSignal: make(chan struct{}, 1), bookmark: make(chan int64, 1),
		result: make(chan WatchEvent), done: make(chan struct{}),
	}
}

// next takes the oldest queued event, nil when none is.
func (w *cacheWatcher) next() *CacheEvent {
	w.queueMu.Lock()
	defer w.queueMu.Unlock()
	if len(w.queued) == 0 {
		return nil
	}
	e := w.queued[0]
	w.queued[0] = nil
	w.queued = w.queued[1:]
	if len(w.queued) == 0 {
		w.queued = nil // let a burst's backing array go
	}
	select {
	case w.takenSignal <- struct{}{}:
	default:
	}
	return e
}

// convert decides what a watcher sees of an event: the event itself, a
// Deleted when the object stops matching, an Added when it starts to; the
// object in the version the watcher was asked in.
func (w *cacheWatcher) convert(e *CacheEvent) (WatchEvent, bool) {
	ev, ok := w.decide(e)
	if ok && w.served != nil {
		ev.Object = w.served.view(ev.Object)
	}
	return ev, ok
}

func (w *cacheWatcher) decide(e *CacheEvent) (WatchEvent, bool) {
	if !strings.HasPrefix(e.Key, w.prefix) {
		return WatchEvent{}, false
	}
	curOK := matches(w.pred, e.Cur)
	prevOK := e.Prev != nil && matches(w.pred, e.Prev)
	switch e.Type {
	case watch.Added:
		if curOK {
			return WatchEvent{Type: watch.Added, Object: e.Cur, RV: e.RV}, true
		}
	case watch.Modified:
		switch {
		case curOK && prevOK:
			return WatchEvent{Type: watch.Modified, Object: e.Cur, RV: e.RV}, true
		case curOK:
			return WatchEvent{Type: watch.Added, Object: e.Cur, RV: e.RV}, true
		case prevOK:
			return WatchEvent{Type: watch.Deleted, Object: e.Cur, RV: e.RV}, true
		}
	case watch.Deleted:
		if curOK {
			return WatchEvent{Type: watch.Deleted, Object: e.Cur, RV: e.RV}, true
		}
	}
	return WatchEvent{}, false
}

// offer queues an event without blocking; false means the watcher is too
// far behind and must be closed.
func (w *cacheWatcher) offer(e *CacheEvent) bool {
	if _, ok := w.decide(e); !ok {
		return true
	}
	select {
	case <-w.done:
		return true
	default:
	}
	w.queueMu.Lock()
	full := len(w.queued) >= watcherBuffer
	if !full {
		w.queued = append(w.queued, e)
	}
	w.queueMu.Unlock()
	if full {
		return false
	}
	select {
	case w.queuedSignal <- struct{}{}:
	default:
	}
	return true
}

// offerWait queues an event like offer, but when the watcher is full it
// waits for it to take events instead of giving up: a watcher fed by an
// etcd watch of its own (uncached.go) holds up nobody else, and a watch
// from an older revision starts with a burst of every change since, more
// than a watcher queues. Only a watcher that takes nothing for grace is
// too slow (false).
func (w *cacheWatcher) offerWait(ctx context.Context, e *CacheEvent, grace time.Duration) bool {
	for !w.offer(e) {
		t := time.NewTimer(grace)
		select {
		case <-w.takenSignal:
			t.Stop()
		case <-w.done:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
			return false
		}
	}
	return true
}

func (w *cacheWatcher) terminate() { w.once.Do(func() { close(w.done) }) }

func (w *cacheWatcher) send(ctx context.Context, ev WatchEvent) bool {
	select {
	case w.result <- ev:
		return true
	case <-ctx.Done():
		return false
	case <-w.done:
		return false
	}
}

func (w *cacheWatcher) run(ctx context.Context, initial []*CacheEvent, initialEnd bool, startRV int64) {
	defer close(w.result)
	for _, e := range initial {
		if ev, ok := w.convert(e); ok {
			if !w.send(ctx, ev) {
				return
			}
		}
	}
	if initialEnd {
		if !w.send(ctx, WatchEvent{Type: watch.Bookmark, RV: startRV, InitialEventsEnd: true}) {
			return
		}
	}
	// last is the highest resourceVersion sent: a bookmark may never
	// claim less (it may repeat it), nor overtake an event it covers.
	var last int64
	for _, e := range initial {
		last = max(last, e.RV)
	}
	if initialEnd {
		last = max(last, startRV)
	}
	sendEvent := func(e *CacheEvent) bool {
		ev, ok := w.convert(e)
		if !ok {
			return true
		}
		last = max(last, e.RV)
		return w.send(ctx, ev)
	}
	sendQueued := func() bool {
		for e := w.next(); e != nil; e = w.next() {
			if !sendEvent(e) {
				return false
			}
		}
		return true
	}
	for {
		select {
		case <-w.queuedSignal:
			if !sendQueued() {
				return
			}
		case rv := <-w.bookmark:
			// Every event up to rv was queued before the bookmark was
			// (both under the cache's lock): send the queued ones first,
			// or a client that resumes from the bookmark would miss them.
			if !sendQueued() {
				return
			}
			if rv >= last {
				last = rv
				if !w.send(ctx, WatchEvent{Type: watch.Bookmark, RV: rv}) {
					return
				}
			}
		case <-w.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// CacheWatch is a running watch on the cache.
type CacheWatch struct {
	c      *Cacher
	id     int
	w      *cacheWatcher
	cancel context.CancelFunc
}

// ResultChan delivers events until the watch ends (the channel closes).
func (cw *CacheWatch) ResultChan() <-chan WatchEvent { return cw.w.result }

// Done is closed when the cache ends the watch (the watcher fell too far
// behind, or the cache relists); the server then drops the connection
// rather than wait on a client that does not read.
func (cw *CacheWatch) Done() <-chan struct{} { return cw.w.done }

// Stop ends the watch.
func (cw *CacheWatch) Stop() {
	cw.cancel()
	cw.c.mu.Lock()
	delete(cw.c.watchers, cw.id)
	cw.c.mu.Unlock()
	cw.w.terminate()
}

// WatchCached starts a watch of the objects under prefix, as opts say:
// with sendInitialEvents the current objects come first as Added, then a
// bookmark marking their end; with resourceVersion "" or "0" (and no
// sendInitialEvents=false) the current objects come first too; with a
// revision N, every change after N. A revision older than the cache's
// history is an expired error (410 Gone).
func (c *Cacher) WatchCached(ctx context.Context, prefix string, opts ListOptions) (*CacheWatch, error) {
	pred, err := c.served.storedPredicate(opts.Predicate)
	if err != nil {
		return nil, newErr(ErrCodeInvalidObj, "", err.Error())
	}
	opts.Predicate = pred
	var rev int64
	withState := false
	initialEnd := false
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		withState, initialEnd = true, true
	} else if opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
		withState = opts.SendInitialEvents == nil
	} else {
		var err error
		if rev, err = ParseRV(opts.ResourceVersion); err != nil {
			return nil, newErr(ErrCodeInvalidObj, "", err.Error())
		}
	}
	if c.opts.Uncached {
		return c.watchUncached(ctx, prefix, opts, rev, withState, initialEnd)
	}
	for {
		var err error
		switch {
		case initialEnd:
			err = c.waitForListRV(ctx, opts)
		case withState || rev == 0:
			err = c.waitReady(ctx)
		default:
			err = c.waitFresh(ctx, rev)
		}
		if err != nil {
			return nil, err
		}
		cw, err, ok := c.register(ctx, prefix, opts, rev, withState, initialEnd)
		if ok {
			return cw, err
		}
		// The cache began a relist after the wait: wait for it.
	}
}

// register starts a watcher from the cache's state under its lock, so that
// no event falls between what the watcher starts from and what it is
// offered. ok is false when the cache is not ready (a relist began).
func (c *Cacher) register(ctx context.Context, prefix string, opts ListOptions, rev int64, withState, initialEnd bool) (*CacheWatch, error, bool) {
	c.mu.Lock()
	if !c.isReady {
		c.mu.Unlock()
		return nil, nil, false
	}
	var initial []*CacheEvent
	if withState {
		for k, o := range c.items {
			if strings.HasPrefix(k, prefix) {
				initial = append(initial, &CacheEvent{Type: watch.Added, Key: k, Cur: o, RV: o.RV})
			}
		}
	} else if rev > 0 {
		if rev < c.startRV {
			start := c.startRV
			c.mu.Unlock()
			return nil, &Error{Code: ErrCodeResourceExpired, ResourceVersion: rev, Msg: formatRV(start + 1)}, true
		}
		initial = c.history.after(rev)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := newCacheWatcher(prefix, opts.Predicate, opts.AllowWatchBookmarks, c.served)
	startRV := c.rv
	id := c.nextID
	c.nextID++
	c.watchers[id] = w
	c.mu.Unlock()
	if withState {
		sortEvents(initial)
	}
	go w.run(ctx, initial, initialEnd, startRV)
	return &CacheWatch{c: c, id: id, w: w, cancel: cancel}, nil, true
}

func sortEvents(es []*CacheEvent) {
	// Insertion order does not matter to clients, but a stable order (by
	// key, as a list returns) keeps output predictable.
	sortByKey(es)
}

func (c *cache) sendBookmarks() {
	c.mu.RLock()
	rv := c.rv
	for _, w := range c.watchers {
		if !w.bookmarks {
			continue
		}
		select {
		case <-w.bookmark:
		default:
		}
		select {
		case w.bookmark <- rv:
		default:
		}
	}
	c.mu.RUnlock()
}

func (c *cache) terminateAll() {
	c.mu.Lock()
	c.terminateAllLocked()
	c.mu.Unlock()
}

func (c *cache) terminateAllLocked() {
	for id, w := range c.watchers {
		delete(c.watchers, id)
		w.terminate()
	}
}

// Watch adapts WatchCached to watch.Interface (bookmarks carry an empty
// object with only its resourceVersion).
func (c *Cacher) Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error) {
	cw, err := c.WatchCached(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	out := make(chan watch.Event)
	go func() {
		defer close(out)
		for ev := range cw.ResultChan() {
			var obj runtime.Object
			if ev.Object != nil {
				var err error
				if obj, err = ev.Object.Object(); err != nil {
					obj, ev.Type = &metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}, watch.Error
				}
			} else {
				obj = c.newFunc()
				_ = setRV(obj, ev.RV)
			}
			select {
			case out <- watch.Event{Type: ev.Type, Object: obj}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return &watchAdapter{cw: cw, out: out}, nil
}

type watchAdapter struct {
	cw  *CacheWatch
	out chan watch.Event
}

func (a *watchAdapter) Stop()                          { a.cw.Stop() }
func (a *watchAdapter) ResultChan() <-chan watch.Event { return a.out }
