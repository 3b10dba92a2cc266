package proxy

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
)

// dial connects from namespace ns to addr and returns what the server
// said (its pod name).
func dial(ns, addr string) (string, error) {
	var got string
	err := netnstest.Run(ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
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

func spread(t *testing.T, ns, addr string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		got, err := dial(ns, addr)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", addr, ns, err)
		}
		seen[got]++
	}
	return seen
}

// TestKernel programs real nftables in a network namespace the test
// creates, with three "pods" listening behind routed veths, and checks
// what a user would: a ClusterIP reaches every endpoint, a pod reaches
// itself through its Service, a NodePort works, a Service without
// endpoints refuses at once, ClientIP affinity sticks, an unready
// endpoint drops out, rules survive the proxy's exit, and cleanup removes
// them.
func TestKernel(t *testing.T) {
	if err := netnstest.Available(); err != nil {
		t.Skipf("kernel test needs root, ip and nft: %v", err)
	}
	topo, err := netnstest.New(fmt.Sprintf("skp%d", os.Getpid()), 3)
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
	ct := ConntrackTool{Prefix: runner.Prefix}
	for i, pod := range topo.Pods[:2] {
		pc, err := netnstest.ServeUDP(pod, fmt.Sprintf("%s:5353", netnstest.PodIP(i+1)), fmt.Sprintf("pod%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
	}
	udpSvc := svc("default", "udp", "10.43.0.50", []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}})

	eps := []ep{{ip: netnstest.PodIP(1), node: "n1"}, {ip: netnstest.PodIP(2), node: "n1"}, {ip: netnstest.PodIP(3), node: "n1"}}
	web := svc("default", "web", "10.43.0.20", []v1.ServicePort{tcp("http", 80)}, nodePort(30080))
	sticky := svc("default", "sticky", "10.43.0.40", []v1.ServicePort{tcp("http", 80)}, func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
	})
	empty := svc("default", "empty", "10.43.0.30", []v1.ServicePort{tcp("http", 80)})
	webSlice := slice("default", "web", "http", v1.ProtocolTCP, 8080, eps...)
	client := fake.NewClientset(web, sticky, empty, webSlice,
		slice("default", "sticky", "http", v1.ProtocolTCP, 8080, eps...),
		slice("default", "empty", "http", v1.ProtocolTCP, 8080),
		udpSvc, slice("default", "udp", "dns", v1.ProtocolUDP, 5353, eps[0]))

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	faulty := &refusedRunner{NFT: runner}
	p := New(client, Options{NodeName: "n1", Runner: faulty, Conntrack: ct, MinSyncPeriod: 50 * time.Millisecond, Metrics: reg})
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("proxier stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("proxier not ready in 20 s")
	}

	t.Run("clusterip spreads over every endpoint from the node", func(t *testing.T) {
		seen := spread(t, topo.Node, "10.43.0.20:80", 60)
		if len(seen) != 3 {
			t.Errorf("60 connections reached %v, want all of pod1, pod2, pod3", seen)
		}
	})
	t.Run("a pod reaches every endpoint including itself (hairpin)", func(t *testing.T) {
		seen := spread(t, topo.Pods[0], "10.43.0.20:80", 60)
		if len(seen) != 3 || seen["pod1"] == 0 {
			t.Errorf("60 connections from pod1 reached %v, want all three", seen)
		}
	})
	t.Run("nodeport from a pod to the node address", func(t *testing.T) {
		seen := spread(t, topo.Pods[1], netnstest.NodeIP(2)+":30080", 30)
		if len(seen) == 0 {
			t.Errorf("no answer on the NodePort")
		}
	})
	t.Run("no endpoints is refused at once", func(t *testing.T) {
		for _, ns := range []string{topo.Node, topo.Pods[0]} {
			start := time.Now()
			_, err := dial(ns, "10.43.0.30:80")
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("from %s: err = %v, want connection refused", ns, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("from %s: refused after %v, want at once", ns, d)
			}
		}
	})
	t.Run("unknown port of a clusterip is refused", func(t *testing.T) {
		if _, err := dial(topo.Node, "10.43.0.20:81"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("err = %v, want connection refused", err)
		}
	})
	t.Run("client ip affinity sticks", func(t *testing.T) {
		for _, ns := range []string{topo.Node, topo.Pods[2]} {
			seen := spread(t, ns, "10.43.0.40:80", 20)
			if len(seen) != 1 {
				t.Errorf("from %s: 20 connections reached %v, want one endpoint", ns, seen)
			}
		}
	})
	t.Run("a udp flow follows the service when its endpoint goes", func(t *testing.T) {
		// One client socket, so every datagram is the same conntrack flow.
		var conn *net.UDPConn
		if err := netnstest.Run(topo.Node, func() error {
			var err error
			conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(172, 31, 0, 1)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ask := func() string {
			dst := &net.UDPAddr{IP: net.IPv4(10, 43, 0, 50), Port: 53}
			if _, err := conn.WriteToUDP([]byte("?"), dst); err != nil {
				return err.Error()
			}
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				return err.Error()
			}
			return string(buf[:n])
		}
		if got := ask(); got != "pod1" {
			t.Fatalf("first answer %q, want pod1", got)
		}
		s := slice("default", "udp", "dns", v1.ProtocolUDP, 5353, eps[1])
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRules(t, runner, func(l string) bool { return strings.Contains(l, "dnat to 10.42.2.2:5353") })
		// pod1 still answers on its address: only a deleted flow makes
		// the next datagram go to pod2.
		waitFor(t, "the flow to move to pod2", func() bool { return ask() == "pod2" })
	})
	t.Run("a deleted service's chains and sets go", func(t *testing.T) {
		if err := client.CoreV1().Services("default").Delete(ctx, "sticky", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRules(t, runner, func(listing string) bool { return !strings.Contains(listing, "default/sticky") })
	})
	t.Run("an unready endpoint drops out", func(t *testing.T) {
		s := slice("default", "web", "http", v1.ProtocolTCP, 8080, eps[0], eps[1], ep{ip: netnstest.PodIP(3), node: "n1", notReady: true})
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRules(t, runner, func(listing string) bool {
			return strings.Contains(listing, "numgen random mod 2 map { 0 : 10.42.1.2 . 8080, 1 : 10.42.2.2 . 8080 }")
		})
		seen := spread(t, topo.Node, "10.43.0.20:80", 40)
		if seen["pod3"] != 0 || len(seen) != 2 {
			t.Errorf("after pod3 became unready: %v, want pod1 and pod2 only", seen)
		}
		// Every incremental sync applied (none fell back to a full one).
		if n := counterValue(t, reg, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"); n != 0 {
			t.Errorf("%v failed syncs", n)
		}
	})
	t.Run("a sync the kernel refuses leaves the last good rules, counted and reported", func(t *testing.T) {
		// nft refuses the whole transaction (a rule for a chain that does
		// not exist rides along), so the kernel keeps the rules before it.
		faulty.refuse.Store(true)
		s := slice("default", "web", "http", v1.ProtocolTCP, 8080, eps[0])
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a failed sync counted", func() bool {
			return counterValue(t, reg, "kubeproxy_sync_proxy_rules_nftables_sync_failures_total") >= 1
		})
		waitFor(t, "a SyncProxyRulesFailed event on the Node", func() bool {
			evs, _ := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			for _, e := range evs.Items {
				if e.Reason == "SyncProxyRulesFailed" && e.InvolvedObject.Name == "n1" && strings.Contains(e.Message, "no-such-chain") {
					return true
				}
			}
			return false
		})
		waitRules(t, runner, func(listing string) bool {
			return strings.Contains(listing, "numgen random mod 2 map { 0 : 10.42.1.2 . 8080, 1 : 10.42.2.2 . 8080 }")
		})
		if seen := spread(t, topo.Node, "10.43.0.20:80", 30); len(seen) != 2 {
			t.Errorf("while syncs fail: %v, want pod1 and pod2 as before", seen)
		}
		faulty.refuse.Store(false)
		waitRules(t, runner, func(listing string) bool {
			return !strings.Contains(listing, "10.42.2.2 . 8080") && strings.Contains(listing, "meta l4proto tcp dnat to 10.42.1.2:8080")
		})
		if seen := spread(t, topo.Node, "10.43.0.20:80", 20); len(seen) != 1 || seen["pod1"] == 0 {
			t.Errorf("after recovery: %v, want pod1 only", seen)
		}
	})
	t.Run("rules stay when the proxy exits and restarts, no attempt fails", func(t *testing.T) {
		// A client dials the Service without pause through the exit, the
		// restart and the new proxier's first (full) sync.
		stop := make(chan struct{})
		type result struct{ ok, failed int }
		res := make(chan result)
		go func() {
			var r result
			for {
				select {
				case <-stop:
					res <- r
					return
				default:
				}
				if _, err := dial(topo.Node, "10.43.0.20:80"); err != nil {
					r.failed++
				} else {
					r.ok++
				}
			}
		}()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start returned %v", err)
		}
		ctx2, cancel2 := context.WithCancel(context.Background())
		defer cancel2()
		p2 := New(client, Options{NodeName: "n1", Runner: runner})
		done2 := make(chan error, 1)
		go func() { done2 <- p2.Start(ctx2) }()
		select {
		case <-p2.Ready():
		case <-time.After(20 * time.Second):
			t.Fatal("second proxier not ready")
		}
		close(stop)
		r := <-res
		if r.failed != 0 || r.ok < 5 {
			t.Errorf("during the restart: %d connections, %d failed; want none failed", r.ok+r.failed, r.failed)
		}
		// A change after the restart is programmed (incrementally).
		if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctx2, "web-http", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRules(t, runner, func(l string) bool { return strings.Contains(l, "10.43.0.20 . tcp . 80 : goto reject-chain") })
		if _, err := dial(topo.Node, "10.43.0.20:80"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("after its endpoints went: %v, want connection refused", err)
		}
		cancel2()
		if err := <-done2; err != nil {
			t.Errorf("second Start returned %v", err)
		}
	})
	t.Run("cleanup removes the table", func(t *testing.T) {
		if err := Cleanup(context.Background(), runner); err != nil {
			t.Fatal(err)
		}
		ex, err := runner.List(context.Background(), Family, Table)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex.Chains) != 0 {
			t.Errorf("chains left after cleanup: %v", ex.Chains)
		}
	})
}

func waitRules(t *testing.T, r NFT, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		args := append(append([]string(nil), r.Prefix[1:]...), "nft", "list", "table", Family, Table)
		out, _ := exec.Command(r.Prefix[0], args...).Output()
		if ok(string(out)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rules did not change in 10 s:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedRunner is the real nft, made to send, while refuse is set, a
// transaction the kernel rejects as a whole.
type refusedRunner struct {
	NFT
	refuse atomic.Bool
}

func (r *refusedRunner) Apply(ctx context.Context, script string) error {
	if r.refuse.Load() {
		script += "add rule ip " + Table + " no-such-chain accept\n"
	}
	return r.NFT.Apply(ctx, script)
}
