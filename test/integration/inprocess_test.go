package integration

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/controller/garbagecollector"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/sharedinformers"
	"github.com/skiff-sh/skiff/internal/testing/mutationdetector"
)

// The controller manager and the scheduler these tests run share one
// informer factory per cluster whose objects come from the API server's
// watch caches in process, as in `skiff server`; the tests run
// with client-go's cache mutation detector, so a controller or plugin
// that changed a shared object fails them.
func TestMain(m *testing.M) { mutationdetector.Main(m) }

func TestCacheMutationDetectorOn(t *testing.T) { mutationdetector.Check(t) }

var (
	sharedMu        sync.Mutex
	sharedProcesses = map[*cluster]*sharedinformers.Process{}
)

// inProcessInformers is c's shared informer factory, made on first use and
// shut down when the test that made it ends (after the components it
// serves, whose cleanups run first).
func inProcessInformers(t *testing.T, c *cluster) *sharedinformers.Process {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if p := sharedProcesses[c]; p != nil {
		return p
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := sharedinformers.New(context.Background(), cs, manager.DefaultResyncPeriod, restartingCaches{c})
	p.IndexAll(garbagecollector.OwnerIndexers())
	if err := manager.PrepareInformers(p.Factory()); err != nil {
		t.Fatal(err)
	}
	sharedProcesses[c] = p
	t.Cleanup(func() {
		p.Shutdown()
		sharedMu.Lock()
		delete(sharedProcesses, c)
		sharedMu.Unlock()
	})
	return p
}

// restartingCaches read the caches of the cluster's current API server,
// which Restart replaces.
type restartingCaches struct{ c *cluster }

func (r restartingCaches) ForResource(gvr schema.GroupVersionResource) (sharedinformers.Cache, schema.GroupVersionKind, bool) {
	c, ok := r.c.Server().InProcessCache(gvr)
	if !ok {
		return nil, schema.GroupVersionKind{}, false
	}
	return restartingCache{c: r.c, gvr: gvr}, c.Kind(), true
}

func (r restartingCaches) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	return r.c.Server().InProcessResource(gvk)
}

// restartingCache reads the cache of the cluster's current API server.
type restartingCache struct {
	c   *cluster
	gvr schema.GroupVersionResource
}

func (r restartingCache) List(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error) {
	c, _ := r.c.Server().InProcessCache(r.gvr)
	return c.List(ctx, ns, opts)
}

func (r restartingCache) Watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	c, _ := r.c.Server().InProcessCache(r.gvr)
	return c.Watch(ctx, ns, opts)
}
