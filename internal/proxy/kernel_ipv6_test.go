package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
)

func dial6(ns, addr string) (string, error) {
	var got string
	err := netnstest.Run(ns, func() error {
		c, err := net.DialTimeout("tcp6", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

// slice6 is an IPv6 EndpointSlice of service ns/name with one port.
func slice6(ns, name, portName string, port int32, ips ...string) *discoveryv1.EndpointSlice {
	s := slice(ns, name, portName, v1.ProtocolTCP, port)
	s.Name += "-v6"
	s.AddressType = discoveryv1.AddressTypeIPv6
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("n1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// TestKernelIPv6: a dual-stack proxy programs table ip6 skiff-proxy too:
// a dual-stack Service answers on its IPv6 ClusterIP (spread over every
// endpoint, from the node and from a pod, itself included) and on its
// IPv4 one, its NodePort answers on the node's IPv6 address, and an IPv6
// Service without endpoints is refused at once.
func TestKernelIPv6(t *testing.T) {
	if err := netnstest.Available(); err != nil {
		t.Skipf("kernel test needs root, ip and nft: %v", err)
	}
	topo, err := netnstest.New(fmt.Sprintf("sk6%d", os.Getpid()), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Close)
	for i, pod := range topo.Pods {
		for _, addr := range []string{netnstest.PodIP(i+1) + ":8080", net.JoinHostPort(netnstest.PodIP6(i+1), "8080")} {
			ln, err := netnstest.Serve(pod, addr, fmt.Sprintf("pod%d", i+1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}
	}
	runner := NFT{Prefix: []string{"ip", "netns", "exec", topo.Node}}
	t.Cleanup(func() { _ = Cleanup(context.Background(), runner) })

	dual := svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080), func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"fd00:43::20", "10.43.0.20"}
		s.Spec.ClusterIP = "fd00:43::20"
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
		s.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	})
	empty := svc("default", "empty", "fd00:43::30", []v1.ServicePort{tcp("http", 80)}, func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"fd00:43::30"}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	})
	client := fake.NewClientset(dual, empty,
		slice6("default", "web", "http", 8080, netnstest.PodIP6(1), netnstest.PodIP6(2)),
		slice("default", "web", "http", v1.ProtocolTCP, 8080, ep{ip: netnstest.PodIP(1), node: "n1"}, ep{ip: netnstest.PodIP(2), node: "n1"}),
		slice6("default", "empty", "http", 8080))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(client, Options{NodeName: "n1", Runner: runner, MinSyncPeriod: 50 * time.Millisecond,
		ClusterCIDR6: netip.MustParsePrefix("fd00:42::/48"), ServiceCIDR6: netip.MustParsePrefix("fd00:43::/112")})
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("proxier stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("proxier not ready in 20 s")
	}

	spread6 := func(t *testing.T, ns, addr string) map[string]int {
		seen := map[string]int{}
		for i := 0; i < 40; i++ {
			got, err := dial6(ns, addr)
			if err != nil {
				t.Fatalf("dial %s from %s: %v", addr, ns, err)
			}
			seen[got]++
		}
		return seen
	}
	t.Run("the ipv6 clusterip spreads over the endpoints", func(t *testing.T) {
		for _, ns := range []string{topo.Node, topo.Pods[0]} {
			if seen := spread6(t, ns, "[fd00:43::20]:80"); len(seen) != 2 {
				t.Errorf("from %s: 40 connections reached %v, want pod1 and pod2", ns, seen)
			}
		}
	})
	t.Run("the ipv4 clusterip of the same service answers", func(t *testing.T) {
		if got, err := dial(topo.Pods[1], "10.43.0.20:80"); err != nil || got == "" {
			t.Errorf("IPv4 ClusterIP: %q, %v", got, err)
		}
	})
	t.Run("the nodeport answers on the node's ipv6 address", func(t *testing.T) {
		addr := net.JoinHostPort(netnstest.NodeIP6(2), "30080")
		if got, err := dial6(topo.Pods[1], addr); err != nil || got == "" {
			t.Errorf("NodePort %s: %q, %v", addr, got, err)
		}
	})
	t.Run("an ipv6 service without endpoints is refused at once", func(t *testing.T) {
		start := time.Now()
		if _, err := dial6(topo.Pods[0], "[fd00:43::30]:80"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("err = %v, want connection refused", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refused after %v, want at once", d)
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}
