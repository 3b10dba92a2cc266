package kubelet

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Ephemeral containers (kubectl debug) are started once in the pod's
// running sandbox, after the regular containers, and never restarted
// (plan.Actions.EphemeralContainersToStart); their status is in
// status.ephemeralContainerStatuses (podstatus). One naming a
// targetContainerName joins that container's process namespace.

// ephemeralSpec returns the named ephemeral container as a Container, or
// nil.
func ephemeralSpec(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}

// targetNamespace puts an ephemeral container with a target into the
// target's PID namespace (CRI NamespaceMode_TARGET), as upstream does.
func (k *Kubelet) targetNamespace(ctx context.Context, pod *corev1.Pod, name string, sc *runtimeapi.LinuxContainerSecurityContext) {
	target := ""
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			target = pod.Spec.EphemeralContainers[i].TargetContainerName
		}
	}
	if target == "" || sc == nil || sc.NamespaceOptions == nil {
		return
	}
	id, running, err := k.ContainerID(ctx, pod.UID, target, false)
	if err != nil || !running {
		klog.FromContext(ctx).Info("Target container of an ephemeral container is not running; it gets its own process namespace",
			"container", name, "target", target, "err", err)
		return
	}
	sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
	sc.NamespaceOptions.TargetId = id
}
