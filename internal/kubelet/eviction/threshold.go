// Package eviction is the kubelet's eviction core, as upstream's eviction
// manager: thresholds on node signals (memory.available, nodefs.available,
// imagefs.available, their inodesFree, pid.available) parsed from
// --eviction-hard and --eviction-soft, the state that tracks when each was
// first met (soft grace periods) and when each pressure condition was last
// seen (the transition period), the ranking of pods for eviction and the
// messages the evicted pod and its event carry. It is pure: the kubelet
// observes the node, feeds the observations in with the time, and carries
// out the decision.
package eviction

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal.
type Signal string

// The signals the kubelet observes (upstream's names).
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// Resources reclaimed for the signals that are not API resources.
const (
	ResourceInodes corev1.ResourceName = "inodes"
	ResourcePIDs   corev1.ResourceName = "pids"
)

// DefaultHard is the default --eviction-hard. Upstream's Linux default
// also has nodefs.inodesFree<5%, imagefs.available<15% and
// imagefs.inodesFree<5%; Skiff's default keeps the two thresholds the
// issue names, so a shared disk at 85 % does not put the node under
// pressure.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%"

// DefaultPressureTransitionPeriod is how long a pressure condition stays
// true after its threshold was last met (upstream's
// --eviction-pressure-transition-period).
const DefaultPressureTransitionPeriod = 5 * time.Minute

var signalResource = map[Signal]corev1.ResourceName{
	SignalMemoryAvailable:   corev1.ResourceMemory,
	SignalNodeFsAvailable:   corev1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:  ResourceInodes,
	SignalImageFsAvailable:  corev1.ResourceEphemeralStorage,
	SignalImageFsInodesFree: ResourceInodes,
	SignalPIDAvailable:      ResourcePIDs,
}

var signalCondition = map[Signal]corev1.NodeConditionType{
	SignalMemoryAvailable:   corev1.NodeMemoryPressure,
	SignalNodeFsAvailable:   corev1.NodeDiskPressure,
	SignalNodeFsInodesFree:  corev1.NodeDiskPressure,
	SignalImageFsAvailable:  corev1.NodeDiskPressure,
	SignalImageFsInodesFree: corev1.NodeDiskPressure,
	SignalPIDAvailable:      corev1.NodePIDPressure,
}

// ResourceOf is the resource a signal's threshold reclaims.
func ResourceOf(s Signal) corev1.ResourceName { return signalResource[s] }

// ConditionOf is the node condition a met threshold of the signal sets.
func ConditionOf(s Signal) corev1.NodeConditionType { return signalCondition[s] }

// Threshold is one "<signal><<value>" statement. The value is a quantity
// or a percentage of the signal's capacity. A threshold with a grace
// period is soft: it must hold that long before pods are evicted, and
// they are then stopped with their own grace period (at most
// MaxPodGracePeriod); a hard one evicts at once with 1 s of grace.
type Threshold struct {
	Signal     Signal
	Quantity   *resource.Quantity
	Percentage float64 // 0..1
	// GracePeriod is the soft threshold's grace period.
	GracePeriod time.Duration
	// Soft marks a --eviction-soft threshold.
	Soft bool
	// MinReclaim (--eviction-minimum-reclaim) is how much more than the
	// threshold must be available before a threshold that was acted on
	// counts as resolved; nil is none.
	MinReclaim *Amount
}

// Amount is a quantity or a percentage (0..1) of a signal's capacity.
type Amount struct {
	Quantity   *resource.Quantity
	Percentage float64
}

// Value is the amount for a signal of the given capacity.
func (a Amount) Value(capacity int64) int64 {
	if a.Quantity != nil {
		return a.Quantity.Value()
	}
	return int64(float64(capacity) * a.Percentage)
}

// Value is the threshold's amount for a signal of the given capacity.
func (t Threshold) Value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(float64(capacity) * t.Percentage)
}

// String is the statement as given: "memory.available<100Mi".
func (t Threshold) String() string {
	if t.Quantity != nil {
		return string(t.Signal) + "<" + t.Quantity.String()
	}
	return string(t.Signal) + "<" + strconv.FormatFloat(t.Percentage*100, 'f', -1, 64) + "%"
}

// key identifies a threshold in the state maps.
func (t Threshold) key() string {
	kind := "hard"
	if t.Soft {
		kind = "soft"
	}
	return kind + ":" + t.String()
}

// Config is the parsed eviction configuration.
type Config struct {
	Thresholds []Threshold
	// PressureTransitionPeriod (default 5 min).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod bounds the grace of soft evictions (0: the pod's
	// own).
	MaxPodGracePeriod time.Duration
}

// Parse reads --eviction-hard, --eviction-soft and
// --eviction-soft-grace-period (comma-separated "signal<value" and
// "signal=duration" lists). Every soft threshold needs a grace period, as
// upstream. "0%" and "100%" thresholds are ignored, as upstream.
func Parse(hard, soft, softGrace string) ([]Threshold, error) {
	var out []Threshold
	hs, err := parseStatements(hard)
	if err != nil {
		return nil, fmt.Errorf("--eviction-hard: %w", err)
	}
	out = append(out, hs...)
	ss, err := parseStatements(soft)
	if err != nil {
		return nil, fmt.Errorf("--eviction-soft: %w", err)
	}
	graces := map[Signal]time.Duration{}
	for _, item := range splitList(softGrace) {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("--eviction-soft-grace-period: %q is not signal=duration", item)
		}
		sig := Signal(strings.TrimSpace(name))
		if _, known := signalResource[sig]; !known {
			return nil, fmt.Errorf("--eviction-soft-grace-period: unsupported eviction signal %v", sig)
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("--eviction-soft-grace-period: %w", err)
		}
		if d < 0 {
			return nil, fmt.Errorf("--eviction-soft-grace-period: invalid eviction grace period specified: %v, must be a positive value", val)
		}
		graces[sig] = d
	}
	for _, t := range ss {
		d, ok := graces[t.Signal]
		if !ok {
			return nil, fmt.Errorf("--eviction-soft: threshold %v requires a grace period (--eviction-soft-grace-period)", t.Signal)
		}
		t.Soft, t.GracePeriod = true, d
		out = append(out, t)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func parseStatements(s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[Signal]bool{}
	for _, item := range splitList(s) {
		name, val, ok := strings.Cut(item, "<")
		if !ok {
			return nil, fmt.Errorf("%q is not signal<value", item)
		}
		sig := Signal(strings.TrimSpace(name))
		val = strings.TrimSpace(val)
		if _, known := signalResource[sig]; !known {
			return nil, fmt.Errorf("unsupported eviction signal %v", sig)
		}
		if seen[sig] {
			return nil, fmt.Errorf("signal %v given twice", sig)
		}
		seen[sig] = true
		if strings.HasSuffix(val, "%") {
			if val == "0%" || val == "100%" {
				continue
			}
			p, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil {
				return nil, fmt.Errorf("%v: %w", sig, err)
			}
			if p < 0 || p > 100 {
				return nil, fmt.Errorf("eviction percentage threshold %v must be between 0%% and 100%%: %s", sig, val)
			}
			out = append(out, Threshold{Signal: sig, Percentage: p / 100})
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", sig, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("eviction threshold %v must be positive: %s", sig, q.String())
		}
		out = append(out, Threshold{Signal: sig, Quantity: &q})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Signal < out[j].Signal })
	return out, nil
}

// SetMinimumReclaim reads --eviction-minimum-reclaim (comma-separated
// "signal=value", the value a quantity or a percentage) into the
// thresholds of those signals, hard and soft, as upstream. A signal
// without a threshold is accepted and has no effect.
func SetMinimumReclaim(thresholds []Threshold, s string) error {
	amounts := map[Signal]Amount{}
	for _, item := range splitList(s) {
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return fmt.Errorf("--eviction-minimum-reclaim: %q is not signal=value", item)
		}
		sig := Signal(strings.TrimSpace(name))
		val = strings.TrimSpace(val)
		if _, known := signalResource[sig]; !known {
			return fmt.Errorf("--eviction-minimum-reclaim: unsupported eviction signal %v", sig)
		}
		if strings.HasSuffix(val, "%") {
			p, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
			if err != nil {
				return fmt.Errorf("--eviction-minimum-reclaim: %v: %w", sig, err)
			}
			if p <= 0 {
				return fmt.Errorf("--eviction-minimum-reclaim: eviction percentage minimum reclaim %v must be positive: %s", sig, val)
			}
			amounts[sig] = Amount{Percentage: p / 100}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return fmt.Errorf("--eviction-minimum-reclaim: %v: %w", sig, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("--eviction-minimum-reclaim: negative eviction minimum reclaim specified for %v", sig)
		}
		amounts[sig] = Amount{Quantity: &q}
	}
	for i := range thresholds {
		if a, ok := amounts[thresholds[i].Signal]; ok {
			thresholds[i].MinReclaim = &a
		}
	}
	return nil
}

// HardValue is the amount a hard threshold of the signal keeps back from a
// capacity (what allocatable subtracts), 0 when there is none.
func HardValue(thresholds []Threshold, s Signal, capacity int64) int64 {
	for _, t := range thresholds {
		if t.Signal == s && !t.Soft {
			return t.Value(capacity)
		}
	}
	return 0
}
