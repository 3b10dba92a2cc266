package framework

import (
	"context"
	"math"
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
// Workers take the pieces in chunks (about the square root of pieces, as
// upstream's parallelizer), so that they rarely touch the shared counter.
func (p Parallelizer) Until(ctx context.Context, pieces int, fn func(i int)) {
	if pieces <= 0 {
		return
	}
	done := ctx.Done()
	stopped := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	workers := min(max(p.workers, 1), pieces)
	if workers == 1 {
		for i := 0; i < pieces && !stopped(); i++ {
			fn(i)
		}
		return
	}
	chunk := chunkSize(pieces, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				start := int(next.Add(int64(chunk))) - chunk
				if start >= pieces {
					return
				}
				for i := start; i < min(start+chunk, pieces); i++ {
					if stopped() {
						return
					}
					fn(i)
				}
			}
		}()
	}
	wg.Wait()
}

// chunkSize is the square root of pieces, at most pieces/workers+1 so that
// every worker gets some, and at least 1.
func chunkSize(pieces, workers int) int {
	s := int(math.Sqrt(float64(pieces)))
	return max(min(s, pieces/workers+1), 1)
}
