package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// recorder is a sync whose result per call is scripted; every call is
// reported on calls.
type recorder struct {
	mu      sync.Mutex
	results map[string][]error // popped per call; empty means nil
	calls   chan string
}

func newRecorder(results map[string][]error) *recorder {
	return &recorder{results: results, calls: make(chan string, 100)}
}

func (r *recorder) sync(_ context.Context, key string) error {
	r.mu.Lock()
	var err error
	if rs := r.results[key]; len(rs) > 0 {
		err, r.results[key] = rs[0], rs[1:]
	}
	r.mu.Unlock()
	r.calls <- key
	return err
}

// next waits for the next sync and returns its key.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case k := <-r.calls:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no sync within 10s")
		return ""
	}
}

// start runs q until the test ends.
func start(t *testing.T, q *Queue[string]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// barrier adds a key that always succeeds and waits for its sync: with one
// worker, every key added before it has been handled (synced and requeued
// or forgotten) by then.
func barrier(t *testing.T, q *Queue[string], r *recorder, name string) {
	t.Helper()
	q.Add(name)
	if got := r.next(t); got != name {
		t.Fatalf("synced %q, want the barrier %q", got, name)
	}
}

func TestSyncResults(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", errors.New("stale"))
	cases := []struct {
		name string
		// first is what the first sync of "a" returns.
		first error
		// wantRequeues is NumRequeues("a") after the first sync.
		wantRequeues int
		// wait is how far the clock must move before "a" is synced again.
		wait time.Duration
	}{
		{name: "error: rate-limited retry", first: errors.New("boom"), wantRequeues: 1, wait: time.Second},
		{name: "conflict: rate-limited retry", first: conflict, wantRequeues: 1, wait: time.Second},
		{name: "RequeueAfter: not a failure", first: RequeueAfter(30 * time.Second), wantRequeues: 0, wait: 30 * time.Second},
		{name: "wrapped RequeueAfter", first: fmt.Errorf("content remaining: %w", RequeueAfter(5*time.Second)), wantRequeues: 0, wait: 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			r := newRecorder(map[string][]error{"a": {tc.first}})
			q := NewQueue("test", r.sync, Options[string]{
				Clock:       clk,
				RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			})
			start(t, q)
			q.Add("a")
			if got := r.next(t); got != "a" {
				t.Fatalf("first sync of %q, want a", got)
			}
			barrier(t, q, r, "b")
			if got := q.NumRequeues("a"); got != tc.wantRequeues {
				t.Errorf("NumRequeues(a) = %d, want %d", got, tc.wantRequeues)
			}
			// The clock is fake, so "a" cannot come back before it moves.
			clk.Step(tc.wait - time.Millisecond)
			barrier(t, q, r, "c")
			clk.Step(time.Millisecond)
			if got := r.next(t); got != "a" {
				t.Fatalf("synced %q after %s, want a again", got, tc.wait)
			}
			barrier(t, q, r, "d")
			if got := q.NumRequeues("a"); got != 0 {
				t.Errorf("NumRequeues(a) after a success = %d, want 0 (forgotten)", got)
			}
		})
	}
}

func TestRetriesBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	boom := errors.New("boom")
	r := newRecorder(map[string][]error{"a": {boom, boom, boom}})
	q := NewQueue("test", r.sync, Options[string]{
		Clock:       clk,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
	})
	start(t, q)
	q.Add("a")
	var got []string
	// Failures 1, 2, 3 wait 1s, 2s, 4s; the fourth sync succeeds.
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second} {
		clk.Step(wait)
		k := r.next(t)
		barrier(t, q, r, fmt.Sprintf("barrier-%d", i))
		got = append(got, fmt.Sprintf("%s requeues=%d", k, q.NumRequeues("a")))
	}
	want := []string{"a requeues=1", "a requeues=2", "a requeues=3", "a requeues=0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("syncs (-want +got):\n%s", d)
	}
}

func TestWorkersRunConcurrently(t *testing.T) {
	const workers = 3
	inFlight := make(chan string, workers)
	release := make(chan struct{})
	q := NewQueue("test", func(_ context.Context, key string) error {
		inFlight <- key
		<-release
		return nil
	}, Options[string]{Workers: workers})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	for i := range workers {
		q.Add(fmt.Sprint(i))
	}
	seen := map[string]bool{}
	for range workers {
		select {
		case k := <-inFlight:
			seen[k] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d syncs in flight at once", len(seen), workers)
		}
	}
	// Run returns only after the syncs in flight have returned.
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while syncs were in flight")
	default:
	}
	close(release)
	<-done
	if !q.ShuttingDown() {
		t.Error("queue not shut down after Run")
	}
}

func TestRunCacheSync(t *testing.T) {
	t.Run("caches that never sync are an error", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		q := NewQueue("test", func(context.Context, string) error { return nil }, Options[string]{})
		loopRan := false
		err := Run(ctx, "example", []cache.InformerSynced{func() bool { return false }}, q,
			LoopFunc(func(context.Context) { loopRan = true }))
		if err == nil || !strings.Contains(err.Error(), "example: caches did not sync") {
			t.Errorf("Run = %v, want a cache sync error", err)
		}
		if loopRan {
			t.Error("a loop ran although the caches did not sync")
		}
		if !q.ShuttingDown() {
			t.Error("queue not shut down")
		}
	})
	t.Run("synced caches run every runner until ctx is done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r := newRecorder(nil)
		q := NewQueue("test", r.sync, Options[string]{})
		loopDone := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- Run(ctx, "example", []cache.InformerSynced{func() bool { return true }}, q,
				LoopFunc(func(ctx context.Context) { <-ctx.Done(); close(loopDone) }))
		}()
		q.Add("a")
		if got := r.next(t); got != "a" {
			t.Fatalf("synced %q, want a", got)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil after ctx is done", err)
		}
		select {
		case <-loopDone:
		default:
			t.Error("Run returned before its loop")
		}
	})
}
