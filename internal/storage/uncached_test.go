package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// An uncached resource (upstream's watch cache size 0, Events by default)
// answers lists, watches and gets as a cached one does, from etcd, and
// keeps nothing in memory.

func TestUncachedLists(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	var last *corev1.ConfigMap
	for i := 0; i < 5; i++ {
		last = create(t, s, cm(fmt.Sprintf("c%d", i), map[string]string{"even": fmt.Sprint(i%2 == 0)}))
	}
	sel, _ := labels.Parse("even=true")
	objs, rv, err := s.ListCached(ctx, prefix, storage.ListOptions{Predicate: storage.Predicate{Label: sel, GetAttrs: attrs}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, mustObject(t, o).(*corev1.ConfigMap).Name)
	}
	if diff := cmp.Diff([]string{"c0", "c2", "c4"}, got); diff != "" {
		t.Fatalf("selected list (-want +got):\n%s", diff)
	}
	if want, _ := storage.ParseRV(last.ResourceVersion); rv != want {
		t.Fatalf("list at revision %d, want the last write's %d", rv, want)
	}
	// resourceVersion=0 and a get at 0 read etcd too: nothing is stale.
	out := &corev1.ConfigMap{}
	if err := s.GuaranteedUpdate(ctx, prefix+"ns/c1", out, nil, func(cur runtime.Object) (runtime.Object, error) {
		cm := cur.(*corev1.ConfigMap).DeepCopy()
		cm.Data = map[string]string{"k": "changed"}
		return cm, nil
	}); err != nil {
		t.Fatal(err)
	}
	got0 := &corev1.ConfigMap{}
	if err := s.GetRV(ctx, prefix+"ns/c1", "0", got0); err != nil || got0.Data["k"] != "changed" {
		t.Fatalf("get at resourceVersion 0: %v %v, want the update", got0.Data, err)
	}
	list := &corev1.ConfigMapList{}
	if err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: "0"}, list); err != nil || len(list.Items) != 5 || list.Items[1].Data["k"] != "changed" {
		t.Fatalf("list at resourceVersion 0: %v (%d items)", err, len(list.Items))
	}
	// A limit is honoured at resourceVersion 0 (etcd pages), unlike a cache.
	if !s.UseEtcdForList(storage.ListOptions{ResourceVersion: "0", Limit: 2}) {
		t.Fatal("a paged list of an uncached resource is not served by etcd")
	}
	list = &corev1.ConfigMapList{}
	if err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: "0", Limit: 2}, list); err != nil || len(list.Items) != 2 || list.Continue == "" {
		t.Fatalf("paged list: %v, %d items, continue %q", err, len(list.Items), list.Continue)
	}
	// A resourceVersion etcd has not reached is refused, as by a cache.
	future := fmt.Sprint(rv + 1000)
	if _, _, err := s.ListCached(ctx, prefix, storage.ListOptions{ResourceVersion: future}); !storage.HasCode(err, storage.ErrCodeTooLargeResourceVersion) {
		t.Fatalf("list at a future revision: got %v, want too large", err)
	}
	if err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: future}, &corev1.ConfigMapList{}); !storage.HasCode(err, storage.ErrCodeTooLargeResourceVersion) {
		t.Fatalf("typed list at a future revision: got %v, want too large", err)
	}
	if n := s.Held(); n != 0 {
		t.Fatalf("an uncached resource holds %d objects and events in memory", n)
	}
}

func TestUncachedWatchFromRevisionAndFilters(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	first := create(t, s, cm("a", map[string]string{"app": "x"}))

	sel, _ := labels.Parse("app=x")
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion, Predicate: storage.Predicate{Label: sel, GetAttrs: attrs}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	all, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Stop()
	relabel := func(name, app string) {
		t.Helper()
		if err := s.GuaranteedUpdate(ctx, prefix+"ns/"+name, &corev1.ConfigMap{}, nil, func(cur runtime.Object) (runtime.Object, error) {
			c := cur.(*corev1.ConfigMap).DeepCopy()
			c.Labels = map[string]string{"app": app}
			c.Data["n"] += "+" // a change even when the label stays
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	create(t, s, cm("b", map[string]string{"app": "y"})) // filtered out
	create(t, s, cm("c", map[string]string{"app": "x"})) // added
	relabel("c", "z")                                    // leaves the selection: a DELETED for this watcher
	relabel("b", "x")                                    // enters it: an ADDED
	relabel("b", "x")                                    // stays in it: a MODIFIED
	if err := s.Delete(ctx, prefix+"ns/b", nil, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, w, 5)
	want := []seen{{watch.Added, "c"}, {watch.Deleted, "c"}, {watch.Added, "b"}, {watch.Modified, "b"}, {watch.Deleted, "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("selected events (-want +got):\n%s", diff)
	}
	got, _ = collect(t, all, 6)
	want = []seen{{watch.Added, "b"}, {watch.Added, "c"}, {watch.Modified, "c"}, {watch.Modified, "b"}, {watch.Modified, "b"}, {watch.Deleted, "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("every event (-want +got):\n%s", diff)
	}

	// Once etcd compacted the first revision, a watch from it is 410.
	rev, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion}); !storage.IsExpired(err) {
		t.Fatalf("watch from a compacted revision: got %v, want expired", err)
	}
	// From the revision before the compacted one too: the change at the
	// compacted revision comes without its previous value, and a watch
	// that ended on it would be resumed into the same end forever.
	if _, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: fmt.Sprint(rev - 1)}); !storage.IsExpired(err) {
		t.Fatalf("watch from just before the compacted revision: got %v, want expired", err)
	}
	// From the compacted revision on, the watch goes on.
	fromNow, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: fmt.Sprint(rev)})
	if err != nil {
		t.Fatalf("watch from the compacted revision: %v", err)
	}
	defer fromNow.Stop()
	create(t, s, cm("d", nil))
	if got, _ := collect(t, fromNow, 1); !cmp.Equal([]seen{{watch.Added, "d"}}, got) {
		t.Fatalf("watch from the compacted revision: %v, want the create of d", got)
	}
	if n := s.Held(); n != 0 {
		t.Fatalf("an uncached resource holds %d objects and events in memory", n)
	}
}

func TestUncachedWatchInitialEvents(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	create(t, s, cm("a", nil))
	b := create(t, s, cm("b", nil))
	yes, no := true, false

	// Watch-list: the objects, then the bookmark that ends them, then changes.
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: "NotOlderThan", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, raw := collect(t, w, 3)
	if diff := cmp.Diff([]seen{{watch.Added, "a"}, {watch.Added, "b"}, {watch.Bookmark, ""}}, got); diff != "" {
		t.Fatalf("initial events (-want +got):\n%s", diff)
	}
	if brv, _ := storage.ParseRV(b.ResourceVersion); !raw[2].InitialEventsEnd || raw[2].RV < brv {
		t.Fatalf("bookmark does not end the initial events at their revision: %+v", raw[2])
	}

	// resourceVersion "" (no sendInitialEvents): the state first too.
	legacy, err := s.WatchCached(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Stop()
	if got, _ := collect(t, legacy, 2); !cmp.Equal([]seen{{watch.Added, "a"}, {watch.Added, "b"}}, got) {
		t.Fatalf("legacy watch's initial events: %v", got)
	}
	// sendInitialEvents=false: changes from now on only.
	fresh, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &no})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Stop()

	create(t, s, cm("c", nil))
	for name, w := range map[string]*storage.CacheWatch{"watch-list": w, "legacy": legacy, "from now": fresh} {
		if got, _ := collect(t, w, 1); !cmp.Equal([]seen{{watch.Added, "c"}}, got) {
			t.Fatalf("%s watch after a create: %v", name, got)
		}
	}

	// A watch-list at a revision etcd has not reached is refused.
	future := fmt.Sprint(mustRV(t, b) + 1000)
	if _, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &yes, ResourceVersion: future, ResourceVersionMatch: "NotOlderThan", AllowWatchBookmarks: true}); !storage.HasCode(err, storage.ErrCodeTooLargeResourceVersion) {
		t.Fatalf("watch-list at a future revision: got %v, want too large", err)
	}

	// Stopping a watch ends its etcd watch: its channel closes.
	fresh.Stop()
	select {
	case _, ok := <-fresh.ResultChan():
		if ok {
			t.Fatal("event after Stop")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stopped watch's channel still open")
	}
}

func mustRV(t *testing.T, o *corev1.ConfigMap) int64 {
	t.Helper()
	rv, err := storage.ParseRV(o.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

// A watcher that does not read is ended once it is watcherBuffer events
// behind and takes none for a while, and its etcd watch with it.
func TestUncachedSlowWatcherEnded(t *testing.T) {
	storage.SetSlowWatcherGrace(t, 500*time.Millisecond)
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	no := false
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &no})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 1100; i++ {
		create(t, s, cm(fmt.Sprintf("c%d", i), nil))
	}
	select {
	case <-w.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a watcher 1,100 events behind was not ended")
	}
}

// apiserver_storage_objects of an uncached resource comes from etcd's
// count of its keys.
func TestUncachedCount(t *testing.T) {
	c := startEtcd(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := c.Put(ctx, fmt.Sprintf("%sns/c%d", prefix, i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	counted := make(chan int, 10)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true, OnCount: func(n int) { counted <- n }})
	select {
	case n := <-counted:
		if n != 3 || s.Count() != 3 {
			t.Fatalf("counted %d (Count %d), want 3", n, s.Count())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no count")
	}
}

// An uncached watch's bookmarks are etcd's progress notifications, which
// etcd sends to every watch of a stream when one asks: only watchers that
// allow bookmarks get them.
func TestUncachedBookmarksOnlyWhenAllowed(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	no := false
	with, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &no, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Stop()
	without, err := s.WatchCached(ctx, prefix, storage.ListOptions{SendInitialEvents: &no})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Stop()
	// etcd defers progress while a watch waits for a revision it has not
	// reached (these start after the newest): one write first.
	create(t, s, cm("a", nil))
	for _, w := range []*storage.CacheWatch{with, without} {
		if g, _ := collect(t, w, 1); !cmp.Equal([]seen{{watch.Added, "a"}}, g) {
			t.Fatalf("first event %v, want the create of a", g)
		}
	}
	deadline := time.After(10 * time.Second)
	for bookmarked := false; !bookmarked; {
		// The uncached watches' own gRPC stream.
		if err := c.RequestProgress(storage.UncachedStream(ctx)); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-with.ResultChan():
			if ev.Type != watch.Bookmark || ev.RV == 0 {
				t.Fatalf("watcher allowing bookmarks got %s at %d, want a bookmark", ev.Type, ev.RV)
			}
			bookmarked = true
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no bookmark from etcd's progress notification")
		}
	}
	create(t, s, cm("b", nil))
	if g, _ := collect(t, without, 1); !cmp.Equal([]seen{{watch.Added, "b"}}, g) {
		t.Fatalf("watcher not allowing bookmarks: next event %v, want the create of b", g)
	}
}

// An uncached watch starts after the newest revision, and etcd answers no
// progress request on a stream with such a watch until the next write.
// Uncached watches have a stream of their own, so that a cache of another
// resource still catches up with a revision it never saw an event of (a
// write elsewhere) by asking for progress, instead of failing its
// consistent read after the freshness timeout.
func TestUncachedWatchDoesNotStallCaches(t *testing.T) {
	c := startEtcd(t)
	cached := newCacher(t, c, storage.CacherOptions{FreshnessTimeout: 5 * time.Second})
	events := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "events", storage.StoreOptions{})
	uncached := storage.NewCacher(events, "/registry/events/", attrs, storage.CacherOptions{Uncached: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = uncached.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-uncached.Ready()

	// The newest revision is a write the cache of configmaps has no event of.
	if err := events.Create(ctx, "/registry/events/ns/e", cm("e", nil), nil); err != nil {
		t.Fatal(err)
	}
	no := false
	w, err := uncached.WatchCached(ctx, "/registry/events/", storage.ListOptions{SendInitialEvents: &no})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, _, err := cached.ListCached(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatalf("consistent list of a cache beside an uncached watch: %v", err)
	}
}

// A watch from an older revision starts with every change since, more
// than a watcher queues: a client that reads them, even after a pause,
// gets them all (the robustness checker's resumed watch was cut here).
func TestUncachedWatchFromOldRevisionGetsEveryChange(t *testing.T) {
	storage.SetSlowWatcherGrace(t, 5*time.Second)
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{Uncached: true})
	ctx := context.Background()
	first := create(t, s, cm("first", nil))
	const n = 2500
	for i := 0; i < n; i++ {
		create(t, s, cm(fmt.Sprintf("c%d", i), nil))
	}
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	time.Sleep(time.Second) // the burst fills the watcher's queue meanwhile
	got, _ := collect(t, w, n)
	if got[0].Name != "c0" || got[n-1].Name != fmt.Sprintf("c%d", n-1) {
		t.Fatalf("events from %s to %s, want c0 to c%d", got[0].Name, got[n-1].Name, n-1)
	}
}
