package simulate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// Defaults of Options. The lease values are upstream's kubelet defaults;
// the status frequency is upstream's nodeStatusReportFrequency (how often a
// kubelet writes an unchanged status).
const (
	DefaultNamePrefix            = "sim-node-"
	DefaultPods                  = 110
	DefaultLeaseDuration         = 40 * time.Second
	DefaultStatusUpdateFrequency = 5 * time.Minute
	// MinWorkers and MaxWorkers bound the default number of workers, one
	// per 100 nodes: API calls block for milliseconds each, so a fixed
	// few workers cannot keep up with the Lease renewals of many nodes.
	MinWorkers = 16
	MaxWorkers = 128
	// MaxNodes is the most nodes one simulator can address with its
	// pod-CIDR scheme (10.42.0.0/24 up to 10.255.255.0/24).
	MaxNodes = (256 - 42) * 256
)

// resourceapiMaxDevices is the most devices one ResourceSlice may hold
// (resource.k8s.io/v1 ResourceSliceMaxDevices).
const resourceapiMaxDevices = 128

// Default capacities of a simulated node.
var (
	DefaultCPU              = resource.MustParse("4")
	DefaultMemory           = resource.MustParse("16Gi")
	DefaultEphemeralStorage = resource.MustParse("100Gi")
)

// Options configure a Simulator. The zero value (with Nodes set) gives
// nodes like a small cloud VM with upstream's kubelet timings.
type Options struct {
	// Nodes is how many nodes to simulate when Templates is empty.
	Nodes int
	// NamePrefix starts every node name; nodes are named prefix + index.
	NamePrefix string
	// Zones, if set, spread the nodes round-robin over these values of
	// topology.kubernetes.io/zone; the region label is Region, or derived
	// from the zone (see RegionOf).
	Zones  []string
	Region string
	// Capacity of each node; zero values mean the defaults.
	CPU, Memory, EphemeralStorage resource.Quantity
	Pods                          int
	// Labels and Taints are added to every node.
	Labels map[string]string
	Taints []corev1.Taint
	// Templates, if set, describe the nodes instead of Nodes: each template
	// gives Count nodes, overriding the flags' labels, taints and capacity.
	Templates []NodeTemplate

	// LeaseDuration is the Lease's leaseDurationSeconds; LeaseRenewInterval
	// defaults to a quarter of it, as upstream's kubelet does.
	LeaseDuration      time.Duration
	LeaseRenewInterval time.Duration
	// StatusUpdateFrequency is how often each node writes a status
	// heartbeat (besides the status it registers with).
	StatusUpdateFrequency time.Duration
	// Devices, when positive, publishes a ResourceSlice for each node with
	// that many simulated GPUs of DeviceDriver (DefaultDeviceDriver), for
	// Dynamic Resource Allocation.
	Devices      int
	DeviceDriver string
	// PodStartLatency delays a bound pod's move to Running.
	PodStartLatency time.Duration
	// KeepNotReadyTaint leaves the not-ready taint added by admission on
	// the nodes (for a cluster that runs a node lifecycle controller).
	KeepNotReadyTaint bool
	// DeleteNodesOnExit deletes the nodes and their Leases when Start
	// returns.
	DeleteNodesOnExit bool
	// Workers is the number of workers of each of the two queues
	// (default one per 100 nodes, between MinWorkers and MaxWorkers).
	Workers int
	// Clock is the time source (defaults to the real clock).
	Clock clock.WithTicker
}

// NodeTemplate describes Count nodes. It is the element of the YAML list
// given to `skiff simulate --node-file`.
type NodeTemplate struct {
	// Count is how many nodes this template makes (at least 1).
	Count int `json:"count"`
	// NamePrefix overrides Options.NamePrefix for these nodes.
	NamePrefix string `json:"namePrefix,omitempty"`
	// Zone pins these nodes to one zone instead of Options.Zones.
	Zone string `json:"zone,omitempty"`
	// Region overrides the region derived for Zone.
	Region string `json:"region,omitempty"`
	// Labels are added to (and override) Options.Labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints replace Options.Taints when set.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Capacity overrides the default capacity per resource; it may name
	// extended resources too (e.g. example.com/gpu: 2).
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
}

// withDefaults fills in the zero values.
func (o Options) withDefaults() Options {
	if o.NamePrefix == "" {
		o.NamePrefix = DefaultNamePrefix
	}
	if o.DeviceDriver == "" {
		o.DeviceDriver = DefaultDeviceDriver
	}
	if o.CPU.IsZero() {
		o.CPU = DefaultCPU.DeepCopy()
	}
	if o.Memory.IsZero() {
		o.Memory = DefaultMemory.DeepCopy()
	}
	if o.EphemeralStorage.IsZero() {
		o.EphemeralStorage = DefaultEphemeralStorage.DeepCopy()
	}
	if o.Pods == 0 {
		o.Pods = DefaultPods
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = o.LeaseDuration / 4
	}
	if o.StatusUpdateFrequency == 0 {
		o.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if o.Workers == 0 {
		o.Workers = min(MaxWorkers, max(MinWorkers, o.totalNodes()/100))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// totalNodes is how many nodes the options describe.
func (o Options) totalNodes() int {
	if len(o.Templates) == 0 {
		return o.Nodes
	}
	total := 0
	for _, t := range o.Templates {
		total += t.Count
	}
	return total
}

// Validate reports every problem of the options (after defaulting).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Devices < 0 || o.Devices > resourceapiMaxDevices {
		errs = append(errs, fmt.Errorf("devices per node must be between 0 and %d, got %d", resourceapiMaxDevices, o.Devices))
	}
	if o.Devices > 0 {
		for _, msg := range validation.IsDNS1123Subdomain(o.DeviceDriver) {
			errs = append(errs, fmt.Errorf("device driver %q: %s", o.DeviceDriver, msg))
		}
	}
	total := o.Nodes
	if len(o.Templates) > 0 {
		total = 0
		for i, t := range o.Templates {
			if t.Count < 1 {
				errs = append(errs, fmt.Errorf("node template %d: count must be at least 1", i))
			}
			total += t.Count
			errs = append(errs, validateNodeFields(fmt.Sprintf("node template %d", i), t.Labels, t.Taints)...)
			for name, q := range t.Capacity {
				if q.Sign() < 0 {
					errs = append(errs, fmt.Errorf("node template %d: capacity %s must not be negative", i, name))
				}
			}
		}
	}
	if total < 1 {
		errs = append(errs, errors.New("at least one node is needed"))
	}
	if total > MaxNodes {
		errs = append(errs, fmt.Errorf("%d nodes is more than the %d the pod CIDR scheme can address", total, MaxNodes))
	}
	for _, q := range []struct {
		name string
		q    resource.Quantity
	}{{"cpu", o.CPU}, {"memory", o.Memory}, {"ephemeral-storage", o.EphemeralStorage}} {
		if q.q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", q.name))
		}
	}
	if o.Pods < 0 {
		errs = append(errs, errors.New("pods must not be negative"))
	}
	// The longest name is the prefix plus the widest index.
	if longest := o.NamePrefix + fmt.Sprint(total); len(validation.IsDNS1123Subdomain(longest)) > 0 {
		errs = append(errs, fmt.Errorf("name prefix %q does not make valid node names: %s", o.NamePrefix, strings.Join(validation.IsDNS1123Subdomain(longest), "; ")))
	}
	for _, t := range o.Templates {
		if t.NamePrefix != "" {
			if msgs := validation.IsDNS1123Subdomain(t.NamePrefix + fmt.Sprint(total)); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("name prefix %q does not make valid node names: %s", t.NamePrefix, strings.Join(msgs, "; ")))
			}
		}
	}
	for _, z := range o.Zones {
		if msgs := validation.IsValidLabelValue(z); len(msgs) > 0 || z == "" {
			errs = append(errs, fmt.Errorf("zone %q is not a valid label value", z))
		}
	}
	errs = append(errs, validateNodeFields("", o.Labels, o.Taints)...)
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("lease duration %v is shorter than 1s", o.LeaseDuration))
	}
	if o.LeaseRenewInterval <= 0 || o.LeaseRenewInterval >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("lease renew interval %v must be positive and shorter than the lease duration %v", o.LeaseRenewInterval, o.LeaseDuration))
	}
	if o.StatusUpdateFrequency <= 0 {
		errs = append(errs, errors.New("status update frequency must be positive"))
	}
	if o.PodStartLatency < 0 {
		errs = append(errs, errors.New("pod start latency must not be negative"))
	}
	if o.Workers < 1 {
		errs = append(errs, errors.New("workers must be at least 1"))
	}
	return errors.Join(errs...)
}

func validateNodeFields(where string, labels map[string]string, taints []corev1.Taint) []error {
	var errs []error
	prefix := ""
	if where != "" {
		prefix = where + ": "
	}
	for _, e := range metavalidation.ValidateLabels(labels, field.NewPath("labels")) {
		errs = append(errs, fmt.Errorf("%s%s", prefix, e.Error()))
	}
	for i, t := range taints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, fmt.Errorf("%staint %d key %q: %s", prefix, i, t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("%staint %d value %q: %s", prefix, i, t.Value, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("%staint %d effect %q must be NoSchedule, PreferNoSchedule or NoExecute", prefix, i, t.Effect))
		}
	}
	return errs
}
