package apiserver

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

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
