package storage

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"
)

// TestBookmarkNeverOvertakesEvents: a bookmark queued after events it
// covers is sent after them. Before, the watcher picked at random between
// its queued events and a pending bookmark, so a client could get the
// bookmark for revision 7 before the event of revision 7 (found by
// test/robustness as an event older than a bookmark), and a client that
// resumed from the bookmark would have lost the event.
func TestBookmarkNeverOvertakesEvents(t *testing.T) {
	type got struct {
		Type watch.EventType
		RV   int64
	}
	want := []got{{watch.Added, 5}, {watch.Modified, 6}, {watch.Modified, 7}, {watch.Bookmark, 7}}
	// The old select chose the bookmark first about every other time: 50
	// rounds make a pass by chance all but impossible.
	for round := range 50 {
		w := newCacheWatcher("/p/", Predicate{}, true, nil)
		for i, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Modified} {
			rv := int64(5 + i)
			w.offer(&CacheEvent{Type: typ, Key: "/p/a", RV: rv, Cur: &CachedObject{Key: "/p/a", RV: rv}, Prev: &CachedObject{Key: "/p/a"}})
		}
		w.bookmark <- 7
		ctx, cancel := context.WithCancel(context.Background())
		go w.run(ctx, nil, false, 4)
		var gots []got
		for range want {
			select {
			case ev := <-w.result:
				gots = append(gots, got{ev.Type, ev.RV})
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: only %v", round, gots)
			}
		}
		cancel()
		if diff := cmp.Diff(want, gots); diff != "" {
			t.Fatalf("round %d: events (-want +got):\n%s", round, diff)
		}
	}
}

// TestBookmarkNeverGoesBack: a bookmark older than an event already sent
// (the event was queued after the bookmark, and went first when the queue
// was drained) is not sent.
func TestBookmarkNeverGoesBack(t *testing.T) {
	w := newCacheWatcher("/p/", Predicate{}, true, nil)
	w.offer(&CacheEvent{Type: watch.Added, Key: "/p/a", RV: 9, Cur: &CachedObject{Key: "/p/a", RV: 9}})
	w.bookmark <- 8
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx, nil, false, 4)
	if ev := <-w.result; ev.Type != watch.Added || ev.RV != 9 {
		t.Fatalf("first: %s %d, want ADDED 9", ev.Type, ev.RV)
	}
	w.bookmark <- 10
	if ev := <-w.result; ev.Type != watch.Bookmark || ev.RV != 10 {
		t.Fatalf("second: %s %d, want the bookmark of 10 (not the one of 8)", ev.Type, ev.RV)
	}
}

// TestSlowWatcherClosedAfterBuffer: a watcher that does not read is closed
// once watcherBuffer events wait for it, and not before.
func TestSlowWatcherClosedAfterBuffer(t *testing.T) {
	w := newCacheWatcher("/p/", Predicate{}, false, nil)
	for i := range watcherBuffer {
		if !w.offer(&CacheEvent{Type: watch.Added, Key: "/p/a", RV: int64(i + 1), Cur: &CachedObject{Key: "/p/a"}}) {
			t.Fatalf("event %d refused, want %d queued first", i+1, watcherBuffer)
		}
	}
	if w.offer(&CacheEvent{Type: watch.Added, Key: "/p/a", RV: watcherBuffer + 1, Cur: &CachedObject{Key: "/p/a"}}) {
		t.Fatalf("event %d accepted by a watcher %d behind", watcherBuffer+1, watcherBuffer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx, nil, false, 0)
	for i := range watcherBuffer {
		if ev := <-w.result; ev.RV != int64(i+1) {
			t.Fatalf("event %d has revision %d", i+1, ev.RV)
		}
	}
}
