// Package backoff is the crash-loop back-off of restarted containers, as
// upstream's kubelet applies it: the first restart after an exit waits 10 s,
// each further one twice as long up to 5 min; a container whose last exit
// is more than twice the maximum (10 min) after the previous one starts
// again from 10 s. Time comes from an injected clock.
package backoff

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Upstream's defaults.
const (
	DefaultInitial = 10 * time.Second
	DefaultMax     = 300 * time.Second
)

// Backoff tracks one delay per key (pod UID, container name and spec hash).
// It is safe for concurrent use.
type Backoff struct {
	clock   clock.Clock
	initial time.Duration
	max     time.Duration

	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// New returns a Backoff with the given initial and maximum delays (zero
// means upstream's defaults).
func New(c clock.Clock, initial, max time.Duration) *Backoff {
	if initial <= 0 {
		initial = DefaultInitial
	}
	if max <= 0 {
		max = DefaultMax
	}
	return &Backoff{clock: c, initial: initial, max: max, entries: map[string]*entry{}}
}

func (b *Backoff) expired(at, last time.Time) bool {
	return at.Sub(last) > 2*b.max
}

// InBackoff reports whether a container that exited at finishedAt must
// still wait before its next start, and the current delay.
func (b *Backoff) InBackoff(key string, finishedAt time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, 0
	}
	now := b.clock.Now()
	if b.expired(now, e.lastUpdate) {
		return false, 0
	}
	return now.Sub(finishedAt) < e.delay, e.delay
}

// Next records a restart of the container that exited at finishedAt: the
// first one (or one after a long run) gets the initial delay, each further
// one doubles it up to the maximum.
func (b *Backoff) Next(key string, finishedAt time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(finishedAt, e.lastUpdate) {
		e = &entry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = finishedAt
	return e.delay
}

// Delay returns the current delay of key (0 when it has none).
func (b *Backoff) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// GC forgets the entries not updated for twice the maximum delay.
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if b.expired(now, e.lastUpdate) {
			delete(b.entries, k)
		}
	}
}

// Forget drops every entry whose key starts with prefix (a deleted pod).
func (b *Backoff) Forget(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(b.entries, k)
		}
	}
}

// InBackoffSinceUpdate reports whether less than the current delay has
// passed since the last Next (upstream's image pull back-off).
func (b *Backoff) InBackoffSinceUpdate(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false
	}
	now := b.clock.Now()
	if b.expired(now, e.lastUpdate) {
		return false
	}
	return now.Sub(e.lastUpdate) < e.delay
}
