package kubelet

import (
	corev1 "k8s.io/api/core/v1"
)

// recordPodStart takes the pod start metrics once, when the status the
// kubelet writes first says Running: kubelet_pod_start_duration_seconds
// from the kubelet's first sync of the pod, and
// kubelet_pod_start_sli_duration_seconds from the pod's creation less the
// time spent pulling images. A pod already running when the kubelet first
// saw it (adopted after a restart) is not counted.
func (k *Kubelet) recordPodStart(pod *corev1.Pod, status corev1.PodStatus, ps *podSync) {
	if ps.startRecorded {
		return
	}
	if !ps.synced {
		ps.synced = true
		if pod.Status.Phase == corev1.PodRunning {
			ps.startRecorded = true
			return
		}
	}
	if status.Phase != corev1.PodRunning {
		return
	}
	ps.startRecorded = true
	now := k.clock.Now()
	k.metrics.ObservePodStart(now.Sub(ps.firstSeen))
	if sli := now.Sub(pod.CreationTimestamp.Time) - ps.pulling; !pod.CreationTimestamp.IsZero() && sli >= 0 {
		k.metrics.ObservePodStartSLI(sli)
	}
}
