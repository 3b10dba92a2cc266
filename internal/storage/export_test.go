package storage

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"
)

// BreakWatch ends the cache's etcd watch, as a network blip or an etcd
// restart would.
func (c *Cacher) BreakWatch() {
	c.mu.Lock()
	cancel := c.cancelWatch
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// SetAfterWatchBreak makes the cache call f once its etcd watch has broken,
// before it recovers.
func (c *Cacher) SetAfterWatchBreak(f func()) {
	c.mu.Lock()
	c.testAfterWatchBreak = f
	c.mu.Unlock()
}

// ApplyEvent feeds the cache one etcd event, as its watch would.
func (c *Cacher) ApplyEvent(ev *clientv3.Event) { c.apply(klog.Background(), ev) }

// NewRequestTooLargeForTest is the error a write over etcd's limit gets.
func NewRequestTooLargeForTest() error { return &Error{Code: ErrCodeRequestTooLarge, Msg: "too large"} }

// Held is how many objects and past events the cache keeps in memory.
func (c *Cacher) Held() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.items) + c.history.len()
}

// UncachedStream is the context whose metadata names the gRPC stream of
// uncached watches (for progress requests on it).
func UncachedStream(ctx context.Context) context.Context { return uncachedStream(ctx) }

// SetSlowWatcherGrace shortens how long a full uncached watcher may take
// no event, for the test's duration.
func SetSlowWatcherGrace(t interface{ Cleanup(func()) }, d time.Duration) {
	old := slowWatcherGrace
	slowWatcherGrace = d
	t.Cleanup(func() { slowWatcherGrace = old })
}
