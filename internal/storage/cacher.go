package storage

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// CachedObject is an object as the cache holds it: shared by every reader,
// never mutated, with its selector attributes and its encodings computed
// once.
type CachedObject struct {
	Key    string
	Object runtime.Object
	RV     int64
	Labels labels.Set
	Fields fields.Set

	mu  sync.Mutex
	enc map[string][]byte
}

// Encoded returns the object's bytes in one format, computing them with
// encode the first time only: however many watchers a change has, it is
// encoded once per format.
func (o *CachedObject) Encoded(format string, encode func(runtime.Object) ([]byte, error)) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.enc[format]; ok {
		return b, nil
	}
	b, err := encode(o.Object)
	if err != nil {
		return nil, err
	}
	if o.enc == nil {
		o.enc = make(map[string][]byte, 2)
	}
	o.enc[format] = b
	return b, nil
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
	// Capacity is how many past events are kept to serve watches from an
	// older resourceVersion (default 10000).
	Capacity int
	// BookmarkInterval is how often watchers that asked receive a bookmark
	// (default 30s).
	BookmarkInterval time.Duration
	// FreshnessTimeout bounds the wait for the cache to reach a revision
	// (default 3s, as upstream).
	FreshnessTimeout time.Duration
	// OnCount is told the number of objects after each change (metrics).
	OnCount func(n int)
}

// Cacher serves lists and watches of one resource from memory. One etcd
// watch feeds it; writes go straight to the Store.
type Cacher struct {
	*Store
	prefix   string
	getAttrs func(runtime.Object) (labels.Set, fields.Set, error)
	newList  func() runtime.Object
	opts     CacherOptions

	mu        sync.RWMutex
	items     map[string]*CachedObject
	rv        int64
	startRV   int64 // the ring holds every event after startRV
	ring      []*CacheEvent
	ringStart int
	ringLen   int
	watchers  map[int]*cacheWatcher
	nextID    int
	changed   chan struct{} // closed and replaced when rv advances
	ready     chan struct{}
}

// NewCacher builds a cache of the objects under prefix (e.g. "/registry/pods/").
func NewCacher(store *Store, prefix string, newList func() runtime.Object, getAttrs func(runtime.Object) (labels.Set, fields.Set, error), opts CacherOptions) *Cacher {
	if opts.Capacity <= 0 {
		opts.Capacity = 10000
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = 30 * time.Second
	}
	if opts.FreshnessTimeout <= 0 {
		opts.FreshnessTimeout = 3 * time.Second
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Cacher{
		Store: store, prefix: prefix, getAttrs: getAttrs, newList: newList, opts: opts,
		items: map[string]*CachedObject{}, watchers: map[int]*cacheWatcher{},
		ring: make([]*CacheEvent, opts.Capacity), changed: make(chan struct{}), ready: make(chan struct{}),
	}
}

// Ready is closed once the cache holds its first full list.
func (c *Cacher) Ready() <-chan struct{} { return c.ready }

// Count is the number of objects the cache holds.
func (c *Cacher) Count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items)
}

// Start lists, then watches etcd until ctx is done, relisting if the watch
// breaks.
func (c *Cacher) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("prefix", c.prefix)
	readyOnce := sync.Once{}
	bookmarks := time.NewTicker(c.opts.BookmarkInterval)
	defer bookmarks.Stop()
	defer c.terminateAll()
	for ctx.Err() == nil {
		rev, err := c.relist(ctx)
		if err != nil {
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
		readyOnce.Do(func() { close(c.ready) })
		wctx, cancel := context.WithCancel(ctx)
		ch := c.client.Watch(wctx, c.prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
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
					logger.Info("watch cache's etcd watch ended, relisting", "err", err)
					break loop
				}
				if resp.IsProgressNotify() {
					c.advance(resp.Header.Revision)
					continue
				}
				for _, ev := range resp.Events {
					c.apply(ev)
				}
			}
		}
		cancel()
		if ctx.Err() == nil {
			c.terminateAll()
		}
	}
	return nil
}

func (c *Cacher) relist(ctx context.Context) (int64, error) {
	resp, err := c.client.Get(ctx, c.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	items := make(map[string]*CachedObject, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		obj := c.newFunc()
		if err := c.decode(kv.Value, obj, kv.ModRevision); err != nil {
			continue
		}
		co, err := c.cachedObject(string(kv.Key), obj, kv.ModRevision)
		if err != nil {
			continue
		}
		items[co.Key] = co
	}
	c.mu.Lock()
	c.items = items
	c.rv = resp.Header.Revision
	c.startRV = resp.Header.Revision
	c.ringStart, c.ringLen = 0, 0
	c.notifyLocked()
	n := len(items)
	c.mu.Unlock()
	if c.opts.OnCount != nil {
		c.opts.OnCount(n)
	}
	return resp.Header.Revision, nil
}

func (c *Cacher) cachedObject(key string, obj runtime.Object, rv int64) (*CachedObject, error) {
	var l labels.Set
	var f fields.Set
	if c.getAttrs != nil {
		var err error
		l, f, err = c.getAttrs(obj)
		if err != nil {
			return nil, err
		}
	}
	return &CachedObject{Key: key, Object: obj, RV: rv, Labels: l, Fields: f}, nil
}

func (c *Cacher) apply(ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	rev := ev.Kv.ModRevision
	e := &CacheEvent{Key: key, RV: rev}
	switch {
	case ev.Type == mvccpb.DELETE:
		if ev.PrevKv == nil {
			return
		}
		obj := c.newFunc()
		if err := c.decode(ev.PrevKv.Value, obj, rev); err != nil {
			return
		}
		co, err := c.cachedObject(key, obj, rev)
		if err != nil {
			return
		}
		e.Type, e.Cur = watch.Deleted, co
	default:
		obj := c.newFunc()
		if err := c.decode(ev.Kv.Value, obj, rev); err != nil {
			return
		}
		co, err := c.cachedObject(key, obj, rev)
		if err != nil {
			return
		}
		e.Type, e.Cur = watch.Added, co
		if !ev.IsCreate() {
			e.Type = watch.Modified
		}
	}
	c.mu.Lock()
	if prev, ok := c.items[key]; ok {
		e.Prev = prev
	}
	if e.Type == watch.Deleted {
		delete(c.items, key)
	} else {
		c.items[key] = e.Cur
	}
	c.push(e)
	if rev > c.rv {
		c.rv = rev
	}
	c.notifyLocked()
	for id, w := range c.watchers {
		if !w.offer(e) {
			delete(c.watchers, id)
			w.terminate()
		}
	}
	n := len(c.items)
	c.mu.Unlock()
	if c.opts.OnCount != nil {
		c.opts.OnCount(n)
	}
}

func (c *Cacher) push(e *CacheEvent) {
	capacity := len(c.ring)
	if c.ringLen == capacity {
		evicted := c.ring[c.ringStart]
		c.startRV = evicted.RV
		c.ringStart = (c.ringStart + 1) % capacity
		c.ringLen--
	}
	c.ring[(c.ringStart+c.ringLen)%capacity] = e
	c.ringLen++
}

func (c *Cacher) advance(rev int64) {
	c.mu.Lock()
	if rev > c.rv {
		c.rv = rev
		c.notifyLocked()
	}
	c.mu.Unlock()
}

func (c *Cacher) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitFresh waits until the cache has seen revision rev, asking etcd for
// progress notifications meanwhile.
func (c *Cacher) waitFresh(ctx context.Context, rev int64) error {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ctx.Err()
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
			_ = c.client.RequestProgress(context.WithoutCancel(ctx))
			nextProgress = now.Add(50 * time.Millisecond)
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
// revisions and pages of a consistent snapshot are.
func UseEtcdForList(opts ListOptions) bool {
	if opts.Continue != "" || opts.ResourceVersionMatch == "Exact" {
		return true
	}
	return opts.Limit > 0 && opts.ResourceVersion == ""
}

// List serves from the cache when it can (see useEtcdForList). A list with
// no resourceVersion is consistent: the cache first catches up with etcd's
// newest revision.
func (c *Cacher) List(ctx context.Context, prefix string, opts ListOptions, listObj runtime.Object) error {
	if UseEtcdForList(opts) {
		return c.Store.List(ctx, prefix, opts, listObj)
	}
	objs, rv, err := c.ListCached(ctx, prefix, opts)
	if err != nil {
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
		v.Set(reflect.Append(v, reflect.ValueOf(o.Object).Elem()))
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
	if err := c.waitForListRV(ctx, opts); err != nil {
		return nil, 0, err
	}
	c.mu.RLock()
	out := make([]*CachedObject, 0, len(c.items))
	for k, o := range c.items {
		if strings.HasPrefix(k, prefix) && matches(opts.Predicate, o) {
			out = append(out, o)
		}
	}
	rv := c.rv
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, rv, nil
}

func (c *Cacher) waitForListRV(ctx context.Context, opts ListOptions) error {
	switch opts.ResourceVersion {
	case "0":
		select {
		case <-c.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case "":
		rev, err := c.CurrentRevision(ctx)
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
	if resourceVersion != "0" {
		return c.Store.Get(ctx, key, out)
	}
	<-c.ready
	c.mu.RLock()
	o, ok := c.items[key]
	c.mu.RUnlock()
	if !ok {
		return newErr(ErrCodeKeyNotFound, key, "")
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(o.Object.DeepCopyObject()).Elem())
	return nil
}

func sortByKey(es []*CacheEvent) {
	sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
}
