package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
	"weak"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DecodeErrorObserver is an Observer that also counts stored objects that
// cannot be decoded (apiserver_storage_decode_errors_total).
type DecodeErrorObserver interface {
	ObserveDecodeError(resource string)
}

// CachedObject is an object as the cache holds it: shared by every reader,
// never mutated, with its selector attributes and its encodings computed
// once. A cache serving another version than the stored one (ServeAs)
// hands out views of its objects: converted when first asked, encoded
// into the cached object's own encodings under the version's name, so that
// both versions keep one object.
type CachedObject struct {
	Key    string
	RV     int64
	Labels labels.Set
	Fields FieldValues // the stored version's field names

	obj runtime.Object // as stored; nil in a view

	mu  sync.Mutex
	enc []encoding // one or two formats: a slice, not a map (~400 bytes)

	// A view: base is the cached object, converted once on first use.
	base     *CachedObject
	served   *ServedVersion
	convOnce sync.Once
	conv     runtime.Object
	convErr  error
}

// NewCachedObject is an object as a cache would hold it (for tests and
// stores that are not caches).
func NewCachedObject(key string, obj runtime.Object, rv int64) *CachedObject {
	return &CachedObject{Key: key, obj: obj, RV: rv}
}

// Object is the object in the version its cache serves. Readers share it:
// never mutate it.
func (o *CachedObject) Object() (runtime.Object, error) {
	if o.base == nil {
		return o.obj, nil
	}
	o.convOnce.Do(func() { o.conv, o.convErr = o.served.Convert(o.base.obj) })
	return o.conv, o.convErr
}

// encoding is an object's bytes in one format, held weakly: they stay while
// a reader (a watcher writing them, a list) holds them and until the next
// collection after that, so that one change sent to N watchers, or lists
// that overlap, encode once, but an object does not keep its encodings for
// its whole life (that was ~600 bytes per watched Event, and a pod's
// protobuf as many bytes again as the pod, for every object an informer
// watches).
type encoding struct {
	format string
	first  weak.Pointer[byte] // the bytes' first element
	n      int
}

func (e encoding) bytes() ([]byte, bool) {
	if e.n == 0 {
		return []byte{}, true
	}
	p := e.first.Value()
	if p == nil {
		return nil, false
	}
	return unsafe.Slice(p, e.n), true
}

// Encoded returns the object's bytes in one format, computing them with
// encode unless a reader still holds them: however many watchers a change
// has, it is encoded once per format (and per version served).
func (o *CachedObject) Encoded(format string, encode func(runtime.Object) ([]byte, error)) ([]byte, error) {
	if o.base != nil {
		return o.base.encoded(o.served.Name+" "+format, func() ([]byte, error) {
			obj, err := o.Object()
			if err != nil {
				return nil, err
			}
			return encode(obj)
		})
	}
	return o.encoded(format, func() ([]byte, error) { return encode(o.obj) })
}

func (o *CachedObject) encoded(format string, encode func() ([]byte, error)) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for ; i < len(o.enc); i++ {
		if o.enc[i].format == format {
			if b, ok := o.enc[i].bytes(); ok {
				return b, nil
			}
			break
		}
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	e := encoding{format: format, n: len(b)}
	if len(b) > 0 {
		e.first = weak.Make(&b[0])
	}
	if i < len(o.enc) {
		o.enc[i] = e
	} else {
		o.enc = append(o.enc, e)
	}
	return b, nil
}

// view is o as a served version shows it (o itself for the stored version).
func (v *ServedVersion) view(o *CachedObject) *CachedObject {
	if v == nil || o == nil {
		return o
	}
	return &CachedObject{Key: o.Key, RV: o.RV, Labels: o.Labels, Fields: o.Fields, base: o, served: v}
}

// ServedVersion serves a cache's objects in another version than the one
// they are stored in, converted on the way out, as upstream serves
// events.k8s.io/v1 Events from core/v1 ones and autoscaling/v1
// HorizontalPodAutoscalers from v2: one cache, one object in memory, for
// every version.
type ServedVersion struct {
	// Name tells this version's encodings apart from the stored version's
	// among an object's cached encodings (e.g. "events.k8s.io/v1").
	Name string
	// Convert returns the served form of a cached object (with its
	// apiVersion and kind), which it must not modify.
	Convert func(stored runtime.Object) (runtime.Object, error)
	// FieldLabel maps a field name a selector of the served version may
	// use to the stored version's (nil: the same names).
	FieldLabel func(name string) string
	// OnCount is told the number of objects after each change (metrics).
	OnCount func(n int)
}

// storedPredicate rewrites a predicate's field names into the stored
// version's, against which the cache matches.
func (v *ServedVersion) storedPredicate(p Predicate) (Predicate, error) {
	if v == nil || v.FieldLabel == nil || p.Field == nil || p.Field.Empty() {
		return p, nil
	}
	f, err := p.Field.Transform(func(field, value string) (string, string, error) {
		return v.FieldLabel(field), value, nil
	})
	if err != nil {
		return p, err
	}
	p.Field = f
	return p, nil
}

// CacheEvent is one change as the cache saw it.
type CacheEvent struct {
	Type watch.EventType
	Key  string
	Cur  *CachedObject // for Deleted: the last state, at the deletion revision
	Prev *CachedObject // nil for Added
	RV   int64
}

// WatchEvent is what a cache watcher receives. For bookmarks Object is nil
// and RV carries the revision; InitialEventsEnd marks the bookmark that ends
// the initial events of a watch-list.
type WatchEvent struct {
	Type             watch.EventType
	Object           *CachedObject
	RV               int64
	InitialEventsEnd bool
}

// CacherOptions tune a Cacher. Zero values mean the defaults.
type CacherOptions struct {
	// Capacity is the most past events kept to serve watches from an older
	// resourceVersion (default 102,400, upstream's upper bound).
	Capacity int
	// HistoryWindow is how long an event is kept at least, up to Capacity
	// (default 75s, upstream's eventFreshDuration): a client that lost its
	// watch for less than this resumes it instead of relisting.
	HistoryWindow time.Duration
	// BookmarkInterval is how often watchers that asked receive a bookmark
	// (default 30s).
	BookmarkInterval time.Duration
	// FreshnessTimeout bounds the wait for the cache to reach a revision
	// (default 3s, as upstream).
	FreshnessTimeout time.Duration
	// NotReadyWait bounds how long a list or watch waits while the cache
	// relists before it is answered 429 (default 3s).
	NotReadyWait time.Duration
	// Clock timestamps the history (default: the real clock).
	Clock clock.PassiveClock
	// OnCount is told the number of objects after each change (metrics).
	OnCount func(n int)
	// Uncached keeps nothing in memory: lists, watches and gets read etcd
	// (uncached.go), as upstream serves a resource whose watch cache size
	// is 0. OnCount is then told a count taken every minute.
	Uncached bool
}

// minHistory is how many events are kept however old they are (upstream's
// lower bound of the watch cache's capacity).
const minHistory = 100

// Cacher serves lists and watches of one resource from memory. One etcd
// watch feeds it; writes go straight to the Store.
//
// When the etcd watch breaks, the cache resumes it from the last revision
// it saw, keeping its watchers and history. Only when that revision is
// compacted does it relist: it is then not ready, its watchers are ended
// and its history dropped in one step, and lists and watches wait for the
// new state (or get 429 when it takes long), so that no watcher can start
// from a revision whose following events the cache never saw.
//
// A Cacher made by ServeAs serves the same cache in another version.
type Cacher struct {
	*Store // this version's: writes, gets and the lists etcd serves
	*cache // shared by every version served from these keys
	served *ServedVersion
}

// cache is the state one etcd watch feeds: the objects as stored.
type cache struct {
	store      *Store // the stored version's
	prefix     string
	getAttrs   func(runtime.Object) (labels.Set, fields.Set, error)
	opts       CacherOptions
	fieldNames fieldNames
	onCount    []func(int)

	mu       sync.RWMutex
	items    map[string]*CachedObject
	deleting map[string]*CachedObject // the items with a deletionTimestamp
	rv       int64
	startRV  int64 // history holds every event after startRV
	history  history
	watchers map[int]*cacheWatcher
	nextID   int
	changed  chan struct{} // closed and replaced when rv advances
	ready    chan struct{} // closed once, at the first full list
	// readyNow is closed while the cache is ready; a relist replaces it
	// with an open one until the new state is in.
	readyNow      chan struct{}
	isReady       bool
	notReadySince time.Time

	progressMu   sync.Mutex
	lastProgress time.Time

	count atomic.Int64 // objects, when Uncached (counted every minute)

	cancelWatch         context.CancelFunc // ends the current etcd watch (tests)
	testAfterWatchBreak func()
}

// NewCacher builds a cache of the objects under prefix (e.g. "/registry/pods/").
func NewCacher(store *Store, prefix string, getAttrs func(runtime.Object) (labels.Set, fields.Set, error), opts CacherOptions) *Cacher {
	if opts.Capacity <= 0 {
		opts.Capacity = 102400
	}
	if opts.HistoryWindow <= 0 {
		opts.HistoryWindow = 75 * time.Second
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = 30 * time.Second
	}
	if opts.FreshnessTimeout <= 0 {
		opts.FreshnessTimeout = 3 * time.Second
	}
	if opts.NotReadyWait <= 0 {
		opts.NotReadyWait = 3 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	c := &cache{
		store: store, prefix: prefix, getAttrs: getAttrs, opts: opts,
		items: map[string]*CachedObject{}, deleting: map[string]*CachedObject{}, watchers: map[int]*cacheWatcher{},
		changed: make(chan struct{}), ready: make(chan struct{}), readyNow: make(chan struct{}),
		notReadySince: opts.Clock.Now(),
	}
	if opts.OnCount != nil {
		c.onCount = append(c.onCount, opts.OnCount)
	}
	return &Cacher{Store: store, cache: c}
}

// ServeAs returns a Cacher of the same cache for another version of the
// resource, kept in the same keys in this cache's format: store reads and
// writes that version in etcd, and lists and watches served from memory
// convert this cache's objects (v says how). Call it before Start; only
// this Cacher is started.
func (c *Cacher) ServeAs(store *Store, v *ServedVersion) *Cacher {
	if v.OnCount != nil {
		c.onCount = append(c.onCount, v.OnCount)
	}
	return &Cacher{Store: store, cache: c.cache, served: v}
}

// Ready is closed once the cache holds its first full list.
func (c *cache) Ready() <-chan struct{} { return c.ready }

// Count is the number of objects the cache holds.
func (c *cache) Count() int {
	if c.opts.Uncached {
		return int(c.count.Load())
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}

// Start lists, then watches etcd until ctx is done. A broken watch is
// resumed from the last revision seen; a compacted one makes the cache
// relist.
func (c *Cacher) Start(ctx context.Context) error {
	if c.served != nil { // the cache it serves from runs
		<-ctx.Done()
		return nil
	}
	if c.opts.Uncached {
		return c.startUncached(ctx)
	}
	return c.cache.start(ctx)
}

func (c *cache) start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("prefix", c.prefix)
	bookmarks := time.NewTicker(c.opts.BookmarkInterval)
	defer bookmarks.Stop()
	defer c.terminateAll()
	needList := true
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if needList {
			if err := c.relist(ctx); err != nil {
				if ctx.Err() != nil {
					break
				}
				logger.Error(err, "list for watch cache failed")
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			needList = false
		}
		c.mu.RLock()
		rev := c.rv
		c.mu.RUnlock()
		wctx, cancel := context.WithCancel(ctx)
		c.mu.Lock()
		c.cancelWatch = cancel
		c.mu.Unlock()
		ch := c.store.client.Watch(watchStream(wctx, c.prefix), c.prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
		got := false
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case <-bookmarks.C:
				c.sendBookmarks()
			case resp, ok := <-ch:
				if !ok {
					break loop
				}
				if err := resp.Err(); err != nil {
					if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision > 0 {
						logger.Info("watch cache's etcd watch fell behind compaction, relisting", "revision", rev, "compacted", resp.CompactRevision)
						needList = true
					} else if ctx.Err() == nil {
						logger.Info("watch cache's etcd watch ended, resuming", "err", err)
					}
					break loop
				}
				got = true
				if resp.IsProgressNotify() {
					c.advance(resp.Header.Revision)
					continue
				}
				for _, ev := range resp.Events {
					c.apply(logger, ev)
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			break
		}
		c.mu.RLock()
		hook := c.testAfterWatchBreak
		c.mu.RUnlock()
		if hook != nil {
			hook()
		}
		if got {
			backoff = 100 * time.Millisecond
		} else if backoff < 5*time.Second {
			backoff *= 2
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	return nil
}

// relist replaces the cache's state with a fresh list. While it runs the
// cache is not ready: its watchers are ended and new lists and watches
// wait, so none can start between the old state and the new one.
func (c *cache) relist(ctx context.Context) error {
	c.mu.Lock()
	if c.isReady {
		c.isReady = false
		c.readyNow = make(chan struct{})
		c.notReadySince = c.opts.Clock.Now()
	}
	c.terminateAllLocked()
	c.mu.Unlock()

	start := time.Now()
	cctx, cancel := c.store.callCtx(ctx)
	resp, err := c.store.client.Get(cctx, c.prefix, clientv3.WithPrefix())
	cancel()
	c.store.observe("list", start)
	if err != nil {
		return c.store.etcdErr(ctx, err, c.prefix, 0)
	}
	logger := klog.FromContext(ctx)
	items := make(map[string]*CachedObject, len(resp.Kvs))
	deleting := map[string]*CachedObject{}
	for _, kv := range resp.Kvs {
		co := c.decodeObject(logger, string(kv.Key), kv.Value, kv.ModRevision)
		if co == nil {
			continue
		}
		items[co.Key] = co
		if beingDeleted(co.obj) {
			deleting[co.Key] = co
		}
	}
	c.mu.Lock()
	c.items, c.deleting = items, deleting
	c.rv = resp.Header.Revision
	c.startRV = resp.Header.Revision
	c.history.reset()
	c.notifyLocked()
	c.isReady = true
	close(c.readyNow)
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	n := len(items)
	c.mu.Unlock()
	for _, f := range c.onCount {
		f(n)
	}
	return nil
}

// decodeFailed logs an object the cache cannot read (Store.decode counts
// it): it is left out of the cache (a list from etcd reports it).
func (c *cache) decodeFailed(logger klog.Logger, key string, rev int64, err error) {
	logger.Error(err, "watch cache cannot decode a stored object; leaving it out", "key", key, "revision", rev)
}

// decodeObject reads a stored value into a cached object, nil when it
// cannot be read (logged; Store.decode counts it).
func (c *cache) decodeObject(logger klog.Logger, key string, value []byte, rev int64) *CachedObject {
	obj := c.store.newFunc()
	if err := c.store.decodeStored(key, value, obj, rev); err != nil {
		c.decodeFailed(logger, key, rev, err)
		return nil
	}
	co, err := c.cachedObject(key, obj, rev)
	if err != nil {
		c.decodeFailed(logger, key, rev, err)
		return nil
	}
	return co
}

func (c *cache) cachedObject(key string, obj runtime.Object, rv int64) (*CachedObject, error) {
	internManagedFields(obj)
	var l labels.Set
	var f fields.Set
	if c.getAttrs != nil {
		var err error
		l, f, err = c.getAttrs(obj)
		if err != nil {
			return nil, err
		}
	}
	return &CachedObject{Key: key, obj: obj, RV: rv, Labels: l, Fields: c.fieldNames.values(f)}, nil
}

// event turns an etcd event on key into the cache's, or nil when there is
// nothing to tell (a delete of something the cache never held, an
// undecodable object). A delete without its previous value (etcd may leave
// it out) uses the state the cache holds.
func (c *cache) event(logger klog.Logger, key string, ev *clientv3.Event, prevItem *CachedObject) *CacheEvent {
	rev := ev.Kv.ModRevision
	e := &CacheEvent{Key: key, RV: rev, Prev: prevItem}
	if ev.Type == mvccpb.DELETE {
		e.Type = watch.Deleted
		if ev.PrevKv == nil {
			if prevItem == nil {
				return nil
			}
			obj := prevItem.obj.DeepCopyObject()
			if err := setRV(obj, rev); err != nil {
				return nil
			}
			e.Cur = &CachedObject{Key: key, obj: obj, RV: rev, Labels: prevItem.Labels, Fields: prevItem.Fields}
			return e
		}
		obj := c.store.newFunc()
		if err := c.store.decodeStored(key, ev.PrevKv.Value, obj, rev); err != nil {
			c.decodeFailed(logger, key, rev, err)
			if prevItem == nil {
				return nil
			}
			obj = prevItem.obj.DeepCopyObject()
			_ = setRV(obj, rev)
		}
		co, err := c.cachedObject(key, obj, rev)
		if err != nil {
			c.decodeFailed(logger, key, rev, err)
			return nil
		}
		e.Cur = co
		return e
	}
	co := c.decodeObject(logger, key, ev.Kv.Value, rev)
	if co == nil {
		return nil
	}
	e.Type, e.Cur = watch.Modified, co
	if prevItem == nil {
		e.Type = watch.Added
	}
	return e
}

func (c *cache) apply(logger klog.Logger, ev *clientv3.Event) {
	rev := ev.Kv.ModRevision
	c.mu.RLock()
	prev := c.items[string(ev.Kv.Key)]
	c.mu.RUnlock()
	// Only Start writes items, so prev is still current below. One copy
	// of the key serves the map, the cached object and the event.
	key := string(ev.Kv.Key)
	if prev != nil {
		key = prev.Key
	}
	e := c.event(logger, key, ev, prev)

	c.mu.Lock()
	delete(c.deleting, key)
	if e != nil {
		if e.Type == watch.Deleted {
			delete(c.items, key)
		} else {
			c.items[key] = e.Cur
			if beingDeleted(e.Cur.obj) {
				c.deleting[key] = e.Cur
			}
		}
		c.push(e)
	} else if ev.Type != mvccpb.DELETE && prev != nil {
		// The new value cannot be read: the old one is no longer true.
		delete(c.items, key)
	}
	if rev > c.rv {
		c.rv = rev
	}
	c.notifyLocked()
	if e != nil {
		for id, w := range c.watchers {
			if !w.offer(e) {
				delete(c.watchers, id)
				w.terminate()
			}
		}
	}
	n := len(c.items)
	c.mu.Unlock()
	for _, f := range c.onCount {
		f(n)
	}
}

// push adds an event to the history and drops the events it no longer
// keeps: beyond Capacity, or older than HistoryWindow past the first
// minHistory.
func (c *cache) push(e *CacheEvent) {
	now := c.opts.Clock.Now()
	c.history.push(e, now)
	for n := c.history.len(); n > 0; n = c.history.len() {
		if n <= c.opts.Capacity && (n <= minHistory || now.Sub(c.history.oldestTime()) <= c.opts.HistoryWindow) {
			break
		}
		c.startRV = c.history.pop().RV
	}
}

func (c *cache) advance(rev int64) {
	c.mu.Lock()
	if rev > c.rv {
		c.rv = rev
		c.notifyLocked()
	}
	c.mu.Unlock()
}

func (c *cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitReady waits while the cache relists, at most NotReadyWait; after
// that the caller is told to come back (429 with upstream's Retry-After).
func (c *cache) waitReady(ctx context.Context) error {
	c.mu.RLock()
	ch, since := c.readyNow, c.notReadySince
	c.mu.RUnlock()
	select {
	case <-ch:
		return nil
	default:
	}
	t := time.NewTimer(c.opts.NotReadyWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return &Error{Code: ErrCodeNotReady, Key: c.prefix, Msg: "storage is (re)initializing",
			RetryAfterSeconds: retryAfterForUnready(c.opts.Clock.Since(since))}
	}
}

// retryAfterForUnready is upstream's advice to clients of a cache that is
// not ready: e^(0.06 s) seconds of downtime, between 1 and 30.
func retryAfterForUnready(down time.Duration) int {
	return int(math.Min(30, math.Max(1, math.Exp(0.06*down.Seconds()))))
}

// progressTimeout bounds a progress request, so that an unreachable etcd
// cannot hold a reader past its freshness timeout.
const progressTimeout = time.Second

// progressInterval is how often readers waiting for the cache to catch up
// ask etcd for a progress notification.
const progressInterval = 50 * time.Millisecond

// watchStream names, in ctx's metadata, the gRPC stream an etcd watch
// goes on (the etcd client keys streams by metadata): each cache has its
// own, and uncached watches share one. etcd answers a progress request
// only when every watch of the stream has reached its start revision, and
// a cache's watch (re)starts after the newest revision, as an uncached
// watch does: on a shared stream, until the next write anywhere, no other
// cache could catch up with a revision it has no event of, and consistent
// reads would wait out their freshness timeout
// (TestNewCacheDoesNotStallOtherCaches). A stream of its own also keeps
// one cache's progress requests from notifying every other watch.
func watchStream(ctx context.Context, name string) context.Context {
	return metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "skiff-watch-stream", name)
}

// requestProgress asks etcd for a progress notification on the cache's
// watch stream, at most once per progressInterval however many readers
// wait: one request per reader would cost a busy server dearly.
func (c *cache) requestProgress(ctx context.Context) {
	c.progressMu.Lock()
	if time.Since(c.lastProgress) < progressInterval {
		c.progressMu.Unlock()
		return
	}
	c.lastProgress = time.Now()
	c.progressMu.Unlock()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), progressTimeout)
	defer cancel()
	// The same metadata as the cache's watch, so that the request goes to
	// its gRPC stream (the client keys streams by it).
	_ = c.store.client.RequestProgress(watchStream(pctx, c.prefix))
}

// waitFresh waits until the cache has seen revision rev, asking etcd for
// progress notifications meanwhile.
func (c *cache) waitFresh(ctx context.Context, rev int64) error {
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	deadline := time.NewTimer(c.opts.FreshnessTimeout)
	defer deadline.Stop()
	nextProgress := time.Now()
	for {
		c.mu.RLock()
		cur, changed := c.rv, c.changed
		c.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		if now := time.Now(); !now.Before(nextProgress) {
			c.requestProgress(ctx)
			nextProgress = now.Add(progressInterval)
		}
		select {
		case <-changed:
		case <-time.After(time.Until(nextProgress)):
		case <-deadline.C:
			return &Error{Code: ErrCodeTooLargeResourceVersion, ResourceVersion: rev, Msg: formatRV(cur)}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func matches(p Predicate, o *CachedObject) bool {
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(o.Labels) {
		return false
	}
	if p.Field != nil && !p.Field.Empty() && !p.Field.Matches(o.Fields) {
		return false
	}
	return true
}

// UseEtcdForList says whether a list must be served by etcd: exact
// revisions and pages of a consistent snapshot are, and every paged list
// of an uncached resource.
func (c *Cacher) UseEtcdForList(opts ListOptions) bool {
	if opts.Continue != "" || opts.ResourceVersionMatch == "Exact" {
		return true
	}
	return opts.Limit > 0 && (opts.ResourceVersion == "" || c.opts.Uncached)
}

// List serves from the cache when it can (see useEtcdForList). A list with
// no resourceVersion is consistent: the cache first catches up with etcd's
// newest revision, and when it cannot within FreshnessTimeout (a server
// too busy to apply etcd's events as fast as they come) etcd serves the
// list, as upstream's API server falls back.
func (c *Cacher) List(ctx context.Context, prefix string, opts ListOptions, listObj runtime.Object) error {
	if c.opts.Uncached || c.UseEtcdForList(opts) {
		return c.Store.List(ctx, prefix, opts, listObj)
	}
	objs, rv, err := c.ListCached(ctx, prefix, opts)
	if err != nil {
		if opts.ResourceVersion == "" && HasCode(err, ErrCodeTooLargeResourceVersion) {
			return c.Store.List(ctx, prefix, opts, listObj)
		}
		return err
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	v.Set(reflect.MakeSlice(v.Type(), 0, len(objs)))
	for _, o := range objs {
		obj, err := o.Object()
		if err != nil {
			return newErr(ErrCodeInvalidObj, o.Key, err.Error())
		}
		v.Set(reflect.Append(v, reflect.ValueOf(obj).Elem()))
	}
	lm, err := meta.ListAccessor(listObj)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(formatRV(rv))
	return nil
}

// ListCached returns the cached objects under prefix that match, sorted by
// key, and the revision they reflect. The objects are shared: never mutate.
func (c *Cacher) ListCached(ctx context.Context, prefix string, opts ListOptions) ([]*CachedObject, int64, error) {
	pred, err := c.served.storedPredicate(opts.Predicate)
	if err != nil {
		return nil, 0, newErr(ErrCodeInvalidObj, "", err.Error())
	}
	if c.opts.Uncached {
		out, rv, err := c.listUncached(ctx, prefix, opts.ResourceVersion, pred)
		if err != nil {
			return nil, 0, err
		}
		c.viewAll(out)
		return out, rv, nil
	}
	if err := c.waitForListRV(ctx, opts); err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	out := make([]*CachedObject, 0, len(c.items))
	for k, o := range c.items {
		if strings.HasPrefix(k, prefix) && matches(pred, o) {
			out = append(out, o)
		}
	}
	rv := c.rv
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	c.viewAll(out)
	return out, rv, nil
}

// ListDeleting returns the cached objects under prefix that have a
// deletionTimestamp, in no order, as the cache holds them now (after its
// first list). The API server's reaper reads them every second; it must
// not cost a pass over every object (150,000 pods at scale).
func (c *Cacher) ListDeleting(ctx context.Context, prefix string) ([]*CachedObject, error) {
	if c.opts.Uncached {
		objs, _, err := c.listUncached(ctx, prefix, "", Predicate{})
		if err != nil {
			return nil, err
		}
		out := objs[:0]
		for _, o := range objs {
			if beingDeleted(o.obj) {
				out = append(out, o)
			}
		}
		c.viewAll(out)
		return out, nil
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	c.mu.RLock()
	out := make([]*CachedObject, 0, len(c.deleting))
	for k, o := range c.deleting {
		if strings.HasPrefix(k, prefix) {
			out = append(out, o)
		}
	}
	c.mu.RUnlock()
	c.viewAll(out)
	return out, nil
}

// viewAll turns cached objects into the served version's views, in place,
// when this Cacher serves another version than the one cached.
func (c *Cacher) viewAll(objs []*CachedObject) {
	if c.served == nil {
		return
	}
	for i, o := range objs {
		objs[i] = c.served.view(o)
	}
}

// beingDeleted reports whether obj has a deletionTimestamp.
func beingDeleted(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetDeletionTimestamp() != nil
}

func (c *cache) waitForListRV(ctx context.Context, opts ListOptions) error {
	switch opts.ResourceVersion {
	case "0":
		return c.waitReady(ctx)
	case "":
		rev, err := c.store.CurrentRevision(ctx)
		if err != nil {
			return err
		}
		return c.waitFresh(ctx, rev)
	default:
		rev, err := ParseRV(opts.ResourceVersion)
		if err != nil {
			return newErr(ErrCodeInvalidObj, "", err.Error())
		}
		return c.waitFresh(ctx, rev)
	}
}

// Get reads from the cache for resourceVersion "0", else from etcd.
func (c *Cacher) GetRV(ctx context.Context, key, resourceVersion string, out runtime.Object) error {
	if resourceVersion != "0" || c.opts.Uncached {
		return c.Store.Get(ctx, key, out)
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	c.mu.RLock()
	o, ok := c.items[key]
	c.mu.RUnlock()
	if !ok {
		return newErr(ErrCodeKeyNotFound, key, "")
	}
	var obj runtime.Object
	if c.served != nil { // a fresh object already
		var err error
		if obj, err = c.served.Convert(o.obj); err != nil {
			return newErr(ErrCodeInvalidObj, key, err.Error())
		}
	} else {
		obj = o.obj.DeepCopyObject()
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return nil
}

func sortByKey(es []*CacheEvent) {
	sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
}
