// Package metrics holds the API server's Prometheus metrics under their
// upstream names and labels, so that dashboards and alerts written for
// kube-apiserver work against Skiff:
//
//	apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}
//	apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,component}
//	apiserver_response_sizes{verb,group,version,resource,subresource,scope,component}
//	apiserver_longrunning_requests{verb,group,version,resource,subresource,scope,component}
//	apiserver_current_inflight_requests{request_kind}
//	apiserver_storage_objects{resource}, apiserver_resource_objects{group,resource}
//	etcd_request_duration_seconds{operation,group,resource}, etcd_requests_total{operation,group,resource}
//	apiserver_storage_decode_errors_total{resource}
//
// A Metrics value owns its collectors; there is no package-level state.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// latencyBuckets are upstream's buckets for apiserver_request_duration_seconds
// and etcd_request_duration_seconds (kept equal upstream, for the SLOs).
var latencyBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// Request kinds of apiserver_current_inflight_requests.
const (
	ReadOnlyKind = "readOnly"
	MutatingKind = "mutating"
)

// Metrics is the API server's set of collectors.
type Metrics struct {
	requests        *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	responseSizes   *prometheus.HistogramVec
	longRunning     *prometheus.GaugeVec
	inflight        *prometheus.GaugeVec
	storageObjects  *prometheus.GaugeVec
	resourceObjects *prometheus.GaugeVec
	etcdLatency     *prometheus.HistogramVec
	etcdRequests    *prometheus.CounterVec
	decodeErrors    *prometheus.CounterVec

	gatherer prometheus.Gatherer
}

// New creates the collectors and registers them with reg. A nil reg means a
// fresh registry that also holds the Go runtime and process collectors. If
// reg is also a prometheus.Gatherer (a *prometheus.Registry is), Handler
// serves everything in it; otherwise Handler serves only these metrics.
func New(reg prometheus.Registerer) *Metrics {
	requestLabels := []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}
	endpointLabels := []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}
	storageLabels := []string{"operation", "group", "resource"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, append(append([]string{}, requestLabels...), "code")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: latencyBuckets,
		}, requestLabels),
		responseSizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_response_sizes",
			Help:    "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
			Buckets: prometheus.ExponentialBuckets(1000, 10.0, 7),
		}, endpointLabels),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component.",
		}, endpointLabels),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_current_inflight_requests",
			Help: "Number of requests currently being served, per request kind.",
		}, []string{"request_kind"}),
		storageObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_storage_objects",
			Help: "Number of stored objects at the time of last check split by kind.",
		}, []string{"resource"}),
		resourceObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_resource_objects",
			Help: "Number of stored objects at the time of last check split by group and resource.",
		}, []string{"group", "resource"}),
		etcdLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "Etcd request latency in seconds for each operation and object type.",
			Buckets: latencyBuckets,
		}, storageLabels),
		etcdRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_requests_total",
			Help: "Etcd request counts for each operation and object type.",
		}, storageLabels),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_decode_errors_total",
			Help: "Number of stored object decode errors split by object type",
		}, []string{"resource"}),
	}
	// Both kinds are always present, as upstream.
	m.inflight.WithLabelValues(ReadOnlyKind).Set(0)
	m.inflight.WithLabelValues(MutatingKind).Set(0)

	own := []prometheus.Collector{m.requests, m.latency, m.responseSizes, m.longRunning, m.inflight,
		m.storageObjects, m.resourceObjects, m.etcdLatency, m.etcdRequests, m.decodeErrors}
	if reg == nil {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = r
	}
	reg.MustRegister(own...)
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	} else {
		private := prometheus.NewRegistry()
		private.MustRegister(own...)
		m.gatherer = private
	}
	return m
}

// Handler serves /metrics in the Prometheus text (or negotiated) format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// ObserveRequest records one finished request: apiserver_request_total and
// apiserver_request_duration_seconds, and for GET and LIST the response size
// when size >= 0.
func (m *Metrics) ObserveRequest(l RequestLabels, code int, d time.Duration) {
	m.ObserveRequestSize(l, code, d, -1)
}

// ObserveRequestSize is ObserveRequest with the response body size in bytes
// (negative when unknown).
func (m *Metrics) ObserveRequestSize(l RequestLabels, code int, d time.Duration, size int) {
	m.requests.WithLabelValues(l.Verb, l.DryRun, l.Group, l.Version, l.Resource, l.Subresource, l.Scope, l.Component, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(l.Verb, l.DryRun, l.Group, l.Version, l.Resource, l.Subresource, l.Scope, l.Component).Observe(d.Seconds())
	if size >= 0 && (l.Verb == "GET" || l.Verb == "LIST") {
		m.responseSizes.WithLabelValues(l.Verb, l.Group, l.Version, l.Resource, l.Subresource, l.Scope, l.Component).Observe(float64(size))
	}
}

// TrackLongRunning counts a long-running request (watch, exec, logs -f,
// proxy) in apiserver_longrunning_requests until the returned func is called.
func (m *Metrics) TrackLongRunning(l RequestLabels) (done func()) {
	g := m.longRunning.WithLabelValues(l.Verb, l.Group, l.Version, l.Resource, l.Subresource, l.Scope, l.Component)
	g.Inc()
	return g.Dec
}

// TrackInflight counts a request in apiserver_current_inflight_requests
// (request_kind "mutating" or "readOnly") until the returned func is called.
func (m *Metrics) TrackInflight(mutating bool) (done func()) {
	kind := ReadOnlyKind
	if mutating {
		kind = MutatingKind
	}
	g := m.inflight.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// ObserveEtcd records one etcd request for etcd_request_duration_seconds and
// etcd_requests_total. operation is upstream's: "get", "list", "create",
// "update", "delete" (also "listWithCount", "getKeys", "watch" when used).
// resource is a group-qualified resource, "pods" or "deployments.apps"; it
// is split into the group and resource labels. It implements
// internal/storage.Observer.
func (m *Metrics) ObserveEtcd(operation, resource string, d time.Duration) {
	gr := schema.ParseGroupResource(resource)
	m.etcdLatency.WithLabelValues(operation, gr.Group, gr.Resource).Observe(d.Seconds())
	m.etcdRequests.WithLabelValues(operation, gr.Group, gr.Resource).Inc()
}

// ObserveDecodeError counts a stored object of resource ("pods",
// "deployments.apps") that could not be decoded. It implements
// internal/storage.DecodeErrorObserver.
func (m *Metrics) ObserveDecodeError(resource string) {
	m.decodeErrors.WithLabelValues(schema.ParseGroupResource(resource).String()).Inc()
}

// SetStorageObjects sets the number of stored objects of resource ("pods",
// "deployments.apps"): apiserver_storage_objects{resource="deployments.apps"}
// and apiserver_resource_objects{group="apps",resource="deployments"}. A
// negative n means the count failed, reported as -1 as upstream does.
func (m *Metrics) SetStorageObjects(resource string, n int64) {
	if n < 0 {
		n = -1
	}
	gr := schema.ParseGroupResource(resource)
	m.storageObjects.WithLabelValues(gr.String()).Set(float64(n))
	m.resourceObjects.WithLabelValues(gr.Group, gr.Resource).Set(float64(n))
}
