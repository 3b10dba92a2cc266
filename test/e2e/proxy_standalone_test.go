package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/proxy/netnstest"
)

// TestProxyStandalone: `skiff proxy --kubeconfig` alone, as kube-proxy
// runs, in a network namespace of its own (linked to the host by a veth
// pair, reaching the API server at its advertised address): it programs
// the cluster's Services into that namespace's table, follows a new
// Service, serves its metrics, leaves the rules in place when it stops,
// and `skiff proxy --cleanup` removes them.
func TestProxyStandalone(t *testing.T) {
	for _, bin := range []string{"ip", "nsenter", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	c := cluster(t)
	ctx := context.Background()
	id := os.Getpid() % 100000
	netns, veth := fmt.Sprintf("skiff-e2e-px-%d", id), fmt.Sprintf("sk-px-%d", id)
	sh := func(line string) {
		t.Helper()
		f := strings.Fields(line)
		if out, err := exec.Command(f[0], f[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", netns).Run() })
	sh("ip netns add " + netns)
	sh("ip link add " + veth + " type veth peer name eth0 netns " + netns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "delete", veth).Run() })
	sh("ip addr add 10.99.9.1/24 dev " + veth)
	sh("ip link set " + veth + " up")
	sh("ip -n " + netns + " addr add 10.99.9.2/24 dev eth0")
	sh("ip -n " + netns + " link set lo up")
	sh("ip -n " + netns + " link set eth0 up")
	sh("ip -n " + netns + " route add default via 10.99.9.1")

	// The admin kubeconfig, pointed at the address the API server
	// advertises (its serving certificate names it; 127.0.0.1 is the
	// namespace's own loopback).
	ep, err := c.client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
		t.Fatalf("the kubernetes Endpoints name no address: %v", err)
	}
	advertised := ep.Subsets[0].Addresses[0].IP
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = fmt.Sprintf("https://%s:%d", advertised, c.ports.api)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	nft := func() string {
		out, _ := exec.Command("ip", "netns", "exec", netns, "nft", "list", "table", "ip", "skiff-proxy").CombinedOutput()
		return string(out)
	}
	proxy := exec.Command("nsenter", "--net=/run/netns/"+netns, binary(), "proxy", "--kubeconfig", kubeconfig,
		"--hostname-override", "standalone-"+fmt.Sprint(id), "--min-sync-period", "200ms",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
	output := &syncBuffer{}
	proxy.Stdout, proxy.Stderr = output, output
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- proxy.Wait() }()
	t.Cleanup(func() {
		_ = proxy.Process.Kill()
		<-done
	})

	waitFor(t, 60*time.Second, "the kubernetes Service in the namespace's table", func() bool {
		return strings.Contains(nft(), "10.43.0.1 . tcp . 443 : goto service-")
	})
	ns := c.namespace(t, "proxy-standalone")
	svc, err := c.client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "nothing"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new Service, without endpoints, rejected in the table", func() bool {
		return strings.Contains(nft(), svc.Spec.ClusterIP+" . tcp . 80 : goto reject-chain")
	})

	t.Run("its rules carry traffic", func(t *testing.T) {
		// kubernetes.default's ClusterIP, DNATed to the API server.
		err := netnstest.Run(netns, func() error {
			conn, err := net.DialTimeout("tcp4", "10.43.0.1:443", 3*time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		})
		if err != nil {
			t.Errorf("10.43.0.1:443 from the proxy's namespace: %v", err)
		}
		err = netnstest.Run(netns, func() error {
			_, err := net.DialTimeout("tcp4", net.JoinHostPort(svc.Spec.ClusterIP, "80"), 3*time.Second)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("the Service without endpoints: %v, want refused", err)
		}
	})
	t.Run("metrics and healthz", func(t *testing.T) {
		// HTTP/1.0 over a connection opened in the namespace (an
		// http.Client dials on other threads, outside it).
		get := func(addr, path string) (int, string) {
			var resp *http.Response
			var body []byte
			if err := netnstest.Run(netns, func() error {
				conn, err := net.DialTimeout("tcp4", addr, 3*time.Second)
				if err != nil {
					return err
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
					return err
				}
				if resp, err = http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
					return err
				}
				body, err = io.ReadAll(resp.Body)
				return err
			}); err != nil {
				t.Fatalf("GET %s%s: %v", addr, path, err)
			}
			return resp.StatusCode, string(body)
		}
		if _, body := get("127.0.0.1:10249", "/metrics"); !strings.Contains(body, "kubeproxy_sync_proxy_rules_duration_seconds_count") ||
			!strings.Contains(body, "kubeproxy_network_programming_duration_seconds_count") {
			t.Errorf("/metrics lacks the sync and programming durations:\n%.2000s", body)
		}
		if code, body := get("127.0.0.1:10256", "/livez"); code != http.StatusOK || !strings.Contains(body, `"lastUpdated"`) {
			t.Errorf("/livez = %d %s", code, body)
		}
	})
	t.Run("rules stay when it stops, --cleanup removes them", func(t *testing.T) {
		_ = proxy.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			done <- err
			if err != nil {
				t.Errorf("skiff proxy exited with %v:\n%s", err, output.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("skiff proxy did not stop within 30s")
		}
		if !strings.Contains(nft(), "10.43.0.1 . tcp . 443 : goto service-") {
			t.Errorf("the rules went with the proxy:\n%s", nft())
		}
		if out, err := exec.Command("nsenter", "--net=/run/netns/"+netns, binary(), "proxy", "--cleanup").CombinedOutput(); err != nil {
			t.Fatalf("skiff proxy --cleanup: %v\n%s", err, out)
		}
		if out := nft(); !strings.Contains(out, "No such file or directory") {
			t.Errorf("the table is still there after --cleanup:\n%s", out)
		}
	})
}
