package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestKubeletMetricsAfterPodStart scrapes the kubelet's /metrics through
// the API server's nodes/proxy once a pod has started on the node: the pod
// start histograms and the pod worker histogram have observations, and a
// running container is counted. (kubelet_evictions and
// kubelet_image_garbage_collected_total have no series until something is
// evicted or collected, as upstream.)
func TestKubeletMetricsAfterPodStart(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-metrics")
	c.create(t, busyboxPod(ns, "counted", c.image, "sleep", "3600"))
	c.waitPod(t, ns, "counted", 60*time.Second, "Running and Ready", podRunningReady)

	count := func(metrics, series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`).FindStringSubmatch(metrics)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	var metrics string
	waitFor(t, 20*time.Second, "the pod start observed in the kubelet's metrics", func() bool {
		metrics = kubectl(t, c.kubeconfig, "get", "--raw", "/api/v1/nodes/"+c.node+"/proxy/metrics")
		return count(metrics, "kubelet_pod_start_duration_seconds_count") >= 1
	})
	for _, series := range []string{
		"kubelet_pod_start_sli_duration_seconds_count",
		`kubelet_pod_worker_duration_seconds_count{operation_type="create"}`,
		`kubelet_running_containers{container_state="running"}`,
	} {
		if v := count(metrics, series); v < 1 {
			t.Errorf("%s = %v, want at least 1", series, v)
		}
	}
	// Buckets as upstream's (0.5 s … 1 h) for the pod start histograms.
	if !regexp.MustCompile(`kubelet_pod_start_duration_seconds_bucket\{le="3600"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no le=3600 bucket with the start in:\n%s", tail(metrics, 3000))
	}
}
