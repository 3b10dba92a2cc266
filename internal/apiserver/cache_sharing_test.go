package apiserver

import (
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// TestOneWatchCachePerStoredResource: versions kept in the same keys
// (events and events.k8s.io Events, autoscaling/v1 and v2 HPAs) share one
// watch cache, so each object is decoded and held once.
func TestOneWatchCachePerStoredResource(t *testing.T) {
	// New does no I/O: an etcd client that never connects will do.
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	s, err := New(Config{Etcd: etcd})
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]bool{}
	for _, res := range s.resources {
		if !registry.IsVirtual(res) {
			prefixes[res.StoragePrefix] = true
		}
	}
	if len(s.cachers) != len(prefixes) {
		t.Errorf("%d watch caches for %d stored resources", len(s.cachers), len(prefixes))
	}
	for _, prefix := range []string{"events", "horizontalpodautoscalers"} {
		if !prefixes[prefix] {
			t.Errorf("no resource stored under %q", prefix)
		}
	}
}

// TestWatchCacheSettings: Events are served from etcd alone by default, as
// upstream's DefaultWatchCacheSizes say, and --watch-cache-sizes and
// --watch-cache change which resources are cached.
func TestWatchCacheSettings(t *testing.T) {
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	events := schema.GroupVersionResource{Version: "v1", Resource: "events"}
	eventsV1 := schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, tc := range []struct {
		name     string
		cfg      WatchCacheConfig
		uncached map[schema.GroupVersionResource]bool
	}{
		{"defaults", WatchCacheConfig{}, map[schema.GroupVersionResource]bool{events: true, eventsV1: true, pods: false}},
		{"events cached", WatchCacheConfig{Sizes: map[schema.GroupResource]int{{Resource: "events"}: 100}}, map[schema.GroupVersionResource]bool{events: false, eventsV1: false, pods: false}},
		{"pods uncached", WatchCacheConfig{Sizes: map[schema.GroupResource]int{{Resource: "pods"}: 0}}, map[schema.GroupVersionResource]bool{events: true, pods: true}},
		{"all uncached", WatchCacheConfig{Disabled: true, Sizes: map[schema.GroupResource]int{{Resource: "events"}: 100}}, map[schema.GroupVersionResource]bool{events: true, eventsV1: true, pods: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Etcd: etcd, WatchCache: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			for gvr, want := range tc.uncached {
				if got := s.handlers[gvr].store.Uncached(); got != want {
					t.Errorf("%s served from etcd alone: %v, want %v", gvr, got, want)
				}
			}
		})
	}
	_, err = New(Config{Etcd: etcd, WatchCache: WatchCacheConfig{Sizes: map[schema.GroupResource]int{{Group: "example.com", Resource: "pods"}: 0}}})
	if err == nil || !strings.Contains(err.Error(), "pods.example.com is not a resource this server stores") {
		t.Fatalf("a setting for an unknown resource: got %v", err)
	}
}
