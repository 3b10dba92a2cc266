package apiserver_test

import (
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
