package podstartup

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := percentile(d, 0.5); got != 5 {
		t.Errorf("p50 %v", got)
	}
	if got := percentile(d, 0.99); got != 10 {
		t.Errorf("p99 %v", got)
	}
}
