package proxy

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestStaleUDPFlows(t *testing.T) {
	a, b := netip.MustParseAddr("10.42.1.2"), netip.MustParseAddr("10.42.1.3")
	port := func(proto v1.Protocol, nodePort int32, eps ...netip.Addr) ServicePort {
		p := ServicePort{Namespace: "ns", Name: "dns", Protocol: proto, ClusterIP: netip.MustParseAddr("10.43.0.10"), Port: 53, NodePort: nodePort}
		for _, ip := range eps {
			p.Endpoints = append(p.Endpoints, Endpoint{IP: ip, Port: 5353, Ready: true})
		}
		return p
	}
	tests := []struct {
		name       string
		prev, next []ServicePort
		want       []ConntrackFlow
	}{
		{name: "nothing removed", prev: []ServicePort{port(v1.ProtocolUDP, 0, a)}, next: []ServicePort{port(v1.ProtocolUDP, 0, a, b)}},
		{name: "tcp is left to the kernel", prev: []ServicePort{port(v1.ProtocolTCP, 0, a)}, next: []ServicePort{port(v1.ProtocolTCP, 0, b)}},
		{name: "an endpoint removed, with its node port", prev: []ServicePort{port(v1.ProtocolUDP, 30053, a, b)}, next: []ServicePort{port(v1.ProtocolUDP, 30053, b)},
			want: []ConntrackFlow{{Dst: netip.MustParseAddr("10.43.0.10"), DstPort: 53, Endpoint: a}, {DstPort: 30053, Endpoint: a}}},
		{name: "service deleted", prev: []ServicePort{port(v1.ProtocolUDP, 0, a)},
			want: []ConntrackFlow{{Dst: netip.MustParseAddr("10.43.0.10"), DstPort: 53, Endpoint: a}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := staleUDPFlows(Input{Ports: tc.prev}, Input{Ports: tc.next})
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
