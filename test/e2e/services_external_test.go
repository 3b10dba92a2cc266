package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestServicesExternal: loadBalancerSourceRanges, the health-check node
// port of an externalTrafficPolicy Local load balancer, the proxy's
// /healthz, cluster DNS in the API server's /readyz, and the identities
// DNS and the load-balancer allocator run under. (--nodeport-addresses
// needs a proxy of its own: internal/proxy TestKernelExternal.)
func TestServicesExternal(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := c.namespace(t, "svc-external")
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, webDeployment(ns, c.image), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcs := c.client.CoreV1().Services(ns)
	waitFor(t, 120*time.Second, "3 ready web pods", func() bool {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false
		}
		n := 0
		for _, p := range list.Items {
			if podRunningReady(&p) {
				n++
			}
		}
		return n == 3
	})
	lbAddr := func(t *testing.T, name string) string {
		var addr string
		waitFor(t, 15*time.Second, "status.loadBalancer.ingress of "+name, func() bool {
			s, err := svcs.Get(ctx, name, metav1.GetOptions{})
			if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
				addr = s.Status.LoadBalancer.Ingress[0].IP
			}
			return addr != ""
		})
		return addr
	}

	t.Run("load-balancer source ranges admit only their sources", func(t *testing.T) {
		node, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var nodeIP string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
				nodeIP = a.Address
			}
		}
		// The node is in the ranges (so the host may connect), the pod
		// network is not.
		svc, err := svcs.Create(ctx, svcFor(ns, "lb-ranges", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 8091
			s.Spec.LoadBalancerSourceRanges = []string{nodeIP + "/32"}
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addr := lbAddr(t, svc.Name)
		url := "http://" + net.JoinHostPort(addr, "8091") + "/"
		waitFor(t, 15*time.Second, "the load-balancer address to answer the host", func() bool { _, err := hostGet(url, 1); return err == nil })
		svc, _ = svcs.Get(ctx, svc.Name, metav1.GetOptions{})
		nodePort := svc.Spec.Ports[0].NodePort
		// From a pod: the NodePort (not subject to the ranges) answers, the
		// load-balancer address does not.
		script := fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s %d | tail -n 1 | sed 's/^/nodeport=/'; `+
			`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s 8091 | tail -n 1 | sed 's/^/lb=/'; echo DONE`, nodeIP, nodePort, addr)
		out := c.runClient(t, ns, "client-ranges", nil, script)
		if !strings.Contains(out, "nodeport=web-") || strings.Contains(out, "lb=web-") {
			t.Errorf("from a pod outside the ranges: want the NodePort to answer and the load-balancer address not to:\n%s", out)
		}
		// The pod network joins the ranges: now the pod gets through.
		svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, "10.42.0.0/16")
		if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out2 string
		waitFor(t, 60*time.Second, "a pod in the ranges to reach the load-balancer address", func() bool {
			out2 = c.runClient(t, ns, fmt.Sprintf("client-ranges-%d", time.Now().UnixNano()%100000), nil,
				fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s 8091 | tail -n 1 | sed 's/^/lb=/'; echo DONE`, addr))
			return strings.Contains(out2, "lb=web-")
		})
	})

	t.Run("the health check node port reports local endpoints", func(t *testing.T) {
		svc, err := svcs.Create(ctx, svcFor(ns, "lb-local", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) {
			s.Spec.Ports[0].Port = 8092
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.HealthCheckNodePort == 0 {
			t.Fatalf("no healthCheckNodePort allocated: %+v", svc.Spec)
		}
		addr := lbAddr(t, svc.Name)
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(addr, fmt.Sprint(svc.Spec.HealthCheckNodePort)))
		type hc struct {
			Service             struct{ Namespace, Name string }
			LocalEndpoints      int
			ServiceProxyHealthy bool
		}
		var got hc
		var code int
		waitFor(t, 30*time.Second, "the health check to count 3 local endpoints", func() bool {
			code, got = 0, hc{}
			resp, err := (&http.Client{Timeout: 3 * time.Second}).Get(url)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			code = resp.StatusCode
			return json.NewDecoder(resp.Body).Decode(&got) == nil && got.LocalEndpoints == 3
		})
		if code != http.StatusOK || got.Service.Namespace != ns || got.Service.Name != "lb-local" || !got.ServiceProxyHealthy {
			t.Errorf("GET %s = %d %+v, want 200 for %s/lb-local, proxy healthy", url, code, got, ns)
		}
		// From a pod, as a load balancer inside the cluster would ask.
		out := c.runClient(t, ns, "client-hc", nil, fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s %d | head -n 1; echo DONE`, addr, svc.Spec.HealthCheckNodePort))
		if !strings.Contains(out, "200 OK") {
			t.Errorf("health check from a pod:\n%s", out)
		}
		// The Deployment scales to zero: 503.
		scale, err := c.client.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = 0
		if _, err := c.client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the health check to answer 503 with no local endpoint", func() bool {
			resp, err := (&http.Client{Timeout: 3 * time.Second}).Get(url)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var h hc
			return resp.StatusCode == http.StatusServiceUnavailable && json.NewDecoder(resp.Body).Decode(&h) == nil && h.LocalEndpoints == 0
		})
	})

	t.Run("the proxy serves healthz and livez", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez"} {
			resp, err := (&http.Client{Timeout: 3 * time.Second}).Get("http://127.0.0.1:10256" + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			var h struct {
				LastUpdated  time.Time `json:"lastUpdated"`
				NodeEligible *bool     `json:"nodeEligible"`
				Healthy      bool      `json:"healthy"`
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !h.Healthy || h.LastUpdated.IsZero() {
				t.Errorf("GET %s = %d %+v (%v), want 200 healthy", path, resp.StatusCode, h, err)
			}
			if path == "/healthz" && (h.NodeEligible == nil || !*h.NodeEligible) {
				t.Errorf("/healthz: nodeEligible %v, want true", h.NodeEligible)
			}
		}
	})

	t.Run("readyz reports cluster dns", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{"/readyz?verbose": "[+]cluster-dns ok\n", "/readyz/cluster-dns": "ok"} {
			resp, err := hc.Get(cfg.Host + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
				t.Errorf("GET %s = %d:\n%s\nwant %q", path, resp.StatusCode, b, want)
			}
		}
	})

	t.Run("dns and the load-balancer allocator have least privilege", func(t *testing.T) {
		tests := []struct {
			user string
			args []string
			want string
		}{
			{"system:skiff:cluster-dns", []string{"list", "endpointslices.discovery.k8s.io"}, "yes"},
			{"system:skiff:cluster-dns", []string{"update", "services/kube-dns", "-n", "kube-system"}, "yes"},
			{"system:skiff:cluster-dns", []string{"update", "services/web", "-n", "kube-system"}, "no"},
			{"system:skiff:cluster-dns", []string{"get", "secrets", "-n", "kube-system"}, "no"},
			{"system:skiff:service-lb", []string{"update", "services", "--subresource=status", "-n", ns}, "yes"},
			{"system:skiff:service-lb", []string{"delete", "services", "-n", ns}, "no"},
			{"system:skiff:service-lb", []string{"create", "pods", "-n", ns}, "no"},
		}
		for _, tc := range tests {
			out, _, _ := kubectlResult(c.kubeconfig, "", append([]string{"auth", "can-i", "--as", tc.user}, tc.args...)...)
			if strings.TrimSpace(out) != tc.want {
				t.Errorf("can-i --as %s %v = %q, want %s", tc.user, tc.args, strings.TrimSpace(out), tc.want)
			}
		}
	})
}
