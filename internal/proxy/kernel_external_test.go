package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
)

// TestKernelExternal checks external traffic on real nftables in network
// namespaces: loadBalancerSourceRanges let only their sources reach the
// load-balancer address (the NodePort stays open), --nodeport-addresses
// limits the addresses NodePorts answer on, and the health-check node port
// of an externalTrafficPolicy Local Service reports the node's endpoints.
func TestKernelExternal(t *testing.T) {
	if err := netnstest.Available(); err != nil {
		t.Skipf("kernel test needs root, ip and nft: %v", err)
	}
	topo, err := netnstest.New(fmt.Sprintf("skx%d", os.Getpid()), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Close)
	for i, pod := range topo.Pods {
		ln, err := netnstest.Serve(pod, fmt.Sprintf("%s:8080", netnstest.PodIP(i+1)), fmt.Sprintf("pod%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	runner := NFT{Prefix: []string{"ip", "netns", "exec", topo.Node}}
	t.Cleanup(func() { _ = Cleanup(context.Background(), runner) })

	const lbIP, np, hcPort = "192.168.77.1", 30090, 32000
	lb := svc("default", "lb", "10.43.0.60", []v1.ServicePort{tcp("http", 80)}, nodePort(np), func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
		s.Spec.LoadBalancerSourceRanges = []string{"10.42.1.0/24"}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbIP}}
	})
	lbSlice := slice("default", "lb", "http", v1.ProtocolTCP, 8080, ep{ip: netnstest.PodIP(1), node: "n1"}, ep{ip: netnstest.PodIP(2), node: "n2"})
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: netnstest.NodeIP(1)}}}}
	client := fake.NewClientset(lb, lbSlice, node)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(client, Options{
		NodeName: "n1", Runner: runner, MinSyncPeriod: 50 * time.Millisecond,
		// NodePorts only on the node's address towards pod 2.
		NodePortCIDRs: []netip.Prefix{netip.MustParsePrefix("10.42.2.0/24")},
		InterfaceAddrs: func() (addrs []netip.Addr, err error) {
			err = netnstest.Run(topo.Node, func() error { addrs, err = hostAddrs(); return err })
			return addrs, err
		},
		Listen: func(network, addr string) (ln net.Listener, err error) {
			err = netnstest.Run(topo.Node, func() error { ln, err = net.Listen(network, addr); return err })
			return ln, err
		},
	})
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("proxier stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("proxier not ready in 20 s")
	}

	lbAddr := fmt.Sprintf("%s:80", lbIP)
	t.Run("only the source ranges reach the load-balancer address", func(t *testing.T) {
		if got, err := dial(topo.Pods[0], lbAddr); err != nil || got == "" {
			t.Fatalf("from pod1 (in 10.42.1.0/24): %q, %v; want an answer", got, err)
		}
		// pod1 got through on these very rules: pod2's connection is
		// dropped (it times out, as upstream drops rather than rejects).
		if got, err := dialTimeout(topo.Pods[1], lbAddr, time.Second); err == nil {
			t.Errorf("from pod2 (outside the ranges): answered %q, want no connection", got)
		}
		// NodePorts are not subject to the ranges, as upstream.
		if got, err := dial(topo.Pods[1], fmt.Sprintf("%s:%d", netnstest.NodeIP(2), np)); err != nil || got == "" {
			t.Errorf("pod2 to the NodePort: %q, %v; want an answer", got, err)
		}
	})
	t.Run("nodeport-addresses limit where NodePorts answer", func(t *testing.T) {
		if got, err := dial(topo.Pods[0], fmt.Sprintf("%s:%d", netnstest.NodeIP(2), np)); err != nil || got == "" {
			t.Errorf("NodePort on %s (in --nodeport-addresses): %q, %v; want an answer", netnstest.NodeIP(2), got, err)
		}
		if _, err := dial(topo.Pods[0], fmt.Sprintf("%s:%d", netnstest.NodeIP(1), np)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("NodePort on %s (not in --nodeport-addresses): %v, want connection refused", netnstest.NodeIP(1), err)
		}
	})
	t.Run("the health check node port counts local endpoints", func(t *testing.T) {
		url := fmt.Sprintf("http://%s:%d/", netnstest.NodeIP(2), hcPort)
		code, body := httpGet(t, topo.Node, url)
		want := `{"service":{"namespace":"default","name":"lb"},"localEndpoints":1,"serviceProxyHealthy":true}`
		if code != http.StatusOK || compactJSON(t, body) != want {
			t.Errorf("GET %s = %d %s, want 200 %s", url, code, body, want)
		}
		// pod1 moves to another node: no local endpoint, 503.
		moved := slice("default", "lb", "http", v1.ProtocolTCP, 8080, ep{ip: netnstest.PodIP(1), node: "n2"}, ep{ip: netnstest.PodIP(2), node: "n2"})
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the health check to answer 503", func() bool {
			code, body := httpGet(t, topo.Node, url)
			return code == http.StatusServiceUnavailable &&
				compactJSON(t, body) == `{"service":{"namespace":"default","name":"lb"},"localEndpoints":0,"serviceProxyHealthy":true}`
		})
		// Only on the --nodeport-addresses address.
		if _, err := httpGetErr(topo.Node, fmt.Sprintf("http://%s:%d/", netnstest.NodeIP(1), hcPort)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("health check on %s: %v, want connection refused", netnstest.NodeIP(1), err)
		}
	})
	t.Run("healthz and livez", func(t *testing.T) {
		srv := httptest.NewServer(p.HealthHandler())
		defer srv.Close()
		for _, path := range []string{"/healthz", "/livez"} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			var h ProxyHealth
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !h.Healthy || h.LastUpdated.IsZero() {
				t.Errorf("GET %s = %d %+v (%v), want 200 healthy", path, resp.StatusCode, h, err)
			}
			if path == "/healthz" && (h.NodeEligible == nil || !*h.NodeEligible) {
				t.Errorf("/healthz nodeEligible = %v, want true", h.NodeEligible)
			}
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}

func dialTimeout(ns, addr string, d time.Duration) (string, error) {
	var got string
	err := netnstest.Run(ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, d)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(d))
		b, err := io.ReadAll(c)
		got = string(b)
		return err
	})
	return got, err
}

type getResult struct {
	code int
	body string
}

func httpGetErr(ns, url string) (getResult, error) {
	var r getResult
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return r, err
	}
	err = netnstest.Run(ns, func() error {
		// Dialled here, on this thread, inside the namespace (an
		// http.Client would dial on another goroutine).
		c, err := net.DialTimeout("tcp4", req.URL.Host, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if err := req.Write(c); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		r = getResult{resp.StatusCode, string(b)}
		return err
	})
	return r, err
}

func httpGet(t *testing.T, ns, url string) (int, string) {
	t.Helper()
	r, err := httpGetErr(ns, url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r.code, r.body
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	b, _ := json.Marshal(v)
	// json.Marshal sorts map keys; put them back in upstream's order.
	var h struct {
		Service struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"service"`
		LocalEndpoints      int  `json:"localEndpoints"`
		ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(h)
	return string(out)
}
