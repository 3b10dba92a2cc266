package gc

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return t0.Add(-d) }

func ids[T any](items []T, id func(T) string) []string {
	var out []string
	for _, it := range items {
		out = append(out, id(it))
	}
	return out
}

func imageID(i Image) string { return i.ID }

func TestBytesToFree(t *testing.T) {
	for _, tc := range []struct {
		name                string
		capacity, available int64
		high, low           int
		want                int64
		wantUsage           int
	}{
		{name: "below high", capacity: 100, available: 20, high: 85, low: 80, want: 0, wantUsage: 80},
		{name: "at high", capacity: 100, available: 15, high: 85, low: 80, want: 5, wantUsage: 85},
		{name: "full", capacity: 1000, available: 0, high: 85, low: 80, want: 200, wantUsage: 100},
		{name: "no capacity", capacity: 0, available: 0, high: 85, low: 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, usage := BytesToFree(tc.capacity, tc.available, tc.high, tc.low)
			if got != tc.want || usage != tc.wantUsage {
				t.Errorf("BytesToFree = %d, %d%%; want %d, %d%%", got, usage, tc.want, tc.wantUsage)
			}
		})
	}
}

func TestToFree(t *testing.T) {
	images := []Image{
		{ID: "in-use", Size: 100, InUse: true, FirstSeen: ago(time.Hour), LastUsed: t0},
		{ID: "pause", Size: 1, Pinned: true, FirstSeen: ago(time.Hour)},
		{ID: "never-used", Size: 5, FirstSeen: ago(5 * time.Hour)},
		{ID: "old-unused", Size: 30, FirstSeen: ago(3 * time.Hour), LastUsed: ago(2 * time.Hour)},
		{ID: "newer-unused", Size: 40, FirstSeen: ago(3 * time.Hour), LastUsed: ago(time.Hour)},
		{ID: "same-use-seen-first", Size: 10, FirstSeen: ago(4 * time.Hour), LastUsed: ago(time.Hour)},
		{ID: "just-pulled", Size: 500, FirstSeen: ago(time.Minute), LastUsed: ago(time.Minute)},
	}
	for _, tc := range []struct {
		name      string
		bytes     int64
		minAge    time.Duration
		want      []string
		wantFreed int64
	}{
		{name: "oldest last use first, until enough", bytes: 35, minAge: 2 * time.Minute,
			want: []string{"never-used", "old-unused"}, wantFreed: 35},
		{name: "all eligible", bytes: -1, minAge: 2 * time.Minute,
			want: []string{"never-used", "old-unused", "same-use-seen-first", "newer-unused"}, wantFreed: 85},
		{name: "min age 0 lets the new one go", bytes: -1,
			want: []string{"never-used", "old-unused", "same-use-seen-first", "newer-unused", "just-pulled"}, wantFreed: 585},
		{name: "nothing to free", bytes: 0, minAge: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, freed := ToFree(images, tc.bytes, t0, tc.minAge)
			if diff := cmp.Diff(tc.want, ids(got, imageID)); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			if freed != tc.wantFreed {
				t.Errorf("freed = %d, want %d", freed, tc.wantFreed)
			}
		})
	}
	if got := ids(TooOld(images, t0, 2*time.Minute, 90*time.Minute), imageID); !cmp.Equal(got, []string{"never-used", "old-unused"}) {
		t.Errorf("TooOld = %v", got)
	}
	if got := TooOld(images, t0, 0, 0); got != nil {
		t.Errorf("TooOld without a max age = %v", got)
	}
}

func TestDeadContainers(t *testing.T) {
	cs := []Container{
		{ID: "a0", PodUID: "p1", Name: "app", CreatedAt: ago(30 * time.Minute)},
		{ID: "a1", PodUID: "p1", Name: "app", CreatedAt: ago(20 * time.Minute)},
		{ID: "a2", PodUID: "p1", Name: "app", CreatedAt: ago(10 * time.Minute)},
		{ID: "a3", PodUID: "p1", Name: "app", Running: true, CreatedAt: ago(time.Minute)},
		{ID: "init0", PodUID: "p1", Name: "init", CreatedAt: ago(40 * time.Minute)},
		{ID: "b0", PodUID: "gone", Name: "app", CreatedAt: ago(time.Hour)},
		{ID: "fresh0", PodUID: "p2", Name: "app", CreatedAt: ago(2 * time.Minute)},
		{ID: "fresh1", PodUID: "p2", Name: "app", CreatedAt: ago(30 * time.Second)},
	}
	for _, tc := range []struct {
		name   string
		minAge time.Duration
		keep   int
		want   []string
	}{
		{name: "keep the newest dead one per container", keep: 1, want: []string{"b0", "a0", "a1", "fresh0"}},
		{name: "min age protects young ones", minAge: time.Minute, keep: 1, want: []string{"b0", "a0", "a1"}},
		{name: "keep two", keep: 2, want: []string{"b0", "a0"}},
		{name: "unlimited", keep: -1, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DeadContainers(cs, t0, tc.minAge, tc.keep, map[string]bool{"gone": true})
			if diff := cmp.Diff(tc.want, ids(got, func(c Container) string { return c.ID })); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeadSandboxes(t *testing.T) {
	sbs := []Sandbox{
		{ID: "s0", PodUID: "p1", CreatedAt: ago(3 * time.Hour)},
		{ID: "s1", PodUID: "p1", CreatedAt: ago(2 * time.Hour)},
		{ID: "s2", PodUID: "p1", CreatedAt: ago(time.Hour)},
		{ID: "s3", PodUID: "p1", Ready: true, CreatedAt: ago(time.Minute)},
		{ID: "g0", PodUID: "gone", CreatedAt: ago(90 * time.Minute)},
		{ID: "only", PodUID: "p2", CreatedAt: ago(time.Hour)},
	}
	remaining := []Container{{ID: "c", SandboxID: "s1"}}
	got := DeadSandboxes(sbs, remaining, map[string]bool{"gone": true})
	want := []string{"s0", "g0", "s2"}
	if diff := cmp.Diff(want, ids(got, func(s Sandbox) string { return s.ID })); diff != "" {
		t.Errorf("sandboxes (-want +got):\n%s", diff)
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.0 GiB"} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}
