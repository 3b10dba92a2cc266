package apiserver

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/storage"
)

// The API server's background loops. Each is a component with
// Start(ctx) error that blocks until ctx is done, and reads time from an
// injected clock so that tests step it.

// reapStore is what the reaper needs of a resource's store.
type reapStore interface {
	ListDeleting(ctx context.Context, prefix string) ([]*storage.CachedObject, error)
	Delete(ctx context.Context, key string, out runtime.Object, pre *storage.Preconditions) error
}

// reapTarget is one resource whose objects the reaper watches over.
type reapTarget struct {
	name   string // for logs
	store  reapStore
	prefix string
}

// reaper removes objects of gracefully deleted resources (pods) whose
// grace period is over and that nothing holds (no finalizers): the kubelet
// confirms sooner by deleting with grace 0, the reaper covers a node that
// never does.
type reaper struct {
	targets  []reapTarget
	clock    clock.WithTicker
	interval time.Duration
	// swept, if set, is called after each pass (tests wait on it).
	swept func()
}

// Start sweeps every interval until ctx is done.
func (r *reaper) Start(ctx context.Context) error {
	if len(r.targets) == 0 {
		<-ctx.Done()
		return nil
	}
	t := r.clock.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		r.sweep(ctx)
		if r.swept != nil {
			r.swept()
		}
	}
}

// sweep deletes every object whose graceful deletion is over.
func (r *reaper) sweep(ctx context.Context) {
	now := r.clock.Now()
	for _, tg := range r.targets {
		objs, err := tg.store.ListDeleting(ctx, tg.prefix)
		if err != nil {
			continue
		}
		for _, o := range objs {
			obj, err := o.Object()
			if err != nil {
				continue
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			dt := m.GetDeletionTimestamp()
			if dt == nil || len(m.GetFinalizers()) > 0 || now.Before(dt.Time) {
				continue
			}
			uid := m.GetUID()
			err = tg.store.Delete(ctx, o.Key, nil, &storage.Preconditions{UID: &uid})
			if err != nil && !storage.IsNotFound(err) {
				klog.FromContext(ctx).V(2).Info("reaping failed", "resource", tg.name, "key", o.Key, "err", err)
			}
		}
	}
}

// compactEtcd is what the compactor needs of etcd.
type compactEtcd interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Compact(ctx context.Context, rev int64, opts ...clientv3.CompactOption) (*clientv3.CompactResponse, error)
}

// compactor compacts etcd revisions older than one interval, as upstream
// does every 5 minutes: at each tick it compacts to the revision it saw at
// the previous tick.
type compactor struct {
	etcd     compactEtcd
	clock    clock.WithTicker
	interval time.Duration
	// compacted, if set, is called with each revision compacted (tests).
	compacted func(rev int64)
}

// Start compacts every interval until ctx is done; a negative interval
// disables it.
func (c *compactor) Start(ctx context.Context) error {
	if c.interval < 0 {
		<-ctx.Done()
		return nil
	}
	t := c.clock.NewTicker(c.interval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		resp, err := c.etcd.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
		if err != nil {
			continue
		}
		if last > 0 {
			if _, err := c.etcd.Compact(ctx, last); err != nil {
				klog.FromContext(ctx).V(2).Info("compaction failed", "revision", last, "err", err)
			} else if c.compacted != nil {
				c.compacted(last)
			}
		}
		last = resp.Header.Revision
	}
}
