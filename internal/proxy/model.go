package proxy

import (
	"net/netip"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Input is everything one sync programs, for one IP family.
type Input struct {
	// IPv6 says the input is for the ip6 table: every address in it is
	// IPv6.
	IPv6 bool
	// ClusterCIDR is the pod network; traffic to a ClusterIP from outside
	// it is masqueraded, and pod traffic to a NodePort with
	// externalTrafficPolicy Local is short-circuited to every endpoint.
	ClusterCIDR netip.Prefix
	// ServiceCIDRs: traffic to an address in them that is no ClusterIP is
	// dropped (the configured service range and the cluster's ServiceCIDR
	// objects of this family). Empty means no such rule.
	ServiceCIDRs []netip.Prefix
	// NodeIP is the node's primary address: when a Service's
	// loadBalancerSourceRanges contain it, the node may reach the Service's
	// load-balancer addresses (whose traffic from the node comes from
	// them when they are local), as upstream allows.
	NodeIP netip.Addr
	// NodePortAddresses, when not nil, are the only local addresses
	// NodePorts answer on (--nodeport-addresses); nil means every local
	// address but 127.0.0.0/8.
	NodePortAddresses []netip.Addr
	// Ports are the service ports to program, in any order.
	Ports []ServicePort
}

// ServicePort is one port of one Service with its endpoints.
type ServicePort struct {
	Namespace, Name string
	// PortName is the service port's name ("" for a single unnamed port).
	PortName string
	Protocol v1.Protocol
	// ClusterIP is invalid for headless Services (nothing is programmed
	// for them except node ports, which they cannot have).
	ClusterIP netip.Addr
	Port      int32
	NodePort  int32
	// ExternalIPs and LoadBalancerIPs are handled as external traffic.
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// ExternalLocal and InternalLocal are the traffic policies.
	ExternalLocal bool
	InternalLocal bool
	// AffinitySeconds > 0 means sessionAffinity ClientIP with that timeout.
	AffinitySeconds int32
	// SourceRanges are a LoadBalancer Service's loadBalancerSourceRanges:
	// when set, only those sources reach its load-balancer addresses
	// (NodePorts are not subject to them, as upstream).
	SourceRanges []netip.Prefix
	// HealthCheckNodePort is the port of the Service's health check
	// (LoadBalancer with externalTrafficPolicy Local), 0 when none.
	HealthCheckNodePort int32
	Endpoints           []Endpoint
}

// Endpoint is one address and port behind a service port.
type Endpoint struct {
	IP   netip.Addr
	Port int32
	// Local says the endpoint runs on this node.
	Local       bool
	Ready       bool
	Serving     bool
	Terminating bool
}

// String is "ip:port".
func (e Endpoint) String() string { return netip.AddrPortFrom(e.IP, uint16(e.Port)).String() }

// key names the service port: ns/name/proto/portname.
func (p ServicePort) key() string {
	return p.Namespace + "/" + p.Name + "/" + strings.ToLower(string(p.Protocol)) + "/" + p.PortName
}

func (p ServicePort) externallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerIPs) > 0
}

// usable picks the endpoints traffic may go to, as upstream does: the ready
// ones; if there are none, the serving terminating ones (so that a rolling
// update that ends with every pod terminating keeps serving).
func usable(eps []Endpoint) []Endpoint {
	var ready, terminating []Endpoint
	for _, ep := range eps {
		switch {
		case ep.Ready:
			ready = append(ready, ep)
		case ep.Serving && ep.Terminating:
			terminating = append(terminating, ep)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

// sourceRanges are the loadBalancerSourceRanges of svc of one family, or when the
// field is empty those of the annotation
// service.beta.kubernetes.io/load-balancer-source-ranges (comma-separated),
// as upstream reads them. Entries that do not parse are ignored (the API
// server validates the field).
func sourceRanges(svc *v1.Service, v6 bool) []netip.Prefix {
	raw := svc.Spec.LoadBalancerSourceRanges
	if len(raw) == 0 {
		if a := strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]); a != "" {
			raw = strings.Split(a, ",")
		}
	}
	var out []netip.Prefix
	for _, r := range raw {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && p.Addr().Is6() == v6 {
			out = append(out, p.Masked())
		}
	}
	return out
}

// BuildInput converts Services and their EndpointSlices into an Input.
// nodeName says which endpoints are local. Services without a ClusterIP
// (headless, ExternalName) are left out; an endpoint port is matched to a
// service port by name and protocol, as upstream does; slices of another
// address family than clusterCIDR's are ignored: the input is for that
// family's table (a dual-stack Service is in both, by its ClusterIP of
// each family).
func BuildInput(clusterCIDR, serviceCIDR netip.Prefix, nodeName string, services []*v1.Service, slices []*discoveryv1.EndpointSlice) Input {
	v6 := clusterCIDR.Addr().Is6()
	in := Input{IPv6: v6, ClusterCIDR: clusterCIDR}
	if serviceCIDR.IsValid() {
		in.ServiceCIDRs = []netip.Prefix{serviceCIDR}
	}
	inFamily := func(a netip.Addr) bool { return a.IsValid() && a.Is6() == v6 && !a.Is4In6() }
	addrType := discoveryv1.AddressTypeIPv4
	if v6 {
		addrType = discoveryv1.AddressTypeIPv6
	}
	byService := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range slices {
		if s.AddressType != addrType {
			continue
		}
		name := s.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		byService[s.Namespace+"/"+name] = append(byService[s.Namespace+"/"+name], s)
	}
	for _, svc := range services {
		if svc.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		var cip netip.Addr
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil && inFamily(a) {
				cip = a
				break
			}
		}
		if !cip.IsValid() {
			continue // headless, or no ClusterIP of this family
		}
		sl := byService[svc.Namespace+"/"+svc.Name]
		sort.Slice(sl, func(i, j int) bool { return sl[i].Name < sl[j].Name })
		for _, sp := range svc.Spec.Ports {
			p := ServicePort{
				Namespace: svc.Namespace, Name: svc.Name, PortName: sp.Name,
				Protocol: sp.Protocol, ClusterIP: cip, Port: sp.Port,
				ExternalLocal: svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
				InternalLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
			}
			if p.Protocol == "" {
				p.Protocol = v1.ProtocolTCP
			}
			if svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer {
				p.NodePort = sp.NodePort
			}
			for _, s := range svc.Spec.ExternalIPs {
				if a, err := netip.ParseAddr(s); err == nil && inFamily(a) {
					p.ExternalIPs = append(p.ExternalIPs, a)
				}
			}
			if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
				for _, ing := range svc.Status.LoadBalancer.Ingress {
					if a, err := netip.ParseAddr(ing.IP); err == nil && inFamily(a) {
						p.LoadBalancerIPs = append(p.LoadBalancerIPs, a)
					}
				}
				p.SourceRanges = sourceRanges(svc, v6)
				if p.ExternalLocal {
					p.HealthCheckNodePort = svc.Spec.HealthCheckNodePort
				}
			} else {
				p.ExternalLocal = false
			}
			if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
				p.AffinitySeconds = v1.DefaultClientIPServiceAffinitySeconds
				if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
					p.AffinitySeconds = *c.ClientIP.TimeoutSeconds
				}
			}
			seen := map[netip.AddrPort]bool{}
			for _, s := range sl {
				port := int32(-1)
				for _, ep := range s.Ports {
					name, proto := "", v1.ProtocolTCP
					if ep.Name != nil {
						name = *ep.Name
					}
					if ep.Protocol != nil {
						proto = *ep.Protocol
					}
					if name == sp.Name && proto == p.Protocol && ep.Port != nil {
						port = *ep.Port
						break
					}
				}
				if port <= 0 {
					continue
				}
				for _, e := range s.Endpoints {
					ready := e.Conditions.Ready == nil || *e.Conditions.Ready
					serving := ready
					if e.Conditions.Serving != nil {
						serving = *e.Conditions.Serving
					}
					term := e.Conditions.Terminating != nil && *e.Conditions.Terminating
					local := e.NodeName != nil && *e.NodeName == nodeName && nodeName != ""
					for _, a := range e.Addresses {
						ip, err := netip.ParseAddr(a)
						if err != nil || !inFamily(ip) {
							continue
						}
						ap := netip.AddrPortFrom(ip, uint16(port))
						if seen[ap] {
							continue
						}
						seen[ap] = true
						p.Endpoints = append(p.Endpoints, Endpoint{IP: ip, Port: port, Local: local, Ready: ready, Serving: serving, Terminating: term})
					}
				}
			}
			sort.Slice(p.Endpoints, func(i, j int) bool {
				a, b := p.Endpoints[i], p.Endpoints[j]
				if c := a.IP.Compare(b.IP); c != 0 {
					return c < 0
				}
				return a.Port < b.Port
			})
			in.Ports = append(in.Ports, p)
		}
	}
	return in
}
