package storage_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/storage"
)

// TestNoEventLostAcrossWatchBreak reproduces the lost-event race of issue
// #15: the cache's etcd watch breaks, a write lands in etcd before the
// cache has recovered, and a client re-watches from the revision it last
// saw at that moment. The client must either receive that write, or have
// its watch ended (then 410 Gone when history is gone) so it relists;
// silently skipping it is the bug.
func TestNoEventLostAcrossWatchBreak(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compact bool // compaction makes resuming impossible: the cache must relist
	}{
		{name: "resumable"},
		{name: "compacted, relist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startEtcd(t)
			s := newCacher(t, c, storage.CacherOptions{})
			ctx := context.Background()
			a := create(t, s, cm("a", nil))
			// The cache has seen a.
			if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
				t.Fatal(err)
			}

			type result struct {
				w   *storage.CacheWatch
				err error
			}
			started := make(chan result, 1)
			var once sync.Once
			s.SetAfterWatchBreak(func() {
				once.Do(func() {
					// A write the broken etcd watch did not deliver.
					if err := s.Store.Create(ctx, prefix+"ns/b", cm("b", nil), nil); err != nil {
						t.Error(err)
					}
					if tc.compact {
						rev, err := s.CurrentRevision(ctx)
						if err != nil {
							t.Error(err)
						}
						if _, err := c.Compact(ctx, rev); err != nil {
							t.Error(err)
						}
					}
					// An informer re-watches from its last revision now.
					go func() {
						w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: a.ResourceVersion})
						started <- result{w, err}
					}()
					// Give the watch the chance to register while the
					// cache is recovering (it must either wait or be
					// served correctly).
					select {
					case r := <-started:
						started <- r
					case <-time.After(200 * time.Millisecond):
					}
				})
			})
			s.BreakWatch()

			var r result
			select {
			case r = <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("watch did not start")
			}
			if r.err != nil {
				if !storage.IsExpired(r.err) || !tc.compact {
					t.Fatalf("watch from %s: %v", a.ResourceVersion, r.err)
				}
				return // 410: the client relists and sees b.
			}
			defer r.w.Stop()
			create(t, s, cm("c", nil))
			var got []seen
			deadline := time.After(10 * time.Second)
			for len(got) < 2 {
				select {
				case ev, ok := <-r.w.ResultChan():
					if !ok {
						if tc.compact && len(got) == 0 {
							// Ended before delivering anything: the client
							// re-watches from a and gets 410, then relists.
							_, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: a.ResourceVersion})
							if !storage.IsExpired(err) {
								t.Fatalf("re-watch after the cache relisted: got %v, want expired", err)
							}
							return
						}
						t.Fatalf("watch closed after %v", got)
					}
					got = append(got, seen{ev.Type, mustObject(t, ev.Object).(*corev1.ConfigMap).Name})
				case <-deadline:
					t.Fatalf("timed out with %v", got)
				}
			}
			if diff := cmp.Diff([]seen{{watch.Added, "b"}, {watch.Added, "c"}}, got); diff != "" {
				t.Fatalf("events after the break (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHistoryByTime: the cache keeps every event of the last HistoryWindow
// (and at least 100), so a client whose watch broke a moment ago resumes
// it; older events go, and a watch from before them is 410 Gone.
func TestHistoryByTime(t *testing.T) {
	c := startEtcd(t)
	clk := testingclock.NewFakeClock(time.Now())
	s := newCacher(t, c, storage.CacherOptions{Clock: clk, HistoryWindow: time.Minute})
	ctx := context.Background()
	var rvs []string
	for i := 0; i < 150; i++ {
		rvs = append(rvs, create(t, s, cm(fmt.Sprintf("o%03d", i), nil)).ResourceVersion)
	}
	sync := func() {
		t.Helper()
		if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	watchFrom := func(rv string) error {
		w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: rv})
		if err == nil {
			w.Stop()
		}
		return err
	}
	// 150 events within the window: all kept (a fixed ring of 100 would not).
	if err := watchFrom(rvs[0]); err != nil {
		t.Fatalf("watch from the first of 150 fresh events: %v", err)
	}
	clk.Step(61 * time.Second)
	create(t, s, cm("late", nil))
	sync()
	// Old events beyond the newest 100 are gone.
	if err := watchFrom(rvs[0]); !storage.IsExpired(err) {
		t.Fatalf("watch from an event older than the window: got %v, want expired", err)
	}
	if err := watchFrom(rvs[60]); err != nil {
		t.Fatalf("watch from one of the newest 100 events: %v", err)
	}
}

type countingObserver struct {
	mu      sync.Mutex
	decodes map[string]int
}

func (o *countingObserver) ObserveEtcd(string, string, time.Duration) {}
func (o *countingObserver) ObserveDecodeError(resource string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decodes[resource]++
}
func (o *countingObserver) count(resource string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.decodes[resource]
}

// TestDecodeFailuresCounted: an object the cache cannot read is counted and
// left out, and does not stall the cache (later writes and consistent
// lists go on).
func TestDecodeFailuresCounted(t *testing.T) {
	c := startEtcd(t)
	obs := &countingObserver{decodes: map[string]int{}}
	store := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", storage.StoreOptions{Observer: obs})
	s := storage.NewCacher(store, prefix, attrs, storage.CacherOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-s.Ready()

	if _, err := c.Put(ctx, prefix+"ns/garbage", "not an object"); err != nil {
		t.Fatal(err)
	}
	create(t, s, cm("good", nil))
	objs, _, err := s.ListCached(ctx, prefix, storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, mustObject(t, o).(*corev1.ConfigMap).Name)
	}
	if diff := cmp.Diff([]string{"good"}, got); diff != "" {
		t.Fatalf("cached objects (-want +got):\n%s", diff)
	}
	if n := obs.count("configmaps"); n != 1 {
		t.Fatalf("decode errors counted: %d, want 1", n)
	}
}

// TestDeleteWithoutPreviousValue: etcd may send a DELETE without the old
// value; the cache removes the object (no phantom) and tells watchers
// with the state it held.
func TestDeleteWithoutPreviousValue(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	a := create(t, s, cm("a", map[string]string{"app": "x"}))
	if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.WatchCached(ctx, prefix, storage.ListOptions{ResourceVersion: a.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rv, _ := storage.ParseRV(a.ResourceVersion)
	s.ApplyEvent(&clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(prefix + "ns/a"), ModRevision: rv + 1}})
	got, raw := collect(t, w, 1)
	if diff := cmp.Diff([]seen{{watch.Deleted, "a"}}, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if o := mustObject(t, raw[0].Object).(*corev1.ConfigMap); o.ResourceVersion != fmt.Sprint(rv+1) || o.Labels["app"] != "x" {
		t.Fatalf("deleted object: rv %s labels %v, want rv %d and the last labels", o.ResourceVersion, o.Labels, rv+1)
	}
	objs, _, err := s.ListCached(ctx, prefix, storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("cache still holds %d objects after the delete", len(objs))
	}
}

type listCounter struct {
	mu    sync.Mutex
	lists int
}

func (o *listCounter) ObserveEtcd(op, _ string, _ time.Duration) {
	if op == "list" {
		o.mu.Lock()
		o.lists++
		o.mu.Unlock()
	}
}

// TestPagedSelectorListGrowsBatch: a paged list whose selector matches
// one object in many does not read etcd `limit` keys per round trip; the
// batch doubles, as upstream's.
func TestPagedSelectorListGrowsBatch(t *testing.T) {
	c := startEtcd(t)
	obs := &listCounter{}
	store := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", storage.StoreOptions{Observer: obs})
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		lbl := map[string]string{}
		if i == 499 {
			lbl["want"] = "yes"
		}
		if err := store.Create(ctx, fmt.Sprintf("%sns/o%03d", prefix, i), cm(fmt.Sprintf("o%03d", i), lbl), nil); err != nil {
			t.Fatal(err)
		}
	}
	sel, _ := labels.Parse("want=yes")
	list := &corev1.ConfigMapList{}
	if err := store.List(ctx, prefix, storage.ListOptions{Limit: 1, Predicate: storage.Predicate{Label: sel, GetAttrs: attrs}}, list); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"o499"}, names(t, list)); diff != "" {
		t.Fatalf("list (-want +got):\n%s", diff)
	}
	// 1+2+4+...+256 = 511 keys: 9 reads (a fixed batch of 1 needs 500).
	if obs.lists > 10 {
		t.Fatalf("%d etcd reads for one page over 500 keys, want at most 10", obs.lists)
	}
}

// TestEtcdErrors: a value over etcd's request limit is ErrCodeRequestTooLarge
// (413), and a call to an etcd that does not answer fails with
// ErrCodeTimeout (504) after the call timeout instead of hanging.
func TestEtcdErrors(t *testing.T) {
	c := startEtcd(t)
	store := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", storage.StoreOptions{CallTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	// Over etcd's limit (1.5 MiB), and over the client's send limit (2 MiB).
	for _, size := range []int{1600 << 10, 2 << 20} {
		big := cm("big", nil)
		big.Data["k"] = strings.Repeat("x", size)
		if err := store.Create(ctx, prefix+"ns/big", big, nil); !storage.HasCode(err, storage.ErrCodeRequestTooLarge) {
			t.Fatalf("create of %d bytes: got %v, want request too large", size, err)
		}
	}
	if got := storage.ToAPIError(storage.NewRequestTooLargeForTest(), corev1.Resource("configmaps"), "big"); errorCode(got) != 413 {
		t.Fatalf("request too large maps to %d, want 413", errorCode(got))
	}

	// An etcd endpoint that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	dead, err := clientv3.New(clientv3.Config{Endpoints: []string{ln.Addr().String()}, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	deadStore := storage.NewStore(dead, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "configmaps", storage.StoreOptions{CallTimeout: 500 * time.Millisecond})
	start := time.Now()
	err = deadStore.Get(ctx, prefix+"ns/a", &corev1.ConfigMap{})
	if !storage.HasCode(err, storage.ErrCodeTimeout) {
		t.Fatalf("get from an etcd that does not answer: got %v, want timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("get took %s, want about the call timeout", d)
	}
	if got := storage.ToAPIError(err, corev1.Resource("configmaps"), "a"); errorCode(got) != 504 {
		t.Fatalf("timeout maps to %d, want 504", errorCode(got))
	}
}

func errorCode(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
}

// TestConsistentListAfterOtherWrites: writes elsewhere in etcd advance its
// revision without an event for this cache; a consistent list still
// answers at once (the cache asks etcd for progress on its own watch
// stream) instead of waiting out the freshness timeout.
func TestConsistentListAfterOtherWrites(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{FreshnessTimeout: 10 * time.Second})
	ctx := context.Background()
	create(t, s, cm("a", nil))
	if _, err := c.Put(ctx, "/registry/secrets/ns/elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("consistent list took %s, want well under the freshness timeout", d)
	}
}

// TestListDeleting: the objects with a deletionTimestamp, kept as the
// cache changes and rebuilt by a fresh list, without a pass over the rest.
func TestListDeleting(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{})
	ctx := context.Background()
	deleting := func(s *storage.Cacher) []string {
		t.Helper()
		// A consistent list first: the cache has caught up with etcd.
		if err := s.List(ctx, prefix, storage.ListOptions{}, &corev1.ConfigMapList{}); err != nil {
			t.Fatal(err)
		}
		objs, err := s.ListDeleting(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, mustObject(t, o).(*corev1.ConfigMap).Name)
		}
		slices.Sort(names)
		return names
	}
	markDeleted := func(name string) {
		t.Helper()
		err := s.GuaranteedUpdate(ctx, prefix+"ns/"+name, &corev1.ConfigMap{}, nil, func(cur runtime.Object) (runtime.Object, error) {
			o := cur.(*corev1.ConfigMap).DeepCopy()
			now := metav1.Now()
			o.DeletionTimestamp = &now
			return o, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	create(t, s, cm("a", nil))
	held := cm("b", nil)
	held.Finalizers = []string{"example.com/hold"}
	create(t, s, held)
	create(t, s, cm("c", nil))
	if got := deleting(s); len(got) != 0 {
		t.Fatalf("deleting before any deletion: %v", got)
	}
	markDeleted("b")
	markDeleted("c")
	if diff := cmp.Diff([]string{"b", "c"}, deleting(s)); diff != "" {
		t.Fatalf("deleting (-want +got):\n%s", diff)
	}
	if err := s.Delete(ctx, prefix+"ns/c", nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, deleting(s)); diff != "" {
		t.Fatalf("deleting after c is gone (-want +got):\n%s", diff)
	}
	// A cache built by its first list of etcd knows the same.
	if diff := cmp.Diff([]string{"b"}, deleting(newCacher(t, c, storage.CacherOptions{}))); diff != "" {
		t.Fatalf("deleting in a new cache (-want +got):\n%s", diff)
	}
}

// TestConsistentListFallsBackToEtcd: a consistent list that the cache
// cannot serve within FreshnessTimeout (it is stuck behind etcd) is served
// by etcd, with the newest objects, as upstream's API server does, instead
// of failing.
func TestConsistentListFallsBackToEtcd(t *testing.T) {
	c := startEtcd(t)
	s := newCacher(t, c, storage.CacherOptions{FreshnessTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	create(t, s, cm("a", nil))
	release := make(chan struct{})
	defer close(release)
	broken := make(chan struct{})
	var once sync.Once
	s.SetAfterWatchBreak(func() {
		once.Do(func() { close(broken) })
		<-release
	})
	s.BreakWatch()
	<-broken
	create(t, s, cm("b", nil)) // in etcd; the cache cannot see it
	list := &corev1.ConfigMapList{}
	if err := s.List(ctx, prefix, storage.ListOptions{}, list); err != nil {
		t.Fatalf("consistent list while the cache is stuck: %v", err)
	}
	var names []string
	for _, o := range list.Items {
		names = append(names, o.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Fatalf("listed (-want +got):\n%s", diff)
	}
	// A list at an explicit revision the cache has not reached still
	// fails as too large, as upstream's does.
	if err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: list.ResourceVersion}, &corev1.ConfigMapList{}); !storage.HasCode(err, storage.ErrCodeTooLargeResourceVersion) {
		t.Fatalf("list at revision %s: %v, want too large resource version", list.ResourceVersion, err)
	}
}

// A cache that has just started watches from after the newest revision
// too: another cache must still be able to catch up by asking for
// progress.
func TestNewCacheDoesNotStallOtherCaches(t *testing.T) {
	c := startEtcd(t)
	cached := newCacher(t, c, storage.CacherOptions{FreshnessTimeout: 5 * time.Second})
	other := storage.NewStore(c, storage.ProtobufCodec{GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		func() runtime.Object { return &corev1.ConfigMap{} }, "secrets", storage.StoreOptions{})
	// The newest revision is a write the cache of configmaps has no event of.
	if err := other.Create(context.Background(), "/registry/secrets/ns/s", cm("s", nil), nil); err != nil {
		t.Fatal(err)
	}
	fresh := storage.NewCacher(other, "/registry/secrets/", attrs, storage.CacherOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = fresh.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-fresh.Ready()
	time.Sleep(100 * time.Millisecond) // its etcd watch is in place
	if _, _, err := cached.ListCached(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatalf("consistent list of a cache beside a new cache: %v", err)
	}
}
