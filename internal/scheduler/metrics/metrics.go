// Package metrics holds the scheduler's Prometheus metrics, with upstream
// kube-scheduler's names, labels and buckets:
//
//	scheduler_pending_pods{queue=active|backoff|unschedulable|gated}
//	scheduler_schedule_attempts_total{result,profile}
//	scheduler_scheduling_attempt_duration_seconds{result,profile}
//	scheduler_pod_scheduling_sli_duration_seconds{attempts}
//	scheduler_pod_scheduling_attempts
//	scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}
//	scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}
//	scheduler_e2e_scheduling_duration_seconds{result,profile}
//
// As upstream, the per-plugin histogram is fed from a sample of the
// scheduling cycles (PluginMetricsSamplePercent), since timing every
// Filter and Score call on every node would cost more than the plugins.
//
// result is scheduled, unschedulable or error. Upstream deprecated
// scheduler_e2e_scheduling_duration_seconds in 1.23 in favour of
// scheduling_attempt_duration_seconds (the same measure) and later dropped
// it; we still export it, observed with the same value, because dashboards
// and our issue tracker name it. The end-to-end latency of a pod, from its
// first entry in the queue to its binding, is
// pod_scheduling_sli_duration_seconds.
//
// The metrics are registered on the registerer given to New (no global
// registry), so that several schedulers can live in one process.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a scheduling attempt.
const (
	Scheduled     = "scheduled"
	Unschedulable = "unschedulable"
	Error         = "error"
)

// Extension points as upstream labels them.
const (
	PreFilter  = "PreFilter"
	Filter     = "Filter"
	PostFilter = "PostFilter"
	PreScore   = "PreScore"
	Score      = "Score"
	Reserve    = "Reserve"
	Unreserve  = "Unreserve"
	Permit     = "Permit"
	PreBind    = "PreBind"
	Bind       = "Bind"
	PostBind   = "PostBind"
)

// PluginMetricsSamplePercent is the share of scheduling cycles whose
// plugins are timed one by one, upstream's 10%.
const PluginMetricsSamplePercent = 10

// PendingFunc returns the pods waiting in each sub-queue.
type PendingFunc func() (active, backoff, unschedulable, gated int)

// Metrics are the scheduler's metrics.
type Metrics struct {
	ScheduleAttempts         *prometheus.CounterVec
	SchedulingAttemptLatency *prometheus.HistogramVec
	PodSchedulingSLI         *prometheus.HistogramVec
	PodSchedulingAttempts    prometheus.Histogram
	ExtensionPointDuration   *prometheus.HistogramVec
	PluginExecutionDuration  *prometheus.HistogramVec
	E2eSchedulingLatency     *prometheus.HistogramVec

	mu      sync.Mutex
	pending PendingFunc

	// pluginObservers caches PluginExecutionDuration's children by
	// pluginKey: in a sampled cycle Filter and Score are timed for every
	// node, and resolving the labels each time would cost more than the
	// plugins.
	pluginObservers sync.Map
}

type pluginKey struct{ point, plugin, status string }

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ScheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", "profile"}),
		SchedulingAttemptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "scheduling_attempt_duration_seconds",
			Help:    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
		PodSchedulingSLI: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "pod_scheduling_sli_duration_seconds",
			Help:    "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 20),
		}, []string{"attempts"}),
		PodSchedulingAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "pod_scheduling_attempts",
			Help:    "Number of attempts to successfully schedule a pod.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 5),
		}),
		ExtensionPointDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "framework_extension_point_duration_seconds",
			Help:    "Latency for running all plugins of a specific extension point.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 12),
		}, []string{"extension_point", "status", "profile"}),
		PluginExecutionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "plugin_execution_duration_seconds",
			Help:    "Duration for running a plugin at a specific extension point.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 1.5, 20),
		}, []string{"plugin", "extension_point", "status"}),
		E2eSchedulingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "e2e_scheduling_duration_seconds",
			Help:    "(Deprecated) E2e scheduling latency in seconds (scheduling algorithm + binding). This metric is replaced by scheduling_attempt_duration_seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
	}
	pendingDesc := prometheus.NewDesc("scheduler_pending_pods",
		"Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
		[]string{"queue"}, nil)
	collectors := []prometheus.Collector{
		m.ScheduleAttempts, m.SchedulingAttemptLatency, m.PodSchedulingSLI, m.PodSchedulingAttempts,
		m.ExtensionPointDuration, m.PluginExecutionDuration, m.E2eSchedulingLatency, &pendingCollector{m: m, desc: pendingDesc},
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetPending sets where scheduler_pending_pods is read from (nil: zeros).
func (m *Metrics) SetPending(f PendingFunc) {
	m.mu.Lock()
	m.pending = f
	m.mu.Unlock()
}

// ObserveAttempt records one scheduling attempt.
func (m *Metrics) ObserveAttempt(result, profile string, d time.Duration) {
	m.ScheduleAttempts.WithLabelValues(result, profile).Inc()
	m.SchedulingAttemptLatency.WithLabelValues(result, profile).Observe(d.Seconds())
	m.E2eSchedulingLatency.WithLabelValues(result, profile).Observe(d.Seconds())
}

// ObservePodScheduled records a pod's end-to-end latency and attempts.
func (m *Metrics) ObservePodScheduled(attempts int, sinceFirst time.Duration) {
	label := strconv.Itoa(attempts)
	if attempts >= 15 {
		label = "15+" // upstream caps the label
	}
	m.PodSchedulingSLI.WithLabelValues(label).Observe(sinceFirst.Seconds())
	m.PodSchedulingAttempts.Observe(float64(attempts))
}

// ObserveExtensionPoint records one run of an extension point.
func (m *Metrics) ObserveExtensionPoint(point, status, profile string, d time.Duration) {
	m.ExtensionPointDuration.WithLabelValues(point, status, profile).Observe(d.Seconds())
}

// ObservePlugin records one call of one plugin at an extension point.
func (m *Metrics) ObservePlugin(point, plugin, status string, d time.Duration) {
	k := pluginKey{point, plugin, status}
	o, ok := m.pluginObservers.Load(k)
	if !ok {
		o, _ = m.pluginObservers.LoadOrStore(k, m.PluginExecutionDuration.WithLabelValues(plugin, point, status))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

type pendingCollector struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	f := c.m.pending
	c.m.mu.Unlock()
	var a, b, u, g int
	if f != nil {
		a, b, u, g = f()
	}
	for _, v := range []struct {
		q string
		n int
	}{{"active", a}, {"backoff", b}, {"unschedulable", u}, {"gated", g}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v.n), v.q)
	}
}
