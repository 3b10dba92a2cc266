package flowcontrol

import "github.com/prometheus/client_golang/prometheus"

// Metrics are flow control's collectors, under upstream's names:
//
//	apiserver_flowcontrol_rejected_requests_total{flow_schema,priority_level,reason}
//	apiserver_flowcontrol_dispatched_requests_total{flow_schema,priority_level}
//	apiserver_flowcontrol_current_inqueue_requests{flow_schema,priority_level}
//	apiserver_flowcontrol_current_executing_requests{flow_schema,priority_level}
//	apiserver_flowcontrol_current_executing_seats{flow_schema,priority_level}
//	apiserver_flowcontrol_request_wait_duration_seconds{flow_schema,priority_level,execute}
//	apiserver_flowcontrol_request_execution_seconds{flow_schema,priority_level,type}
//	apiserver_flowcontrol_nominal_limit_seats{priority_level}
//	apiserver_flowcontrol_request_concurrency_limit{priority_level}
//	apiserver_dropped_requests_total{request_kind} (max-in-flight)
type Metrics struct {
	rejected        *prometheus.CounterVec
	dispatched      *prometheus.CounterVec
	inQueue         *prometheus.GaugeVec
	executing       *prometheus.GaugeVec
	executingSeats  *prometheus.GaugeVec
	waitDuration    *prometheus.HistogramVec
	execDuration    *prometheus.HistogramVec
	nominalSeats    *prometheus.GaugeVec
	concurrency     *prometheus.GaugeVec
	droppedRequests *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil:
// not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	fsPL := []string{"flow_schema", "priority_level"}
	m := &Metrics{
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_rejected_requests_total",
			Help: "Number of requests rejected by API Priority and Fairness subsystem",
		}, append(append([]string{}, fsPL...), "reason")),
		dispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_flowcontrol_dispatched_requests_total",
			Help: "Number of requests executed by API Priority and Fairness subsystem",
		}, fsPL),
		inQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_inqueue_requests",
			Help: "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
		}, fsPL),
		executing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_executing_requests",
			Help: "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
		}, fsPL),
		executingSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_current_executing_seats",
			Help: "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
		}, fsPL),
		waitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_flowcontrol_request_wait_duration_seconds",
			Help:    "Length of time a request spent waiting in its queue",
			Buckets: []float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30},
		}, append(append([]string{}, fsPL...), "execute")),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_flowcontrol_request_execution_seconds",
			Help:    "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem",
			Buckets: []float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30},
		}, append(append([]string{}, fsPL...), "type")),
		nominalSeats: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_nominal_limit_seats",
			Help: "Nominal number of execution seats configured for each priority level",
		}, []string{"priority_level"}),
		concurrency: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_flowcontrol_request_concurrency_limit",
			Help: "Nominal number of execution seats configured for each priority level",
		}, []string{"priority_level"}),
		droppedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_dropped_requests_total",
			Help: "Number of requests dropped with 'Try again later' response by the max-in-flight filter",
		}, []string{"request_kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.rejected, m.dispatched, m.inQueue, m.executing, m.executingSeats,
			m.waitDuration, m.execDuration, m.nominalSeats, m.concurrency, m.droppedRequests)
	}
	return m
}
