package kubelet

import "time"

// Metrics receives what the kubelet measures. internal/kubelet/server's
// Metrics implements it with upstream's metric names
// (kubelet_pod_start_duration_seconds, kubelet_pod_start_sli_duration_seconds,
// kubelet_pod_worker_duration_seconds, kubelet_evictions,
// kubelet_image_garbage_collected_total).
type Metrics interface {
	// ObservePodStart: from the kubelet first seeing a pod to all its
	// containers running.
	ObservePodStart(d time.Duration)
	// ObservePodStartSLI: from the pod's creation to all its containers
	// running, less the time spent pulling images.
	ObservePodStartSLI(d time.Duration)
	// ObservePodWorker: one pod sync; op is create, update or sync.
	ObservePodWorker(op string, d time.Duration)
	// IncEviction counts a pod evicted for the signal.
	IncEviction(signal string)
	// IncImageGC counts an image removed; reason is "space" or "age".
	IncImageGC(reason string)
}

type noMetrics struct{}

func (noMetrics) ObservePodStart(time.Duration)          {}
func (noMetrics) ObservePodStartSLI(time.Duration)       {}
func (noMetrics) ObservePodWorker(string, time.Duration) {}
func (noMetrics) IncEviction(string)                     {}
func (noMetrics) IncImageGC(string)                      {}
