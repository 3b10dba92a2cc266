package webhook

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsPrefix names the metrics upstream's webhook library records
// (apiserver_admission_webhook_admission_duration_seconds,
// apiserver_admission_webhook_rejection_count, ..._request_total,
// ..._fail_open_count).
const metricsPrefix = "apiserver_admission_webhook_"

// Metrics is a collector that serves, in the API server's own registry,
// the webhook metrics upstream's library records in component-base's
// legacy registry (the library has no other place to record them).
func Metrics() prometheus.Collector { return legacyWebhookMetrics{} }

type legacyWebhookMetrics struct{}

// Describe sends nothing: the metrics are only known once recorded (an
// unchecked collector).
func (legacyWebhookMetrics) Describe(chan<- *prometheus.Desc) {}

func (legacyWebhookMetrics) Collect(ch chan<- prometheus.Metric) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil && len(families) == 0 {
		return
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), metricsPrefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			names := make([]string, 0, len(m.GetLabel()))
			values := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
				values = append(values, l.GetValue())
			}
			desc := prometheus.NewDesc(f.GetName(), f.GetHelp(), names, nil)
			if pm := constMetric(desc, f.GetType(), m, values); pm != nil {
				ch <- pm
			}
		}
	}
}

func constMetric(desc *prometheus.Desc, t dto.MetricType, m *dto.Metric, values []string) prometheus.Metric {
	var pm prometheus.Metric
	var err error
	switch t {
	case dto.MetricType_COUNTER:
		pm, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, m.GetCounter().GetValue(), values...)
	case dto.MetricType_GAUGE:
		pm, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.GetGauge().GetValue(), values...)
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		buckets := make(map[float64]uint64, len(h.GetBucket()))
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		pm, err = prometheus.NewConstHistogram(desc, h.GetSampleCount(), h.GetSampleSum(), buckets, values...)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return pm
}
