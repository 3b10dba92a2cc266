package framework_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func TestParallelizerUntil(t *testing.T) {
	for _, tc := range []struct {
		name            string
		workers, pieces int
	}{
		{"one worker", 1, 10},
		{"fewer pieces than workers", 16, 3},
		{"chunks do not divide pieces", 4, 101},
		{"many pieces", 16, 5000},
		{"no pieces", 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[int]int{}
			framework.NewParallelizer(tc.workers).Until(context.Background(), tc.pieces, func(i int) {
				mu.Lock()
				seen[i]++
				mu.Unlock()
			})
			want := map[int]int{}
			for i := range tc.pieces {
				want[i] = 1
			}
			if diff := cmp.Diff(want, seen); diff != "" {
				t.Errorf("pieces run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParallelizerUntilStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ran atomic.Int32
	framework.NewParallelizer(4).Until(ctx, 10000, func(int) {
		if ran.Add(1) == 10 {
			cancel()
		}
	})
	// Each of the 4 workers may finish the piece it had started.
	if n := ran.Load(); n > 10+4 {
		t.Errorf("%d pieces ran after cancel at the 10th", n)
	}
}

func TestCycleStateSkipAndSampling(t *testing.T) {
	cs := framework.NewCycleState()
	cs.SetSkipFilter(map[string]bool{"A": true})
	cs.SetSkipScore(map[string]bool{"B": true})
	cs.SetRecordPluginMetrics(true)
	clone := cs.Clone()
	got := []bool{clone.SkipFilter("A"), clone.SkipFilter("B"), clone.SkipScore("B"), clone.SkipScore("A"), clone.ShouldRecordPluginMetrics()}
	if diff := cmp.Diff([]bool{true, false, true, false, true}, got); diff != "" {
		t.Errorf("clone (-want +got):\n%s", diff)
	}
	empty := framework.NewCycleState()
	if empty.SkipFilter("A") || empty.SkipScore("A") || empty.ShouldRecordPluginMetrics() {
		t.Errorf("a new state skips or samples")
	}
}
