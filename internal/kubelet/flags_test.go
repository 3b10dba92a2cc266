package kubelet

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

func TestEvictionGCFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(t *testing.T, o Options)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, o Options) {
			if len(o.Eviction.Thresholds) != 2 || o.Eviction.Thresholds[0].String() != "memory.available<100Mi" || o.Eviction.Thresholds[1].String() != "nodefs.available<10%" {
				t.Errorf("thresholds %v", o.Eviction.Thresholds)
			}
			if o.GC.ImageHighThresholdPercent != 85 || o.GC.ImageLowThresholdPercent != 80 || o.GC.ImageMinimumAge != 2*time.Minute {
				t.Errorf("GC %+v", o.GC)
			}
		}},
		{name: "all set", args: []string{"--eviction-hard=memory.available<1Gi,pid.available<10%", "--eviction-soft=memory.available<2Gi",
			"--eviction-soft-grace-period=memory.available=30s", "--eviction-max-pod-grace-period=20", "--image-gc-high-threshold=90",
			"--image-gc-low-threshold=50", "--minimum-image-ttl-duration=1h", "--image-maximum-gc-age=24h"},
			check: func(t *testing.T, o Options) {
				if len(o.Eviction.Thresholds) != 3 || !o.Eviction.Thresholds[2].Soft || o.Eviction.Thresholds[2].GracePeriod != 30*time.Second {
					t.Errorf("thresholds %+v", o.Eviction.Thresholds)
				}
				if o.Eviction.MaxPodGracePeriod != 20*time.Second {
					t.Errorf("max pod grace %v", o.Eviction.MaxPodGracePeriod)
				}
				if o.GC.ImageHighThresholdPercent != 90 || o.GC.ImageLowThresholdPercent != 50 || o.GC.ImageMinimumAge != time.Hour || o.GC.ImageMaximumAge != 24*time.Hour {
					t.Errorf("GC %+v", o.GC)
				}
			}},
		{name: "hard eviction off", args: []string{"--eviction-hard="}, check: func(t *testing.T, o Options) {
			if o.Eviction.Thresholds == nil || len(o.Eviction.Thresholds) != 0 {
				t.Errorf("thresholds %v, want none (not the defaults)", o.Eviction.Thresholds)
			}
		}},
		{name: "minimum reclaim", args: []string{"--eviction-minimum-reclaim=memory.available=500Mi,nodefs.available=5%"}, check: func(t *testing.T, o Options) {
			for _, th := range o.Eviction.Thresholds {
				if th.MinReclaim == nil {
					t.Fatalf("%v has no minimum reclaim", th)
				}
			}
			if got := o.Eviction.Thresholds[0].MinReclaim.Value(0); got != 500<<20 {
				t.Errorf("memory minimum reclaim %d", got)
			}
			if got := o.Eviction.Thresholds[1].MinReclaim.Value(1000); got != 50 {
				t.Errorf("nodefs minimum reclaim %d of 1000", got)
			}
		}},
		{name: "bad minimum reclaim", args: []string{"--eviction-minimum-reclaim=memory.free=1Gi"}, wantErr: "--eviction-minimum-reclaim: unsupported eviction signal memory.free"},
		{name: "low above high", args: []string{"--image-gc-low-threshold=90"}, wantErr: "--image-gc-low-threshold (90) must not exceed --image-gc-high-threshold (85)"},
		{name: "bad threshold", args: []string{"--eviction-hard=memory.available<lots"}, wantErr: "--eviction-hard: memory.available: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultEvictionGCFlags()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			f.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var o Options
			err := f.Apply(&o)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// TestHostStatsObserve reads this machine: memory.available is within
// MemTotal and the root filesystem is seen.
func TestHostStatsObserve(t *testing.T) {
	h := &hostStats{root: t.TempDir(), cgroupRoot: "/sys/fs/cgroup"}
	obs, err := h.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := readMachine("/")
	mem, ok := obs[eviction.SignalMemoryAvailable]
	if !ok || mem.Capacity != m.MemoryBytes || mem.Available <= 0 || mem.Available > mem.Capacity {
		t.Errorf("memory.available %+v, MemTotal %d", mem, m.MemoryBytes)
	}
	for _, s := range []string{"nodefs.available", "nodefs.inodesFree", "imagefs.available", "pid.available"} {
		if o, ok := obs[eviction.Signal(s)]; !ok || o.Capacity <= 0 || o.Available < 0 || o.Available > o.Capacity {
			t.Errorf("%s: %+v", s, o)
		}
	}
}
