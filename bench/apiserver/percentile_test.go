package apiserver_test

import (
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ten := func() []time.Duration {
		out := make([]time.Duration, 10)
		for i := range out {
			out[i] = time.Duration(10-i) * time.Millisecond // unsorted
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"median of ten", ten(), 50, 5 * time.Millisecond},
		{"p90 of ten", ten(), 90, 9 * time.Millisecond},
		{"p99 of ten is the max", ten(), 99, 10 * time.Millisecond},
		{"p0 is the min", ten(), 0, 1 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestRunConcurrent(t *testing.T) {
	t.Run("every op once", func(t *testing.T) {
		seen := make([]int, 100)
		var perWorker [4]int
		r, err := runConcurrent(4, len(seen), func(w, i int) error {
			seen[i]++ // each i is handed out once, so no two goroutines share a slot
			perWorker[w]++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("op %d ran %d times", i, n)
			}
		}
		if r.ops != 100 || len(r.latencies) != 100 {
			t.Errorf("ops %d, latencies %d; want 100 and 100", r.ops, len(r.latencies))
		}
		if sum := perWorker[0] + perWorker[1] + perWorker[2] + perWorker[3]; sum != 100 {
			t.Errorf("workers ran %d ops, want 100", sum)
		}
	})
	t.Run("first error stops the run", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := runConcurrent(2, 1000, func(_, i int) error {
			if i == 3 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("err = %v, want %v", err, boom)
		}
	})
}
