package kubelet

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

// EvictionGCFlags are the kubelet's eviction and garbage collection flags,
// shared by `skiff agent` and `skiff server` (upstream's names and
// defaults, but for --eviction-hard: see eviction.DefaultHard).
type EvictionGCFlags struct {
	EvictionHard                     string
	EvictionSoft                     string
	EvictionSoftGracePeriod          string
	EvictionMinimumReclaim           string
	EvictionPressureTransitionPeriod time.Duration
	EvictionMaxPodGracePeriod        int
	ImageGCHighThreshold             int
	ImageGCLowThreshold              int
	MinimumImageTTLDuration          time.Duration
	ImageMaximumGCAge                time.Duration
}

// DefaultEvictionGCFlags are the defaults.
func DefaultEvictionGCFlags() EvictionGCFlags {
	return EvictionGCFlags{
		EvictionHard:                     eviction.DefaultHard,
		EvictionPressureTransitionPeriod: eviction.DefaultPressureTransitionPeriod,
		ImageGCHighThreshold:             DefaultImageGCHighThresholdPercent,
		ImageGCLowThreshold:              DefaultImageGCLowThresholdPercent,
		MinimumImageTTLDuration:          DefaultImageMinimumGCAge,
	}
}

// AddFlags registers the flags on fs.
func (f *EvictionGCFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.EvictionHard, "eviction-hard", f.EvictionHard, "hard eviction thresholds, signal<value[,...]: signals memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available; values a quantity or a percentage; an empty value turns hard eviction off")
	fs.StringVar(&f.EvictionSoft, "eviction-soft", f.EvictionSoft, "soft eviction thresholds (as --eviction-hard), each acted on after its --eviction-soft-grace-period")
	fs.StringVar(&f.EvictionSoftGracePeriod, "eviction-soft-grace-period", f.EvictionSoftGracePeriod, "grace periods of the soft thresholds, signal=duration[,...], e.g. memory.available=1m30s")
	fs.StringVar(&f.EvictionMinimumReclaim, "eviction-minimum-reclaim", f.EvictionMinimumReclaim, "minimum reclaims, signal=value[,...] (e.g. imagefs.available=2Gi): a threshold acted on stays met until its value plus this much is available")
	fs.DurationVar(&f.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", f.EvictionPressureTransitionPeriod, "how long a pressure condition stays true after its threshold was last met")
	fs.IntVar(&f.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", f.EvictionMaxPodGracePeriod, "most seconds of grace a pod evicted for a soft threshold gets (0: its own terminationGracePeriodSeconds)")
	fs.IntVar(&f.ImageGCHighThreshold, "image-gc-high-threshold", f.ImageGCHighThreshold, "image filesystem usage percent at which unused images are removed (100 turns image GC off)")
	fs.IntVar(&f.ImageGCLowThreshold, "image-gc-low-threshold", f.ImageGCLowThreshold, "image filesystem usage percent image GC frees down to")
	fs.DurationVar(&f.MinimumImageTTLDuration, "minimum-image-ttl-duration", f.MinimumImageTTLDuration, "minimum age of an unused image before it is garbage collected")
	fs.DurationVar(&f.ImageMaximumGCAge, "image-maximum-gc-age", f.ImageMaximumGCAge, "an image unused this long is removed whatever the disk usage (0: never)")
}

// Apply validates the flags into the kubelet's options.
func (f EvictionGCFlags) Apply(o *Options) error {
	var errs []error
	thresholds, err := eviction.Parse(f.EvictionHard, f.EvictionSoft, f.EvictionSoftGracePeriod)
	if err != nil {
		errs = append(errs, err)
	}
	if thresholds == nil {
		thresholds = []eviction.Threshold{} // none, not the defaults
	}
	if err := eviction.SetMinimumReclaim(thresholds, f.EvictionMinimumReclaim); err != nil {
		errs = append(errs, err)
	}
	if f.EvictionPressureTransitionPeriod < 0 {
		errs = append(errs, errors.New("--eviction-pressure-transition-period must not be negative"))
	}
	if f.EvictionMaxPodGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--eviction-max-pod-grace-period must not be negative, got %d", f.EvictionMaxPodGracePeriod))
	}
	gc := GCOptions{
		ImageHighThresholdPercent: f.ImageGCHighThreshold,
		ImageLowThresholdPercent:  f.ImageGCLowThreshold,
		ImageMinimumAge:           f.MinimumImageTTLDuration,
		ImageMaximumAge:           f.ImageMaximumGCAge,
	}
	if err := gc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.Eviction = eviction.Config{
		Thresholds:               thresholds,
		PressureTransitionPeriod: f.EvictionPressureTransitionPeriod,
		MaxPodGracePeriod:        time.Duration(f.EvictionMaxPodGracePeriod) * time.Second,
	}
	keep := o.GC
	o.GC = gc
	o.GC.ImagePeriod, o.GC.ContainerPeriod, o.GC.MaxPerPodContainer = keep.ImagePeriod, keep.ContainerPeriod, keep.MaxPerPodContainer
	return nil
}
