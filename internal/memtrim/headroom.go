package memtrim

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The heap's headroom, bounded.
//
// Go's collector lets the heap grow to twice what was live after the last
// collection (GOGC=100) before it collects again, and the process's RSS
// follows the peak. For a small heap that headroom is cheap; for a server
// holding a large cluster's objects it is not: with 150,000 pods, 2.7 GB
// live meant up to 5.5 GB of heap. Beyond a threshold the headroom is
// therefore capped: GOGC=100 while the live heap is at most max, then a
// headroom of max, or a quarter of the live heap once that is larger
// (GOGC never below 25). The cost is CPU: more collections for the same
// allocations (bench/README.md measures it at scale). A GOGC or GOMEMLIMIT
// set in the environment is the user's choice and turns this off.

// minPercent is the lowest GOGC the cap sets: a quarter of the live heap.
const minPercent = 25

// CapHeadroom keeps the heap's headroom after each collection at most max
// bytes (or a quarter of the live heap, if larger), until stop is called.
// It does nothing, and returns false, when the environment sets GOGC or
// GOMEMLIMIT.
func CapHeadroom(max uint64) (stop func(), ok bool) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}, false
	}
	c := &headroomCap{max: max, percent: 100}
	c.arm()
	return c.stop, true
}

type headroomCap struct {
	max uint64

	mu      sync.Mutex
	stopped bool
	percent int // the GOGC last set
}

// sentinel is a heap object that only the next collection frees: its
// cleanup is how the cap learns that a collection has run.
type sentinel struct{ _ [32]byte }

func (c *headroomCap) arm() {
	runtime.AddCleanup(&sentinel{}, (*headroomCap).afterGC, c)
}

// afterGC sets GOGC for the live heap the last collection found, and
// waits for the next collection.
func (c *headroomCap) afterGC() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	if p := percentFor(liveHeap(), c.max); p != c.percent {
		debug.SetGCPercent(p)
		c.percent = p
	}
	c.arm()
}

func (c *headroomCap) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		debug.SetGCPercent(100)
	}
}

// percentFor is the GOGC that gives a heap of live bytes a headroom of at
// most max bytes, or a quarter of live if that is larger. Values within a
// few percent of each other are rounded together so that GOGC does not
// change at every collection.
func percentFor(live, max uint64) int {
	if live <= max {
		return 100
	}
	p := int(max * 100 / live)
	if p < minPercent {
		return minPercent
	}
	return p - p%5
}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
