package memtrim

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, max uint64
		want      int
	}{
		{live: 100 * mib, max: 512 * mib, want: 100},
		{live: 512 * mib, max: 512 * mib, want: 100},
		{live: 1024 * mib, max: 512 * mib, want: 50},
		{live: 1500 * mib, max: 512 * mib, want: 30}, // 34 rounded down to a multiple of 5
		{live: 2800 * mib, max: 512 * mib, want: 25}, // a quarter of live is more than max
		{live: 64 << 30, max: 512 * mib, want: 25},
	} {
		if got := percentFor(tc.live, tc.max); got != tc.want {
			t.Errorf("percentFor(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.max/mib, got, tc.want)
		}
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// waitGOGC collects until the cap has set GOGC to want.
func waitGOGC(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d (live heap %d MiB)", gogc(), want, liveHeap()>>20)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCapHeadroom: with 96 MiB live and a cap of 8 MiB, the next
// collections run at GOGC=25; once the memory is free again, at 100.
func TestCapHeadroom(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop, ok := CapHeadroom(8 << 20)
	if !ok {
		t.Fatal("CapHeadroom did not start")
	}
	defer stop()
	live := make([][]byte, 96)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	waitGOGC(t, minPercent)
	runtime.KeepAlive(live)
	live = nil
	waitGOGC(t, 100)
}

// TestCapHeadroomLeavesUsersGOGC: a GOGC set by the user is kept.
func TestCapHeadroomLeavesUsersGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	if _, ok := CapHeadroom(8 << 20); ok {
		t.Error("CapHeadroom started although GOGC is set")
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "4GiB")
	if _, ok := CapHeadroom(8 << 20); ok {
		t.Error("CapHeadroom started although GOMEMLIMIT is set")
	}
}

func heapReleased() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestReturnIfSmall: 64 MiB freed by the program go back to the system at
// once while the live heap is small, and not at all above the threshold.
func TestReturnIfSmall(t *testing.T) {
	garbage := func() {
		b := make([][]byte, 64)
		for i := range b {
			b[i] = make([]byte, 1<<20)
		}
		runtime.KeepAlive(b)
	}
	garbage()
	runtime.GC()
	if returnIfSmall(1) {
		t.Fatal("returned with a live heap over the threshold")
	}
	garbage()
	runtime.GC()
	before := heapReleased()
	if !returnIfSmall(1 << 40) {
		t.Fatal("did not return with a small live heap")
	}
	if got := int64(heapReleased()) - int64(before); got < 32<<20 {
		t.Errorf("released %d MiB more, want at least 32 of the 64 freed", got>>20)
	}
}

func TestIdle(t *testing.T) {
	for _, tc := range []struct {
		cpu  time.Duration
		want bool
	}{
		{cpu: time.Second, want: true},       // an idle server: 1.6 % of a core
		{cpu: 14 * time.Second, want: true},  // under 5 %
		{cpu: 15 * time.Second, want: false}, // 5 %
		{cpu: 4 * time.Minute, want: false},  // busy
		{cpu: -time.Second, want: false},     // a clock that went back
	} {
		if got := idle(tc.cpu, 5*time.Minute); got != tc.want {
			t.Errorf("idle(%v of 5m) = %v, want %v", tc.cpu, got, tc.want)
		}
	}
	if cpuTime() <= 0 {
		t.Error("cpuTime is not positive")
	}
}
