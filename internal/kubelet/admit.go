package kubelet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// podRequests sums a pod as the scheduler and upstream's admission do:
// the larger of the regular containers' sum (plus sidecars) and each init
// container's request at its point in the sequence, plus overhead.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	if pod.Spec.Resources != nil && len(pod.Spec.Resources.Requests) > 0 {
		return pod.Spec.Resources.Requests.DeepCopy()
	}
	sum := corev1.ResourceList{}
	add := func(into corev1.ResourceList, l corev1.ResourceList) {
		for n, q := range l {
			v := into[n]
			v.Add(q)
			into[n] = v
		}
	}
	for i := range pod.Spec.Containers {
		add(sum, pod.Spec.Containers[i].Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sum, c.Resources.Requests)
			add(sidecars, c.Resources.Requests)
			continue
		}
		peak := sidecars.DeepCopy()
		add(peak, c.Resources.Requests)
		for n, q := range peak {
			if cur := sum[n]; q.Cmp(cur) > 0 {
				sum[n] = q
			}
		}
	}
	add(sum, pod.Spec.Overhead)
	return sum
}

// fits reports, as upstream's admission, the first resource the pod does
// not fit in: its reason (OutOfcpu, OutOfmemory, OutOfpods, ..., NodePorts
// for a host port another pod holds) and message; empty when it fits.
func fits(pod *corev1.Pod, others []*corev1.Pod, allocatable corev1.ResourceList) (string, string) {
	if pods, ok := allocatable[corev1.ResourcePods]; ok && int64(len(others))+1 > pods.Value() {
		return "OutOfpods", fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(others), pods.Value())
	}
	want := podRequests(pod)
	used := corev1.ResourceList{}
	for _, p := range others {
		for n, q := range podRequests(p) {
			v := used[n]
			v.Add(q)
			used[n] = v
		}
	}
	order := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	for n := range want {
		if n != corev1.ResourceCPU && n != corev1.ResourceMemory && n != corev1.ResourceEphemeralStorage {
			order = append(order, n)
		}
	}
	for _, n := range order {
		req, ok := want[n]
		if !ok || req.IsZero() {
			continue
		}
		capQ, known := allocatable[n]
		if !known && n != corev1.ResourceCPU && n != corev1.ResourceMemory && n != corev1.ResourceEphemeralStorage {
			// An extended resource the node does not have.
			capQ = corev1.ResourceList{}[n]
		}
		u := used[n]
		total := u.DeepCopy()
		total.Add(req)
		if total.Cmp(capQ) > 0 {
			r, uv, cv := req.Value(), u.Value(), capQ.Value()
			if n == corev1.ResourceCPU {
				r, uv, cv = req.MilliValue(), u.MilliValue(), capQ.MilliValue()
			}
			return "OutOf" + string(n), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", n, r, uv, cv)
		}
	}
	// Host ports, as upstream's NodePorts predicate: a pod bound here by
	// name (past the scheduler) may ask for one another pod holds.
	if hostPortsConflict(pod, others) {
		return "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	}
	return "", ""
}

// hostPortsConflict: a host port the pod asks for is held by another pod on
// the same protocol and an overlapping address (0.0.0.0 or empty overlaps
// every address).
func hostPortsConflict(pod *corev1.Pod, others []*corev1.Pod) bool {
	type hostPort struct {
		ip       string
		protocol corev1.Protocol
		port     int32
	}
	ports := func(p *corev1.Pod) []hostPort {
		var out []hostPort
		for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range list {
				for _, cp := range c.Ports {
					if cp.HostPort <= 0 {
						continue
					}
					ip, proto := cp.HostIP, cp.Protocol
					if ip == "" {
						ip = "0.0.0.0"
					}
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					out = append(out, hostPort{ip, proto, cp.HostPort})
				}
			}
		}
		return out
	}
	want := ports(pod)
	if len(want) == 0 {
		return false
	}
	for _, o := range others {
		for _, held := range ports(o) {
			for _, w := range want {
				if w.port == held.port && w.protocol == held.protocol && (w.ip == held.ip || w.ip == "0.0.0.0" || held.ip == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}
