// Package worker runs a controller's work queue: the loop every
// sample-controller-shaped controller needs, written once.
//
// A controller builds one Queue per kind of key with its sync function,
// lets its informer handlers Add keys, and from Start calls Run with the
// informers it reads and its queues. Run waits for the caches (an error if
// they do not sync), runs each queue's workers until ctx is done, then shuts
// the queues down and waits for the syncs in flight.
//
// A sync's result decides what happens to its key:
//   - nil: the key's failures are forgotten;
//   - an error wrapping RequeueAfter(d): the failures are forgotten and the
//     key comes back after d (not a failure: a check that is due later);
//   - any other error: the key is retried with the queue's rate limit
//     (client-go's default: 5 ms doubling per failure to 1,000 s, and
//     10 retries a second overall).
package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SyncFunc brings the state of one key to what it should be. It must be
// idempotent: a key may be synced again at any time.
type SyncFunc[K comparable] func(ctx context.Context, key K) error

// Options tune a Queue; the zero value means the defaults.
type Options[K comparable] struct {
	// Workers is how many keys are synced at once (default 1). One key is
	// never synced by two workers at the same time.
	Workers int
	// Clock drives delayed adds (RequeueAfter, rate-limited retries);
	// nil means the real clock.
	Clock clock.WithTicker
	// RateLimiter spaces the retries of failing keys; nil means
	// client-go's DefaultTypedControllerRateLimiter.
	RateLimiter workqueue.TypedRateLimiter[K]
}

// Queue is a rate-limiting work queue with the sync that drains it. The
// embedded interface is there for the informer handlers (Add, AddAfter,
// Len); draining is Run's job.
type Queue[K comparable] struct {
	workqueue.TypedRateLimitingInterface[K]
	name    string
	sync    SyncFunc[K]
	workers int
}

// NewQueue builds a queue named name (the `name` label of the workqueue
// metrics and the prefix of its log lines) drained by sync.
func NewQueue[K comparable](name string, sync SyncFunc[K], opts Options[K]) *Queue[K] {
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[K]()
	}
	return &Queue[K]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[K]{Name: name, Clock: opts.Clock}),
		name:    name,
		sync:    sync,
		workers: opts.Workers,
	}
}

// Name is the queue's name.
func (q *Queue[K]) Name() string { return q.name }

// Workers is how many keys Run syncs at once.
func (q *Queue[K]) Workers() int { return q.workers }

// Run syncs keys on the queue's workers until ctx is done, then shuts the
// queue down and returns once every sync in flight has returned.
func (q *Queue[K]) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range q.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer utilruntime.HandleCrashWithContext(ctx)
			for q.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// processNext syncs one key; false once the queue is shut down.
func (q *Queue[K]) processNext(ctx context.Context) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := q.sync(ctx, key)
	var later *requeueError
	switch {
	case err == nil:
		q.Forget(key)
	case errors.As(err, &later):
		klog.FromContext(ctx).V(4).Info("Sync asked to be requeued", "queue", q.name, "key", key, "after", later.after, "reason", err)
		q.Forget(key)
		q.AddAfter(key, later.after)
	case apierrors.IsConflict(err):
		klog.FromContext(ctx).V(2).Info("Sync hit a conflict, retrying", "queue", q.name, "key", key, "err", err)
		q.AddRateLimited(key)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, retrying", "queue", q.name, "key", key)
		q.AddRateLimited(key)
	}
	return true
}

// RequeueAfter is what a sync returns (alone or wrapped) when the key must
// be looked at again after d although nothing failed: a deadline that is
// not yet due, content that is still going away. The key's failure count
// is reset.
func RequeueAfter(d time.Duration) error { return &requeueError{after: d} }

// RequeueDelay reports whether err asks for a requeue (RequeueAfter,
// possibly wrapped) and after how long; for tests of sync functions.
func RequeueDelay(err error) (time.Duration, bool) {
	var later *requeueError
	if errors.As(err, &later) {
		return later.after, true
	}
	return 0, false
}

type requeueError struct{ after time.Duration }

func (e *requeueError) Error() string { return fmt.Sprintf("requeue after %s", e.after) }

// Runner is one thing a controller runs once its caches have synced: a
// Queue, or a periodic loop (LoopFunc).
type Runner interface {
	// Run blocks until ctx is done.
	Run(ctx context.Context)
	// ShutDown releases what the runner holds when Run is never called
	// (the caches did not sync).
	ShutDown()
}

var _ Runner = (*Queue[string])(nil)

// LoopFunc adapts a loop that returns once ctx is done (a ticker) to Runner.
type LoopFunc func(ctx context.Context)

// Run calls f.
func (f LoopFunc) Run(ctx context.Context) { f(ctx) }

// ShutDown does nothing: a loop holds nothing until it runs.
func (f LoopFunc) ShutDown() {}

// Run is a controller's Start: it waits until every informer in synced has
// synced, then runs the runners until ctx is done and returns once all of
// them have. It returns an error when the caches do not sync (also when ctx
// ends first; the manager ignores errors after it stopped a controller).
// name prefixes the error and the log lines.
func Run(ctx context.Context, name string, synced []cache.InformerSynced, runners ...Runner) error {
	if !cache.WaitForNamedCacheSync(name, ctx.Done(), synced...) {
		for _, r := range runners {
			r.ShutDown()
		}
		return fmt.Errorf("%s: caches did not sync", name)
	}
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer utilruntime.HandleCrashWithContext(ctx)
			r.Run(ctx)
		}()
	}
	wg.Wait()
	return nil
}
