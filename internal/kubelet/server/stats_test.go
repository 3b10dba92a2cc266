package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet"
)

// The agent hands the kubelet API's Metrics to the kubelet.
var _ kubelet.Metrics = (*Metrics)(nil)

func TestMetricsAndStats(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, "", "")
	labels := map[string]string{"io.kubernetes.pod.uid": podUID, "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default"}
	h.runtime.SetStats(&runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: containerID, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Labels: labels},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: 1, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: 2_500_000_000}},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: 1, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 4096}, UsageBytes: &runtimeapi.UInt64Value{Value: 8192}},
	})
	c := h.httpClient(t)
	// One CRI call through the instrumented runtime before scraping.
	if _, err := h.srv.runtime.ListContainers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}

	// What the kubelet reports through kubelet.Metrics.
	h.metrics.ObservePodStart(1500 * time.Millisecond)
	h.metrics.ObservePodStartSLI(700 * time.Millisecond)
	h.metrics.ObservePodWorker("create", 30*time.Millisecond)
	h.metrics.IncEviction("memory.available")
	h.metrics.IncImageGC("space")
	h.metrics.IncImageGC("space")

	code, body := get(t, c, h.base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`kubelet_pod_start_duration_seconds_bucket{le="1"} 0`,
		`kubelet_pod_start_duration_seconds_bucket{le="2"} 1`,
		"kubelet_pod_start_duration_seconds_count 1",
		`kubelet_pod_start_sli_duration_seconds_bucket{le="0.5"} 0`,
		`kubelet_pod_start_sli_duration_seconds_bucket{le="1"} 1`,
		`kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="0.05"} 1`,
		`kubelet_evictions{eviction_signal="memory.available"} 1`,
		`kubelet_image_garbage_collected_total{reason="space"} 2`,
		"kubelet_running_pods 1",
		`kubelet_running_containers{container_state="running"} 1`,
		`kubelet_running_containers{container_state="exited"} 1`,
		`kubelet_runtime_operations_total{operation_type="list_containers"}`,
		`kubelet_node_name{node="node-a"} 1`,
		"kubelet_pod_start_duration_seconds_bucket",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	code, body = get(t, c, h.base+"/metrics/cadvisor")
	if code != http.StatusOK {
		t.Fatalf("/metrics/cadvisor = %d", code)
	}
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="app",cpu="total",id="c0ffee",image="busybox",name="c0ffee",namespace="default",pod="web"} 2.5`,
		`container_memory_working_set_bytes{container="app",id="c0ffee",image="busybox",name="c0ffee",namespace="default",pod="web"} 4096`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/cadvisor lacks %q in\n%s", want, body)
		}
	}

	code, body = get(t, c, h.base+"/metrics/resource")
	if code != http.StatusOK {
		t.Fatalf("/metrics/resource = %d", code)
	}
	for _, want := range []string{
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 0`,
		`container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 4096 0`,
		`pod_memory_working_set_bytes{namespace="default",pod="web"} 4096`,
		"node_memory_working_set_bytes ",
		"resource_scrape_error 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/resource lacks %q in\n%s", want, body)
		}
	}

	code, body = get(t, c, h.base+"/stats/summary")
	if code != http.StatusOK {
		t.Fatalf("/stats/summary = %d", code)
	}
	var sum Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Node.NodeName != "node-a" || sum.Node.Memory == nil || sum.Node.CPU == nil || sum.Node.Fs == nil {
		t.Errorf("node stats = %+v", sum.Node)
	}
	type pod struct {
		Ref        PodReference
		Containers []string
		CPU, WS    uint64
	}
	var got []pod
	for _, p := range sum.Pods {
		gp := pod{Ref: p.PodRef}
		for _, c := range p.Containers {
			gp.Containers = append(gp.Containers, c.Name)
		}
		if p.CPU != nil && p.Memory != nil {
			gp.CPU, gp.WS = *p.CPU.UsageCoreNanoSeconds, *p.Memory.WorkingSetBytes
		}
		got = append(got, gp)
	}
	want := []pod{{Ref: PodReference{Name: "web", Namespace: "default", UID: podUID}, Containers: []string{"app"}, CPU: 2_500_000_000, WS: 4096}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}
