package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Metrics are the kubelet's own metrics, with upstream's names, labels and
// buckets. The kubelet records pod starts and pod worker durations;
// InstrumentRuntime records the CRI operations; the running pod and
// container gauges are read from CRI when /metrics is scraped.
type Metrics struct {
	reg *prometheus.Registry

	runtimeOps       *prometheus.CounterVec
	runtimeOpErrors  *prometheus.CounterVec
	runtimeDurations *prometheus.HistogramVec
	podStart         prometheus.Histogram
	podStartSLI      prometheus.Histogram
	podWorker        *prometheus.HistogramVec
	nodeName         *prometheus.GaugeVec
	evictions        *prometheus.CounterVec
	imageGC          *prometheus.CounterVec
}

// podStartBuckets are upstream's buckets for the pod start histograms.
var podStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// NewMetrics registers the kubelet's metrics on reg (a new registry when
// nil), which the server's /metrics serves.
func NewMetrics(reg *prometheus.Registry) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		reg: reg,
		runtimeOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_total",
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		runtimeOpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "runtime_operations_errors_total",
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
		runtimeDurations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "runtime_operations_duration_seconds",
			Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
			Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
		}, []string{"operation_type"}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartBuckets,
		}),
		podStartSLI: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartBuckets,
		}),
		podWorker: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
			Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		nodeName: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "node_name",
			Help: "The node's name. The count is always 1.",
		}, []string{"node"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: "Cumulative number of pod evictions by eviction signal",
		}, []string{"eviction_signal"}),
		imageGC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "image_garbage_collected_total",
			Help: "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.runtimeOps, m.runtimeOpErrors, m.runtimeDurations, m.podStart, m.podStartSLI, m.podWorker, m.nodeName, m.evictions, m.imageGC)
	return m
}

// ObservePodStart records how long a pod took from the kubelet first
// seeing it to running (kubelet_pod_start_duration_seconds).
func (m *Metrics) ObservePodStart(d time.Duration) { m.podStart.Observe(d.Seconds()) }

// ObservePodStartSLI records the pod startup SLI
// (kubelet_pod_start_sli_duration_seconds).
func (m *Metrics) ObservePodStartSLI(d time.Duration) { m.podStartSLI.Observe(d.Seconds()) }

// ObservePodWorker records one pod sync; op is create, update or sync.
func (m *Metrics) ObservePodWorker(op string, d time.Duration) {
	m.podWorker.WithLabelValues(op).Observe(d.Seconds())
}

// IncEviction counts a pod the kubelet evicted (kubelet_evictions).
func (m *Metrics) IncEviction(signal string) { m.evictions.WithLabelValues(signal).Inc() }

// IncImageGC counts an image removed by garbage collection, reason
// "space" or "age" (kubelet_image_garbage_collected_total).
func (m *Metrics) IncImageGC(reason string) { m.imageGC.WithLabelValues(reason).Inc() }

func (m *Metrics) observeRuntime(op string, start time.Time, err error) {
	m.runtimeOps.WithLabelValues(op).Inc()
	m.runtimeDurations.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.runtimeOpErrors.WithLabelValues(op).Inc()
	}
}

// handler serves the registry, with the running pod and container gauges
// read from the server's runtime at scrape time.
func (m *Metrics) handler(s *Server) http.Handler {
	if s.opts.NodeName != "" {
		m.nodeName.WithLabelValues(s.opts.NodeName).Set(1)
	}
	_ = m.reg.Register(&runningCollector{runtime: s.runtime})
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	runningPodsDesc       = prometheus.NewDesc("kubelet_running_pods", "Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers", "Number of containers currently running", []string{"container_state"}, nil)
)

// runningCollector reads kubelet_running_pods and kubelet_running_containers
// from CRI at each scrape.
type runningCollector struct {
	runtime internalapi.RuntimeService
}

func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sbs, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}); err == nil {
		ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(len(sbs)))
	}
	if cs, err := c.runtime.ListContainers(ctx, nil); err == nil {
		counts := map[string]int{"created": 0, "running": 0, "exited": 0, "unknown": 0}
		for _, ct := range cs {
			switch ct.State {
			case runtimeapi.ContainerState_CONTAINER_CREATED:
				counts["created"]++
			case runtimeapi.ContainerState_CONTAINER_RUNNING:
				counts["running"]++
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				counts["exited"]++
			default:
				counts["unknown"]++
			}
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
		}
	}
}
