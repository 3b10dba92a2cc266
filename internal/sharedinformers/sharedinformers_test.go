package sharedinformers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/sharedinformers"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// seen records the ConfigMap names a handler was told about.
type seen struct {
	mu    sync.Mutex
	names map[string]bool
}

func (s *seen) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.names[cm.Name] = true
		}
	}}
}

func (s *seen) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

// TestScopes: two components share one informer (through the client, no
// caches in process); the first one's shutdown (its leadership ends, its
// stop channel closes) removes its handler and leaves the informer running
// for the second.
func TestScopes(t *testing.T) {
	cs := testapiserver.Start(t).Clientset()
	ctx := context.Background()
	p := sharedinformers.New(ctx, cs, 0, nil)
	t.Cleanup(p.Shutdown)

	first, second := p.Scope(false), p.Scope(true)
	a, b := &seen{names: map[string]bool{}}, &seen{names: map[string]bool{}}
	if _, err := first.Core().V1().ConfigMaps().Informer().AddEventHandler(a.handler()); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Core().V1().ConfigMaps().Informer().AddEventHandler(b.handler()); err != nil {
		t.Fatal(err)
	}
	if first.Core().V1().ConfigMaps().Informer().GetStore() != second.Core().V1().ConfigMaps().Informer().GetStore() {
		t.Fatal("the scopes' ConfigMap informers keep separate caches")
	}
	stop := make(chan struct{})
	first.Start(stop)
	second.Start(stop)
	for typ, ok := range first.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}

	create := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(s *seen, name string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return s.has(name), nil
		}); err != nil {
			t.Fatalf("handler never saw %s", name)
		}
	}
	create("one")
	waitFor(a, "one")
	waitFor(b, "one")
	// Without the API server's caches, informers read through the client
	// and drop managedFields.
	obj, ok, _ := first.Core().V1().ConfigMaps().Informer().GetStore().GetByKey("default/one")
	if !ok || len(obj.(*corev1.ConfigMap).ManagedFields) != 0 {
		t.Errorf("a ConfigMap read through the client: found %v, managedFields kept", ok)
	}

	// The first component stops: its stop channel closes and it shuts its
	// scope down.
	close(stop)
	first.Shutdown()
	create("two")
	waitFor(b, "two") // the informer still runs
	if a.has("two") {
		t.Error("a handler of the shut-down scope was still called")
	}

	// A handler added after Shutdown is not kept either.
	late := &seen{names: map[string]bool{}}
	if _, err := first.Core().V1().ConfigMaps().Informer().AddEventHandler(late.handler()); err != nil {
		t.Fatal(err)
	}
	create("three")
	waitFor(b, "three")
	if late.has("three") {
		t.Error("a handler added after Shutdown was kept")
	}
}
