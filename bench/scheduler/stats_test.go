package scheduler_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestPercentile(t *testing.T) {
	ten := make([]time.Duration, 10)
	for i := range ten {
		ten[i] = time.Duration(10-i) * time.Millisecond
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5 * time.Millisecond}, {90, 9 * time.Millisecond}, {99, 10 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ten, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}

func hist(count uint64, buckets map[float64]uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: &count}
	for _, ub := range []float64{0.001, 0.002, 0.004} {
		ub, c := ub, buckets[ub]
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &ub, CumulativeCount: &c})
	}
	return h
}

func TestHistQuantile(t *testing.T) {
	before := hist(10, map[float64]uint64{0.001: 10, 0.002: 10, 0.004: 10})
	// 100 new observations: 50 below 1 ms, 40 in (1, 2] ms, 10 in (2, 4] ms.
	after := hist(110, map[float64]uint64{0.001: 60, 0.002: 100, 0.004: 110})
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Millisecond}, {0.7, 1500 * time.Microsecond}, {0.95, 3 * time.Millisecond}} {
		if got := histQuantile(before, after, tc.q); got != tc.want {
			t.Errorf("histQuantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

func TestWorkloadsBuildValidPods(t *testing.T) {
	for _, w := range workloads(1) {
		for _, p := range []interface{ GetName() string }{w.initPod(0), w.measuredPod(0)} {
			if p.GetName() == "" {
				t.Errorf("%s: pod without a name", w.name)
			}
		}
		if w.nodes < 1 || w.measuredPods < 1 {
			t.Errorf("%s: empty workload", w.name)
		}
	}
}
