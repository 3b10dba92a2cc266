package metrics

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestNames: the scheduler exports upstream's metric names and labels.
func TestNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetPending(func() (int, int, int, int) { return 3, 2, 1, 0 })
	m.ObserveAttempt(Scheduled, "default-scheduler", 5*time.Millisecond)
	m.ObservePodScheduled(1, 20*time.Millisecond)
	m.ObserveExtensionPoint(Filter, "Success", "default-scheduler", time.Millisecond)
	m.ObservePlugin(Filter, "NodeResourcesFit", "Success", time.Microsecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string][]string{}
	pending := map[string]float64{}
	for _, f := range families {
		var names []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
		sort.Strings(names)
		labels[f.GetName()] = names
		if f.GetName() == "scheduler_pending_pods" {
			for _, mt := range f.GetMetric() {
				pending[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
			}
		}
	}
	want := map[string][]string{
		"scheduler_pending_pods":                               {"queue"},
		"scheduler_schedule_attempts_total":                    {"profile", "result"},
		"scheduler_scheduling_attempt_duration_seconds":        {"profile", "result"},
		"scheduler_e2e_scheduling_duration_seconds":            {"profile", "result"},
		"scheduler_pod_scheduling_sli_duration_seconds":        {"attempts"},
		"scheduler_pod_scheduling_attempts":                    nil,
		"scheduler_framework_extension_point_duration_seconds": {"extension_point", "profile", "status"},
		"scheduler_plugin_execution_duration_seconds":          {"extension_point", "plugin", "status"},
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("metric names and labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"active": 3, "backoff": 2, "unschedulable": 1, "gated": 0}, pending); diff != "" {
		t.Errorf("pending pods (-want +got):\n%s", diff)
	}
}
