package framework

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultParallelism is upstream's default number of workers.
const DefaultParallelism = 16

// Parallelizer runs a function over pieces with a bounded number of
// workers.
type Parallelizer struct {
	workers int
}

// NewParallelizer returns a parallelizer with n workers (at least 1).
func NewParallelizer(n int) Parallelizer {
	return Parallelizer{workers: max(n, 1)}
}

// Until calls fn(i) for i in [0, pieces) on the workers and returns when
// all are done or ctx is cancelled (pieces not started are then skipped).
func (p Parallelizer) Until(ctx context.Context, pieces int, fn func(i int)) {
	if pieces <= 0 {
		return
	}
	workers := min(max(p.workers, 1), pieces)
	if workers == 1 {
		for i := 0; i < pieces && ctx.Err() == nil; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= pieces {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
