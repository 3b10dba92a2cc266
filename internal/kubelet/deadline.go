package kubelet

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A pod's spec.activeDeadlineSeconds, as upstream's kubelet enforces it:
// counted from the pod's status.startTime, and once past the pod is killed
// (with its termination grace) and ends Failed with reason
// DeadlineExceeded. Lowering the deadline on a running pod (the field may
// only shrink) takes effect at the next sync, which the update triggers.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// untilActiveDeadline is how long the pod has left; ok is false when it has
// no deadline or has not started.
func (k *Kubelet) untilActiveDeadline(pod *corev1.Pod, ps *podSync) (time.Duration, bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return 0, false
	}
	start := pod.Status.StartTime
	if ps.lastStatus != nil && ps.lastStatus.StartTime != nil {
		start = ps.lastStatus.StartTime // ours, when the informer lags
	}
	if start == nil {
		return 0, false
	}
	deadline := start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	return deadline.Sub(k.clock.Now()), true
}

// checkActiveDeadline asks for the pod's end, as an eviction does, once its
// deadline has passed.
func (k *Kubelet) checkActiveDeadline(pod *corev1.Pod, ps *podSync) {
	if ps.terminated || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	left, ok := k.untilActiveDeadline(pod, ps)
	if !ok || left > 0 {
		return
	}
	k.mu.Lock()
	if ps.evict != nil {
		k.mu.Unlock()
		return
	}
	ps.evict = &evictRequest{grace: gracePeriodSpec(pod), message: messageDeadlineExceeded, reason: reasonDeadlineExceeded, noCondition: true}
	k.mu.Unlock()
	k.recorder.Event(pod, corev1.EventTypeWarning, reasonDeadlineExceeded, messageDeadlineExceeded)
}
