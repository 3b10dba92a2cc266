package admission

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// liveLookupTTL is how long an empty live lookup stands in for the cache
// (upstream's LimitRanger and ResourceQuota keep 30 s).
const liveLookupTTL = 30 * time.Second

// namespacedLister lists the objects of one resource in a namespace from
// the server's cache; when the cache holds none it reads etcd once, and
// remembers that answer for liveLookupTTL, as upstream's LimitRanger and
// ResourceQuota do: an object created a moment ago is seen, and a
// namespace without any costs one etcd read per TTL, not one per request.
type namespacedLister struct {
	r     registry.Reader
	gvr   schema.GroupVersionResource
	clock clock.PassiveClock
	// newList makes an empty list of the resource's kind.
	newList func() runtime.Object

	mu   sync.Mutex
	live map[string]liveEntry
}

type liveEntry struct {
	expiry time.Time
	items  []runtime.Object
}

func newNamespacedLister(r registry.Reader, gvr schema.GroupVersionResource, c clock.PassiveClock, newList func() runtime.Object) *namespacedLister {
	return &namespacedLister{r: r, gvr: gvr, clock: c, newList: newList, live: map[string]liveEntry{}}
}

// list returns the objects in ns (shared: callers must not change them).
func (l *namespacedLister) list(ctx context.Context, ns string) ([]runtime.Object, error) {
	items, err := l.read(ctx, ns, false)
	if err != nil || len(items) > 0 {
		return items, err
	}
	now := l.clock.Now()
	l.mu.Lock()
	e, ok := l.live[ns]
	l.mu.Unlock()
	if ok && now.Before(e.expiry) {
		return e.items, nil
	}
	items, err = l.read(ctx, ns, true)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	for k, old := range l.live { // forget expired entries
		if !now.Before(old.expiry) {
			delete(l.live, k)
		}
	}
	l.live[ns] = liveEntry{expiry: now.Add(liveLookupTTL), items: items}
	l.mu.Unlock()
	return items, nil
}

func (l *namespacedLister) read(ctx context.Context, ns string, latest bool) ([]runtime.Object, error) {
	list := l.newList()
	if err := l.r.List(ctx, l.gvr, ns, latest, list); err != nil {
		return nil, err
	}
	return meta.ExtractList(list)
}
