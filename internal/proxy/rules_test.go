package proxy

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt golden files")

var (
	clusterCIDR = netip.MustParsePrefix("10.42.0.0/16")
	serviceCIDR = netip.MustParsePrefix("10.43.0.0/16")
)

// svc builds a Service; mutate adjusts it.
func svc(ns, name, ip string, ports []v1.ServicePort, mutate ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func tcp(name string, port int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: port}
}

type ep struct {
	ip, node           string
	notReady, term     bool
	servingWhenUnready bool
}

// slice builds one EndpointSlice of service ns/name with one port.
func slice(ns, name, portName string, proto v1.Protocol, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-" + portName, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(proto), Port: ptr.To(port)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{e.ip},
			NodeName:  ptr.To(e.node),
			Conditions: discoveryv1.EndpointConditions{
				Ready:       ptr.To(!e.notReady),
				Serving:     ptr.To(!e.notReady || e.servingWhenUnready),
				Terminating: ptr.To(e.term),
			},
		})
	}
	return s
}

func TestComputeGolden(t *testing.T) {
	three := []ep{{ip: "10.42.1.2", node: "n1"}, {ip: "10.42.2.2", node: "n2"}, {ip: "10.42.1.3", node: "n1"}}
	tests := []struct {
		name     string
		services []*v1.Service
		slices   []*discoveryv1.EndpointSlice
		// input adjusts what BuildInput leaves to the proxy's options.
		input func(*Input)
		// v6 builds the ip6 table (IPv6 cluster and service CIDRs).
		v6 bool
	}{
		{name: "empty"},
		{
			name:     "clusterip-three-endpoints",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)})},
			slices:   []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, three...)},
		},
		{
			name: "single-endpoint-udp-and-sctp",
			services: []*v1.Service{svc("kube-system", "kube-dns", "10.43.0.10", []v1.ServicePort{
				{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: v1.ProtocolTCP, Port: 53}, {Name: "sig", Protocol: v1.ProtocolSCTP, Port: 9}})},
			slices: []*discoveryv1.EndpointSlice{
				slice("kube-system", "kube-dns", "dns", v1.ProtocolUDP, 53, ep{ip: "192.168.1.5"}),
				slice("kube-system", "kube-dns", "dns-tcp", v1.ProtocolTCP, 53, ep{ip: "192.168.1.5"}),
				slice("kube-system", "kube-dns", "sig", v1.ProtocolSCTP, 9, ep{ip: "192.168.1.5"}),
			},
		},
		{
			name:     "no-endpoints-rejects",
			services: []*v1.Service{svc("default", "empty", "10.43.0.30", []v1.ServicePort{tcp("", 80)}, nodePort(30030))},
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "empty", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.9", notReady: true}),
			},
		},
		{
			name:     "port-name-matches-no-slice-port",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)})},
			slices:   []*discoveryv1.EndpointSlice{slice("default", "web", "https", v1.ProtocolTCP, 8443, three...)},
		},
		{
			name:     "terminating-only-when-none-ready",
			services: []*v1.Service{svc("default", "a", "10.43.0.21", []v1.ServicePort{tcp("", 80)}), svc("default", "b", "10.43.0.22", []v1.ServicePort{tcp("", 80)})},
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "a", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.2"}, ep{ip: "10.42.1.3", notReady: true, term: true, servingWhenUnready: true}),
				slice("default", "b", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.4", notReady: true, term: true, servingWhenUnready: true}, ep{ip: "10.42.1.5", notReady: true, term: true}),
			},
		},
		{
			name:     "nodeport-cluster-policy",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080))},
			slices:   []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, three...)},
		},
		{
			name: "loadbalancer-local-policy",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080), func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.50.1"}}
			})},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, three...)},
		},
		{
			name: "local-policy-no-local-endpoints-drops",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080), func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			})},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, ep{ip: "10.42.2.2", node: "n2"})},
		},
		{
			// Only 192.168.7.0/24 (and the node, whose address is in it)
			// reach the load-balancer address; the NodePort is open to all.
			name: "loadbalancer-source-ranges",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080), func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.7.0/24", "10.1.2.3/32"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.50.1"}}
			}), svc("default", "annotated", "10.43.0.21", []v1.ServicePort{tcp("http", 81)}, nodePort(30081), func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "10.9.0.0/16, 10.8.0.0/16"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.50.1"}}
			})},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, three...),
				slice("default", "annotated", "http", v1.ProtocolTCP, 8080, three...)},
			input: func(in *Input) { in.NodeIP = netip.MustParseAddr("192.168.7.10") },
		},
		{
			name:     "nodeport-addresses",
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080))},
			slices:   []*discoveryv1.EndpointSlice{slice("default", "web", "http", v1.ProtocolTCP, 8080, three...)},
			input: func(in *Input) {
				in.NodePortAddresses = []netip.Addr{netip.MustParseAddr("192.168.7.10"), netip.MustParseAddr("10.0.0.4")}
			},
		},
		{
			// The IPv6 half of a dual-stack Service (its IPv4 ClusterIP and
			// slice are left to the ip table), with affinity, a load
			// balancer with source ranges and a NodePort.
			name: "ipv6-dual-stack",
			v6:   true,
			services: []*v1.Service{svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080), func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIPs = []string{"10.43.0.20", "fd00:43::20"}
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.7.0/24", "fd00:7::/64"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.168.50.1"}, {IP: "fd00:50::1"}}
			}), svc("default", "sticky", "fd00:43::40", []v1.ServicePort{tcp("", 80)}, func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			})},
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "web", "http", v1.ProtocolTCP, 8080, three...),
				func() *discoveryv1.EndpointSlice {
					s := slice("default", "web", "http", v1.ProtocolTCP, 8080, ep{ip: "fd00:42:1::2", node: "n1"}, ep{ip: "fd00:42:2::2", node: "n2"})
					s.Name, s.AddressType = "web-v6", discoveryv1.AddressTypeIPv6
					return s
				}(),
				func() *discoveryv1.EndpointSlice {
					s := slice("default", "sticky", "", v1.ProtocolTCP, 8080, ep{ip: "fd00:42:1::3", node: "n1"})
					s.AddressType = discoveryv1.AddressTypeIPv6
					return s
				}(),
			},
		},
		{
			name: "session-affinity",
			services: []*v1.Service{svc("default", "sticky", "10.43.0.40", []v1.ServicePort{tcp("", 80)}, func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			})},
			slices: []*discoveryv1.EndpointSlice{slice("default", "sticky", "", v1.ProtocolTCP, 8080, ep{ip: "10.42.1.2"}, ep{ip: "10.42.1.3"})},
		},
		{
			name: "headless-and-externalname-ignored",
			services: []*v1.Service{
				svc("default", "headless", "None", []v1.ServicePort{tcp("", 80)}),
				svc("default", "ext", "", nil, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeExternalName; s.Spec.ExternalName = "example.com" }),
			},
			slices: []*discoveryv1.EndpointSlice{slice("default", "headless", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.2"})},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			build := func() Input {
				cc, sc := clusterCIDR, serviceCIDR
				if tc.v6 {
					cc, sc = netip.MustParsePrefix("fd00:42::/48"), netip.MustParsePrefix("fd00:43::/112")
				}
				in := BuildInput(cc, sc, "n1", tc.services, tc.slices)
				if tc.input != nil {
					tc.input(&in)
				}
				return in
			}
			got := Compute(build()).Transaction(nil, nil)
			golden(t, filepath.Join("testdata", tc.name+".txt"), got)
			// The ruleset is deterministic.
			if again := Compute(build()).Transaction(nil, nil); again != got {
				t.Errorf("second Compute differs:\n%s", cmp.Diff(got, again))
			}
		})
	}
}

func nodePort(port int32) func(*v1.Service) {
	return func(s *v1.Service) {
		if s.Spec.Type == v1.ServiceTypeClusterIP {
			s.Spec.Type = v1.ServiceTypeNodePort
		}
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = port
		}
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestTransactionIncremental: a second sync rewrites only chains whose
// rules changed, refills the maps, and removes what is no longer wanted.
func TestTransactionIncremental(t *testing.T) {
	services := []*v1.Service{
		svc("default", "a", "10.43.0.21", []v1.ServicePort{tcp("", 80)}),
		svc("default", "b", "10.43.0.22", []v1.ServicePort{tcp("", 80)}, func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
	}
	slices := []*discoveryv1.EndpointSlice{
		slice("default", "a", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.2"}),
		slice("default", "b", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.4"}),
	}
	first := Compute(BuildInput(clusterCIDR, serviceCIDR, "n1", services, slices))

	if tx := first.Transaction(first, nil); strings.Contains(tx, "add rule") {
		t.Errorf("no change rewrote rules:\n%s", tx)
	}

	// a gets a second endpoint; b is deleted.
	slices[0] = slice("default", "a", "", v1.ProtocolTCP, 80, ep{ip: "10.42.1.2"}, ep{ip: "10.42.1.3"})
	second := Compute(BuildInput(clusterCIDR, serviceCIDR, "n1", services[:1], slices[:1]))
	tx := second.Transaction(first, nil)
	var flushed, deleted []string
	for _, line := range strings.Split(tx, "\n") {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "flush" && f[1] == "chain" {
			flushed = append(flushed, strings.SplitN(f[4], "-", 3)[0])
		}
		if len(f) == 5 && f[0] == "delete" {
			deleted = append(deleted, f[1]+" "+strings.SplitN(f[4], "-", 3)[0])
		}
	}
	// service-…-a changed; b's service and endpoint chains are flushed
	// before they are deleted; b's affinity set goes.
	if diff := cmp.Diff([]string{"service", "endpoint", "service"}, flushed); diff != "" {
		t.Errorf("flushed chains (-want +got):\n%s\n%s", diff, tx)
	}
	if diff := cmp.Diff([]string{"chain endpoint", "chain service", "set affinity"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s\n%s", diff, tx)
	}
}
