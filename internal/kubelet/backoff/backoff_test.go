package backoff

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestCrashLoopDelays(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	b := New(clk, 0, 0)
	const key = "uid/c/hash"

	// The container exits at once each time it is started. As upstream, a
	// restart waits for the delay recorded by the previous one: the first
	// restart is immediate, then 10 s, 20 s, ... up to 5 min.
	var got []time.Duration
	for range 9 {
		exited := clk.Now()
		in, d := b.InBackoff(key, exited)
		if in {
			clk.Step(d - time.Second)
			if in, _ := b.InBackoff(key, exited); !in {
				t.Fatalf("restart %d: not in back-off 1 s before the delay %v ends", len(got)+1, d)
			}
			clk.Step(time.Second)
			if in, _ := b.InBackoff(key, exited); in {
				t.Fatalf("restart %d: still in back-off when the delay %v ended", len(got)+1, d)
			}
		}
		got = append(got, clk.Now().Sub(exited))
		b.Next(key, exited)
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("restart %d: waited %v, want %v", i+1, got[i], want[i])
		}
	}

	// A container that then runs for more than 10 min starts over at 10 s.
	clk.Step(10*time.Minute + time.Second)
	if in, _ := b.InBackoff(key, clk.Now()); in {
		t.Errorf("an exit after a 10 min run is backed off")
	}
	if d := b.Next(key, clk.Now()); d != 10*time.Second {
		t.Errorf("after a 10 min run: delay %v, want 10s", d)
	}
}

func TestForgetAndGC(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := New(clk, time.Second, 4*time.Second)
	b.Next("pod1/a", clk.Now())
	b.Next("pod2/a", clk.Now())
	b.Forget("pod1/")
	if b.Delay("pod1/a") != 0 || b.Delay("pod2/a") != time.Second {
		t.Fatalf("Forget dropped the wrong entries")
	}
	clk.Step(9 * time.Second)
	b.GC()
	if b.Delay("pod2/a") != 0 {
		t.Fatalf("GC kept an entry idle for more than twice the maximum")
	}
}
