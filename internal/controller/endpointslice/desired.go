package endpointslice

import (
	"fmt"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/skiff-sh/skiff/internal/controller/podendpoint"
)

// group is the endpoints of one address type and one port mapping: pods
// that resolve a named port differently go to different slices.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   map[string]discoveryv1.Endpoint // by endpointKey
}

// key identifies a group; it is stable for the same address type and ports.
func groupKey(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	b.WriteString(string(at))
	for _, p := range ports {
		fmt.Fprintf(&b, "|%s/%s/%d", deref(p.Name), derefProto(p.Protocol), derefInt(p.Port))
		if p.AppProtocol != nil {
			b.WriteString("/" + *p.AppProtocol)
		}
	}
	return b.String()
}

// endpointKey identifies an endpoint across updates: its pod's UID, else
// its first address.
func endpointKey(ep discoveryv1.Endpoint) string {
	if ep.TargetRef != nil && ep.TargetRef.UID != "" {
		return string(ep.TargetRef.UID)
	}
	if len(ep.Addresses) > 0 {
		return ep.Addresses[0]
	}
	return ""
}

// addressTypes are the slice address types a service gets, by its IP
// families (IPv4 when it names none).
func addressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	var out []discoveryv1.AddressType
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			out = append(out, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			out = append(out, discoveryv1.AddressTypeIPv6)
		}
	}
	if len(out) == 0 {
		if ip := net.ParseIP(svc.Spec.ClusterIP); ip != nil && ip.To4() == nil {
			return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
		}
		return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
	}
	return out
}

// podIP is the pod's address of the given type, or "".
func podIP(pod *corev1.Pod, at discoveryv1.AddressType) string {
	ips := []string{pod.Status.PodIP}
	for _, p := range pod.Status.PodIPs {
		ips = append(ips, p.IP)
	}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			continue
		}
		if (at == discoveryv1.AddressTypeIPv4) == (ip.To4() != nil) {
			return s
		}
	}
	return ""
}

// endpointPorts are the pod's resolved ports for the service, in the
// service's order; ports a pod cannot resolve are left out.
func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, err := podendpoint.FindPort(pod, sp)
		if err != nil {
			continue
		}
		name, proto := sp.Name, sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &n, Protocol: &proto, AppProtocol: sp.AppProtocol})
	}
	return out
}

// desiredGroups computes the endpoints of svc from the pods it selects;
// zoneOf gives a node's zone ("" when unknown).
func desiredGroups(svc *corev1.Service, pods []*corev1.Pod, zoneOf func(node string) string) map[string]*group {
	groups := map[string]*group{}
	for _, at := range addressTypes(svc) {
		for _, pod := range pods {
			if !podendpoint.Include(pod, true) {
				continue
			}
			ip := podIP(pod, at)
			if ip == "" {
				continue
			}
			ready := svc.Spec.PublishNotReadyAddresses || podendpoint.Ready(pod)
			terminating := pod.DeletionTimestamp != nil
			isReady := svc.Spec.PublishNotReadyAddresses || (ready && !terminating)
			ep := discoveryv1.Endpoint{
				Addresses:  []string{ip},
				Conditions: discoveryv1.EndpointConditions{Ready: &isReady, Serving: &ready, Terminating: &terminating},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.NodeName != "" {
				node := pod.Spec.NodeName
				ep.NodeName = &node
				if z := zoneOf(node); z != "" {
					ep.Zone = &z
				}
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
				h := pod.Spec.Hostname
				ep.Hostname = &h
			}
			ports := endpointPorts(svc, pod)
			k := groupKey(at, ports)
			g := groups[k]
			if g == nil {
				g = &group{addressType: at, ports: ports, endpoints: map[string]discoveryv1.Endpoint{}}
				groups[k] = g
			}
			g.endpoints[endpointKey(ep)] = ep
		}
	}
	return groups
}

func sortEndpoints(eps []discoveryv1.Endpoint) {
	sort.Slice(eps, func(i, j int) bool { return endpointKey(eps[i]) < endpointKey(eps[j]) })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefProto(p *corev1.Protocol) corev1.Protocol {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
