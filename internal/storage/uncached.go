package storage

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// A resource whose watch cache is off (CacherOptions.Uncached, upstream's
// --watch-cache-sizes <resource>#0; Events by default, as upstream) keeps
// nothing in memory: lists read etcd, each watch is an etcd watch of its
// own (the client multiplexes them on one gRPC stream), gets at
// resourceVersion 0 read etcd. The Cacher's methods take these paths, so
// handlers and in-process informers do not need to know.

// uncachedStream is the gRPC stream of uncached watches (watchStream).
func uncachedStream(ctx context.Context) context.Context { return watchStream(ctx, "uncached") }

// slowWatcherGrace is how long an uncached watcher that is full may take
// no event before it is ended (a client that stopped reading).
var slowWatcherGrace = 5 * time.Second

// countInterval is how often an uncached resource's objects are counted
// for apiserver_storage_objects (upstream's --etcd-count-metric-poll-period).
const countInterval = time.Minute

// startUncached marks the resource ready at once and counts its objects
// every countInterval until ctx is done.
func (c *cache) startUncached(ctx context.Context) error {
	c.mu.Lock()
	c.isReady = true
	close(c.readyNow)
	close(c.ready)
	c.mu.Unlock()
	defer c.terminateAll()
	t := time.NewTicker(countInterval)
	defer t.Stop()
	for {
		c.countObjects(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *cache) countObjects(ctx context.Context) {
	cctx, cancel := c.store.callCtx(ctx)
	defer cancel()
	resp, err := c.store.client.Get(cctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return
	}
	c.count.Store(resp.Count)
	for _, f := range c.onCount {
		f(int(resp.Count))
	}
}

// listUncached reads the objects under prefix that match pred (in the
// stored version's field names) from etcd, in pages at one revision,
// sorted by key. A resourceVersion newer than etcd's is refused as the
// cache would refuse it after waiting.
func (c *cache) listUncached(ctx context.Context, prefix string, resourceVersion string, pred Predicate) ([]*CachedObject, int64, error) {
	var atLeast int64
	if resourceVersion != "" && resourceVersion != "0" {
		var err error
		if atLeast, err = ParseRV(resourceVersion); err != nil {
			return nil, 0, newErr(ErrCodeInvalidObj, "", err.Error())
		}
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	startKey := prefix
	var rev int64
	var out []*CachedObject
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(1000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		start := time.Now()
		cctx, cancel := c.store.callCtx(ctx)
		resp, err := c.store.client.Get(cctx, startKey, opts...)
		cancel()
		c.store.observe("list", start)
		if err != nil {
			return nil, 0, c.store.etcdErr(ctx, err, prefix, rev)
		}
		if rev == 0 {
			rev = resp.Header.Revision
			if atLeast > rev {
				return nil, 0, &Error{Code: ErrCodeTooLargeResourceVersion, ResourceVersion: atLeast, Msg: formatRV(rev)}
			}
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			obj := c.store.newFunc()
			if err := c.store.decodeStored(key, kv.Value, obj, kv.ModRevision); err != nil {
				return nil, 0, err
			}
			o, err := c.cachedObject(key, obj, kv.ModRevision)
			if err != nil {
				return nil, 0, newErr(ErrCodeInvalidObj, key, err.Error())
			}
			if matches(pred, o) {
				out = append(out, o)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		startKey = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watchUncached starts a watcher fed by an etcd watch of its own, from
// the state listed at one revision (withState) or from a revision: the
// given one, or etcd's newest when rev is 0. A revision etcd compacted is
// 410 Gone before the watch starts; if etcd ends the watch later (a
// compaction it fell behind, a lost leader), the watch ends and the client
// watches again from the last revision it saw, as from a cache that gave up
// on it.
func (c *Cacher) watchUncached(ctx context.Context, prefix string, opts ListOptions, rev int64, withState, initialEnd bool) (*CacheWatch, error) {
	var initial []*CacheEvent
	startRV := rev
	switch {
	case withState:
		listRV := ""
		if initialEnd {
			listRV = opts.ResourceVersion
		}
		objs, at, err := c.listUncached(ctx, prefix, listRV, opts.Predicate)
		if err != nil {
			return nil, err
		}
		initial = make([]*CacheEvent, len(objs))
		for i, o := range objs {
			initial[i] = &CacheEvent{Type: watch.Added, Key: o.Key, Cur: o, RV: o.RV}
		}
		startRV = at
	case rev == 0:
		cur, err := c.store.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		startRV = cur
	default:
		// Reading one key at rev fails if etcd compacted it. (The watch
		// starts at rev+1, which etcd could serve when rev+1 is the
		// compacted revision, but a change at that revision comes
		// without its previous value, which ends the watch below:
		// 410 now saves the client from resuming into that forever.)
		cctx, cancel := c.store.callCtx(ctx)
		_, err := c.store.client.Get(cctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			err = c.store.etcdErr(ctx, err, prefix, rev)
			if IsExpired(err) {
				return nil, &Error{Code: ErrCodeResourceExpired, ResourceVersion: rev, Msg: "compacted"}
			}
			if !HasCode(err, ErrCodeTooLargeResourceVersion) {
				return nil, err
			}
			// A revision etcd has not reached yet: the watch waits for it.
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	w := newCacheWatcher(prefix, opts.Predicate, opts.AllowWatchBookmarks, c.served)
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	c.watchers[id] = w
	c.mu.Unlock()
	cw := &CacheWatch{c: c, id: id, w: w, cancel: cancel}
	wopts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(startRV + 1)}
	if opts.AllowWatchBookmarks {
		wopts = append(wopts, clientv3.WithProgressNotify())
	}
	ch := c.store.client.Watch(uncachedStream(ctx), prefix, wopts...)
	go c.feedUncached(ctx, cw, ch, !opts.Predicate.Empty())
	go w.run(ctx, initial, initialEnd, startRV)
	return cw, nil
}

// feedUncached offers an etcd watch's events to one watcher until either
// ends, or until etcd sends a change without the previous value it needs.
// needPrev says whether the watcher's selectors need the previous state of
// a modified object (to tell a change that makes it match, or stop
// matching); without selectors every object matches, and the previous
// state is not decoded.
func (c *Cacher) feedUncached(ctx context.Context, cw *CacheWatch, ch clientv3.WatchChan, needPrev bool) {
	defer cw.Stop()
	logger := klog.FromContext(ctx).WithValues("prefix", c.prefix)
	for resp := range ch {
		if err := resp.Err(); err != nil {
			if ctx.Err() == nil {
				logger.V(2).Info("etcd watch ended; ending the watch so that its client resumes", "err", err)
			}
			return
		}
		if resp.IsProgressNotify() {
			// A bookmark only for a watcher that allows them: etcd
			// notifies every watch of a stream when anyone asks for
			// progress on it.
			if !cw.w.bookmarks {
				continue
			}
			select {
			case <-cw.w.bookmark:
			default:
			}
			select {
			case cw.w.bookmark <- resp.Header.Revision:
			default:
			}
			continue
		}
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if ev.PrevKv == nil && !ev.IsCreate() {
				// etcd leaves the previous value out when compaction
				// passed it (a watcher catching up): what was deleted,
				// and whether a change left a selection, cannot be told.
				// End the watch, as upstream's etcd watcher does; the
				// client resumes from its last revision, which the
				// compaction passed too: 410, and it relists.
				logger.V(2).Info("etcd event without its previous value; ending the watch", "key", key, "revision", ev.Kv.ModRevision)
				return
			}
			var prev *CachedObject
			if ev.Type == mvccpb.PUT && !ev.IsCreate() {
				prev = &CachedObject{Key: key} // matches when there are no selectors
				if needPrev {
					// nil when unreadable: the change then reaches a
					// selector's watcher as an Added.
					prev = c.decodeObject(logger, key, ev.PrevKv.Value, ev.PrevKv.ModRevision)
				}
			}
			e := c.event(logger, key, ev, prev)
			if e == nil {
				continue
			}
			if !cw.w.offerWait(ctx, e, slowWatcherGrace) {
				logger.V(2).Info("watcher took no event for a while; ending it", "grace", slowWatcherGrace)
				return
			}
		}
	}
}

// Uncached says whether the resource is served from etcd alone.
func (c *Cacher) Uncached() bool { return c.opts.Uncached }
