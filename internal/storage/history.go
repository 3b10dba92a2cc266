package storage

import (
	"sort"
	"time"
)

// history is the watch cache's window of past events, oldest first, in
// revision order. It grows and shrinks with the traffic instead of holding
// a fixed ring: the Cacher decides what to keep (push).
type history struct {
	events []*CacheEvent
	times  []time.Time
	head   int // events[head:] are live
}

func (h *history) len() int { return len(h.events) - h.head }

func (h *history) push(e *CacheEvent, at time.Time) {
	h.events = append(h.events, e)
	h.times = append(h.times, at)
}

func (h *history) oldestTime() time.Time { return h.times[h.head] }

// pop drops and returns the oldest event.
func (h *history) pop() *CacheEvent {
	e := h.events[h.head]
	h.events[h.head] = nil
	h.head++
	// Move the live part down once the dead prefix is the larger half, so
	// the backing array does not grow without bound.
	if h.head > 64 && h.head*2 > len(h.events) {
		n := copy(h.events, h.events[h.head:])
		copy(h.times, h.times[h.head:])
		clear(h.events[n:])
		h.events, h.times = h.events[:n], h.times[:n]
		h.head = 0
	}
	return e
}

func (h *history) reset() { *h = history{} }

// after returns the events with a revision above rev, oldest first. The
// slice is a copy: the caller may keep it.
func (h *history) after(rev int64) []*CacheEvent {
	live := h.events[h.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].RV > rev })
	return append([]*CacheEvent(nil), live[i:]...)
}
