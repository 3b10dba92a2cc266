package manager

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// workqueueMetrics is a workqueue.MetricsProvider that publishes upstream's
// workqueue metrics (subsystem "workqueue", label "name" = the queue's name,
// which our controllers set to their own name) on a Prometheus registerer.
type workqueueMetrics struct {
	depth                   *prometheus.GaugeVec
	adds                    *prometheus.CounterVec
	latency                 *prometheus.HistogramVec
	workDuration            *prometheus.HistogramVec
	unfinished              *prometheus.GaugeVec
	longestRunningProcessor *prometheus.GaugeVec
	retries                 *prometheus.CounterVec
}

var _ workqueue.MetricsProvider = (*workqueueMetrics)(nil)

// newWorkqueueMetrics builds the metric vectors and registers them on reg
// (nil: unregistered, for tests).
func newWorkqueueMetrics(reg prometheus.Registerer) (*workqueueMetrics, error) {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10ns .. ~1000s, as upstream
	m := &workqueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue",
		}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue",
		}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in workqueue before being requested.",
			Buckets: buckets,
		}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
		}, []string{"name"}),
		longestRunningProcessor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by workqueue",
		}, []string{"name"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunningProcessor, m.retries} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *workqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *workqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *workqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

func (m *workqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(name)
}

func (m *workqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *workqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longestRunningProcessor.WithLabelValues(name)
}

func (m *workqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
