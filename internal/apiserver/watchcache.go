package apiserver

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// WatchCacheConfig says which resources the API server serves from its
// watch cache, as kube-apiserver's --watch-cache and --watch-cache-sizes
// do. A resource without one is served from etcd alone (storage.Cacher's
// Uncached mode): every list reads etcd, every watch is an etcd watch.
type WatchCacheConfig struct {
	// Disabled serves every resource from etcd, custom resources included
	// (--watch-cache=false).
	Disabled bool
	// Sizes are settings by resource over DefaultWatchCacheSizes
	// (--watch-cache-sizes): 0 serves the resource from etcd, any other
	// size caches it (caches size themselves, as upstream's do since
	// their sizes became automatic). A version stored in another's format
	// (events.k8s.io Events, kept as core Events) shares that resource's
	// cache and follows its setting.
	Sizes map[schema.GroupResource]int
}

// DefaultWatchCacheSizes are upstream's: Events are not cached. There is
// one Event per scheduled pod and many more per failing one; clients
// rarely watch them, and at 150,000 pods the cache held a few hundred MB
// of them (bench/README.md, session 18).
func DefaultWatchCacheSizes() map[schema.GroupResource]int {
	return map[schema.GroupResource]int{
		{Resource: "events"}:                         0,
		{Group: "events.k8s.io", Resource: "events"}: 0,
	}
}

func (w WatchCacheConfig) cached(gr schema.GroupResource) bool {
	if w.Disabled {
		return false
	}
	if size, ok := w.Sizes[gr]; ok {
		return size != 0
	}
	size, ok := DefaultWatchCacheSizes()[gr]
	return !ok || size != 0
}

// ParseWatchCacheSizes reads --watch-cache-sizes settings:
// resource[.group]#size, the resource lowercase and plural, no group for
// the core API, size a number not below 0.
func ParseWatchCacheSizes(settings []string) (map[schema.GroupResource]int, error) {
	if len(settings) == 0 {
		return nil, nil
	}
	sizes := map[schema.GroupResource]int{}
	for _, s := range settings {
		res, num, ok := strings.Cut(s, "#")
		if !ok || res == "" {
			return nil, fmt.Errorf("%q: want resource[.group]#size", s)
		}
		size, err := strconv.Atoi(num)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("%q: the size must be a number not below 0", s)
		}
		sizes[schema.ParseGroupResource(res)] = size
	}
	return sizes, nil
}

// check refuses settings for resources the server does not keep in etcd:
// a misspelt name would otherwise change nothing, silently.
func (w WatchCacheConfig) check(resources []registry.Resource) error {
	stored := map[schema.GroupResource]bool{}
	for _, res := range resources {
		if !registry.IsVirtual(res) {
			stored[res.GroupVersion.WithResource(res.Resource).GroupResource()] = true
		}
	}
	for gr := range w.Sizes {
		if !stored[gr] {
			return fmt.Errorf("--watch-cache-sizes: %s is not a resource this server stores (custom resources take no setting)", gr)
		}
	}
	return nil
}
