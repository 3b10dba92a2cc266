package service

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultClientIPTimeoutSeconds is the default sticky-session timeout.
const DefaultClientIPTimeoutSeconds int32 = 10800

// Default applies upstream's v1 defaults to svc for a cluster whose
// service CIDR is of family.
func Default(svc *corev1.Service, family corev1.IPFamily) {
	spec := &svc.Spec
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if spec.SessionAffinity == corev1.ServiceAffinityNone {
		// A config left over from ClientIP (an update that switches
		// affinity off keeps it) is dropped, as upstream's defaulting.
		spec.SessionAffinityConfig = nil
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if spec.SessionAffinityConfig == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP == nil {
			spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			t := DefaultClientIPTimeoutSeconds
			spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = &t
		}
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if externallyAccessible(svc) && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if spec.Type != corev1.ServiceTypeExternalName && spec.InternalTrafficPolicy == nil {
		p := corev1.ServiceInternalTrafficPolicyCluster
		spec.InternalTrafficPolicy = &p
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		t := true
		spec.AllocateLoadBalancerNodePorts = &t
	}
	defaultIPFamilies(svc, family)
}

// defaultIPFamilies fills ipFamilyPolicy and ipFamilies. ExternalName
// services have neither. Headless services without a selector get
// RequireDualStack, as upstream gives them every family the cluster has.
func defaultIPFamilies(svc *corev1.Service, family corev1.IPFamily) {
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		spec.IPFamilies = nil
		spec.IPFamilyPolicy = nil
		return
	}
	if spec.IPFamilyPolicy == nil {
		p := corev1.IPFamilyPolicySingleStack
		if isHeadless(svc) && len(spec.Selector) == 0 {
			p = corev1.IPFamilyPolicyRequireDualStack
		}
		spec.IPFamilyPolicy = &p
	}
	if len(spec.IPFamilies) == 0 {
		f := family
		if len(spec.ClusterIPs) > 0 {
			if a, err := netip.ParseAddr(spec.ClusterIPs[0]); err == nil {
				f = familyOf(a)
			}
		}
		spec.IPFamilies = []corev1.IPFamily{f}
	}
}

func familyOf(a netip.Addr) corev1.IPFamily {
	if a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// normalizeClusterIPs makes clusterIP and clusterIPs[0] agree when only one
// of them was given.
func normalizeClusterIPs(svc *corev1.Service) {
	spec := &svc.Spec
	switch {
	case spec.ClusterIP != "" && len(spec.ClusterIPs) == 0:
		spec.ClusterIPs = []string{spec.ClusterIP}
	case spec.ClusterIP == "" && len(spec.ClusterIPs) > 0:
		spec.ClusterIP = spec.ClusterIPs[0]
	}
}

// keepAllocated copies allocated values from old into svc where the client
// left them out and both versions need them.
func keepAllocated(svc, old *corev1.Service) {
	if needsClusterIP(old) && needsClusterIP(svc) && svc.Spec.ClusterIP == "" && len(svc.Spec.ClusterIPs) == 0 {
		svc.Spec.ClusterIP = old.Spec.ClusterIP
		svc.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
	}
	if needsNodePorts(old) && needsNodePorts(svc) {
		type key struct {
			port     int32
			protocol corev1.Protocol
		}
		oldPorts := map[key]int32{}
		for _, p := range old.Spec.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if p.NodePort != 0 {
				oldPorts[key{p.Port, proto}] = p.NodePort
			}
		}
		for i := range svc.Spec.Ports {
			p := &svc.Spec.Ports[i]
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if p.NodePort == 0 {
				p.NodePort = oldPorts[key{p.Port, proto}]
			}
		}
	}
	if needsHealthCheckNodePort(old) && needsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == 0 {
		svc.Spec.HealthCheckNodePort = old.Spec.HealthCheckNodePort
	}
}

// dropTypeDependent clears values the new type does not use, when the
// client left them as they were (e.g. NodePorts after a change from
// NodePort to ClusterIP).
func dropTypeDependent(svc, old *corev1.Service) {
	if !needsClusterIP(svc) && needsClusterIP(old) && sameStrings(svc.Spec.ClusterIPs, old.Spec.ClusterIPs) && svc.Spec.ClusterIP == old.Spec.ClusterIP {
		svc.Spec.ClusterIP = ""
		svc.Spec.ClusterIPs = nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName {
		if isHeadless(svc) && isHeadless(old) {
			svc.Spec.ClusterIP = ""
			svc.Spec.ClusterIPs = nil
		}
		svc.Spec.IPFamilies = nil
		svc.Spec.IPFamilyPolicy = nil
	}
	if !needsNodePorts(svc) && needsNodePorts(old) {
		oldPorts := map[int32]bool{}
		for _, p := range old.Spec.Ports {
			oldPorts[p.NodePort] = true
		}
		keep := svc.Spec.Type == corev1.ServiceTypeLoadBalancer // explicit ports stay on LB without allocation
		for i := range svc.Spec.Ports {
			if !keep && oldPorts[svc.Spec.Ports[i].NodePort] {
				svc.Spec.Ports[i].NodePort = 0
			}
		}
	}
	if !needsHealthCheckNodePort(svc) && svc.Spec.HealthCheckNodePort == old.Spec.HealthCheckNodePort {
		svc.Spec.HealthCheckNodePort = 0
	}
	if !externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == old.Spec.ExternalTrafficPolicy {
		svc.Spec.ExternalTrafficPolicy = ""
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && old.Spec.Type == corev1.ServiceTypeLoadBalancer {
		if equalBoolPtr(svc.Spec.AllocateLoadBalancerNodePorts, old.Spec.AllocateLoadBalancerNodePorts) {
			svc.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if equalStringPtr(svc.Spec.LoadBalancerClass, old.Spec.LoadBalancerClass) {
			svc.Spec.LoadBalancerClass = nil
		}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName && svc.Spec.InternalTrafficPolicy != nil && equalITP(svc.Spec.InternalTrafficPolicy, old.Spec.InternalTrafficPolicy) {
		svc.Spec.InternalTrafficPolicy = nil
	}
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalBoolPtr(a, b *bool) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func equalStringPtr(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func equalITP(a, b *corev1.ServiceInternalTrafficPolicy) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone || (len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone)
}

// needsClusterIP: every type but ExternalName gets an IP unless headless.
func needsClusterIP(svc *corev1.Service) bool {
	return svc.Spec.Type != corev1.ServiceTypeExternalName && !isHeadless(svc)
}

// needsNodePorts: NodePort services, and LoadBalancer services unless
// allocateLoadBalancerNodePorts is false.
func needsNodePorts(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func needsHealthCheckNodePort(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

// externallyAccessible: NodePort, LoadBalancer, or ClusterIP with external IPs.
func externallyAccessible(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return true
	case corev1.ServiceTypeClusterIP:
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}
