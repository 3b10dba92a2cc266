package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// /metrics/resource is what metrics-server scrapes (and so `kubectl top`):
// CPU and working-set memory of the node, pods and containers, with
// upstream's names and labels.

var (
	resNodeCPU       = prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	resNodeMemory    = prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil)
	resPodCPU        = prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	resPodMemory     = prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	resContainerCPU  = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	resContainerMem  = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	resContainerTime = prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	resScrapeError   = prometheus.NewDesc("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

func (s *Server) resourceHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&resourceCollector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

type resourceCollector struct{ s *Server }

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{resNodeCPU, resNodeMemory, resPodCPU, resPodMemory, resContainerCPU, resContainerMem, resContainerTime, resScrapeError} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	now := metav1.NewTime(c.s.opts.Clock.Now())
	at := func(m prometheus.Metric, ts time.Time) prometheus.Metric {
		return prometheus.NewMetricWithTimestamp(ts, m)
	}
	if cpu := nodeCPU(now); cpu != nil {
		ch <- at(prometheus.MustNewConstMetric(resNodeCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9), now.Time)
	}
	if mem := nodeMemory(now); mem != nil {
		ch <- at(prometheus.MustNewConstMetric(resNodeMemory, prometheus.GaugeValue, float64(*mem.WorkingSetBytes)), now.Time)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	usages, err := c.s.containerUsages(ctx)
	scrapeErr := 0.0
	if err != nil {
		scrapeErr = 1
	}
	ch <- prometheus.MustNewConstMetric(resScrapeError, prometheus.GaugeValue, scrapeErr)
	byUID := map[string][]containerUsage{}
	for _, u := range usages {
		byUID[u.uid] = append(byUID[u.uid], u)
	}
	for _, pod := range c.s.host.GetPods() {
		var cpu, mem float64
		var haveCPU, haveMem bool
		for _, u := range byUID[string(pod.UID)] {
			if !runningIn(pod, u.id) {
				continue
			}
			labels := []string{u.name, pod.Name, pod.Namespace}
			if st := containerStart(pod, u.name); !st.IsZero() {
				ch <- prometheus.MustNewConstMetric(resContainerTime, prometheus.GaugeValue, float64(st.Unix()), labels...)
			}
			if cu := u.stats.GetCpu(); cu != nil && cu.UsageCoreNanoSeconds != nil {
				v := float64(cu.UsageCoreNanoSeconds.Value) / 1e9
				cpu, haveCPU = cpu+v, true
				ch <- at(prometheus.MustNewConstMetric(resContainerCPU, prometheus.CounterValue, v, labels...), time.Unix(0, cu.Timestamp))
			}
			if mu := u.stats.GetMemory(); mu != nil && mu.WorkingSetBytes != nil {
				v := float64(mu.WorkingSetBytes.Value)
				mem, haveMem = mem+v, true
				ch <- at(prometheus.MustNewConstMetric(resContainerMem, prometheus.GaugeValue, v, labels...), time.Unix(0, mu.Timestamp))
			}
		}
		if haveCPU {
			ch <- at(prometheus.MustNewConstMetric(resPodCPU, prometheus.CounterValue, cpu, pod.Name, pod.Namespace), now.Time)
		}
		if haveMem {
			ch <- at(prometheus.MustNewConstMetric(resPodMemory, prometheus.GaugeValue, mem, pod.Name, pod.Namespace), now.Time)
		}
	}
}
