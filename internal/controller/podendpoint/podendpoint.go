// Package podendpoint decides what a pod contributes to a Service's
// endpoints: whether it is an endpoint at all, whether it is ready, and
// which port each service port resolves to on it. Both endpoint
// controllers (endpoints, endpointslice) use it, so that they agree.
package podendpoint

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Include says whether a pod belongs in a service's endpoints at all:
// it has an address, is not terminated for good, and (unless
// includeTerminating) is not being deleted.
func Include(pod *corev1.Pod, includeTerminating bool) bool {
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	if !includeTerminating && pod.DeletionTimestamp != nil {
		return false
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded
	case corev1.RestartPolicyOnFailure:
		return pod.Status.Phase != corev1.PodSucceeded
	}
	return true
}

// Ready says whether the pod's Ready condition is True.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// FindPort resolves a service port's targetPort on a pod: a number is
// used as is, a name is looked up among the containers' ports of the
// same protocol.
func FindPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, error) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				if p.Name == tp.StrVal && proto == sp.Protocol {
					return p.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("no container port named %q", tp.StrVal)
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal, nil
	}
	return sp.Port, nil
}
