package upstream

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestProxyConformanceAgnhost replays the requests and expectations of
// upstream's conformance tests "Proxy version v1 should proxy through a
// service and a pod" and "A set of valid responses are returned for both
// pod and service Proxy[WithPath]" (test/e2e/network/proxy.go) against an
// in-process API server, with upstream's own backend: `agnhost porter`
// v1.37.2, run in a network namespace the test makes, whose address stands
// for the pod's IP. Pods and EndpointSlices are written as the kubelet and
// the EndpointSlice controller would. It skips unless agnhost is in
// $SKIFF_UPSTREAM_BIN or the build script's cache (`hack/upstream/build.sh
// agnhost`), and needs root for the namespace.
func TestProxyConformanceAgnhost(t *testing.T) {
	dir := os.Getenv(upstreamBinEnv)
	if dir == "" {
		dir = upstreamCache
	}
	agnhost := filepath.Join(dir, "agnhost")
	if _, err := os.Stat(agnhost); err != nil {
		t.Skipf("upstream agnhost v1.37.2 not built in %s (set %s, or run hack/upstream/build.sh agnhost)", dir, upstreamBinEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	c := testapiserver.Start(t)
	client := kubernetes.NewForConfigOrDie(c.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "proxy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const ns = "proxy"

	t.Run("should proxy through a service and a pod", func(t *testing.T) {
		ip := porter(t, agnhost, nil, map[string]string{
			"SERVE_PORT_80":      `<a href="/rewriteme">test</a>`,
			"SERVE_PORT_1080":    `<a href="/rewriteme">test</a>`,
			"SERVE_PORT_160":     "foo",
			"SERVE_PORT_162":     "bar",
			"SERVE_TLS_PORT_443": `<a href="/tlsrewriteme">test</a>`,
			"SERVE_TLS_PORT_460": "tls baz",
			"SERVE_TLS_PORT_462": "tls qux",
		})
		svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "proxy-service-"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"proxy-service-target": "true"}, Ports: []corev1.ServicePort{
				{Name: "portname1", Port: 80, TargetPort: intstr.FromString("dest1")},
				{Name: "portname2", Port: 81, TargetPort: intstr.FromInt32(162)},
				{Name: "tlsportname1", Port: 443, TargetPort: intstr.FromString("tlsdest1")},
				{Name: "tlsportname2", Port: 444, TargetPort: intstr.FromInt32(462)},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := runningPod(t, ctx, client, ns, svc.Name+"-pod", ip, map[string]string{"proxy-service-target": "true"},
			corev1.ContainerPort{ContainerPort: 80}, corev1.ContainerPort{Name: "dest1", ContainerPort: 160},
			corev1.ContainerPort{Name: "dest2", ContainerPort: 162}, corev1.ContainerPort{Name: "tlsdest1", ContainerPort: 460},
			corev1.ContainerPort{Name: "tlsdest2", ContainerPort: 462})
		endpointSlice(t, ctx, client, ns, svc.Name, pod, map[string]int32{"portname1": 160, "portname2": 162, "tlsportname1": 460, "tlsportname2": 462})

		svcURL := func(scheme, port string) string {
			return "/api/v1/namespaces/" + ns + "/services/" + utilnet.JoinSchemeNamePort(scheme, svc.Name, port) + "/proxy"
		}
		podURL := func(scheme, port string) string {
			return "/api/v1/namespaces/" + ns + "/pods/" + utilnet.JoinSchemeNamePort(scheme, pod.Name, port) + "/proxy"
		}
		expectations := map[string]string{
			svcURL("", "portname1") + "/":         "foo",
			svcURL("http", "portname1") + "/":     "foo",
			svcURL("", "portname2") + "/":         "bar",
			svcURL("http", "portname2") + "/":     "bar",
			svcURL("https", "tlsportname1") + "/": "tls baz",
			svcURL("https", "tlsportname2") + "/": "tls qux",

			podURL("", "") + "/":         `<a href="` + podURL("", "") + `/rewriteme">test</a>`,
			podURL("", "1080") + "/":     `<a href="` + podURL("", "1080") + `/rewriteme">test</a>`,
			podURL("http", "1080") + "/": `<a href="` + podURL("http", "1080") + `/rewriteme">test</a>`,
			podURL("", "160") + "/":      "foo",
			podURL("http", "160") + "/":  "foo",
			podURL("", "162") + "/":      "bar",
			podURL("http", "162") + "/":  "bar",

			podURL("https", "443") + "/": `<a href="` + podURL("https", "443") + `/tlsrewriteme">test</a>`,
			podURL("https", "460") + "/": "tls baz",
			podURL("https", "462") + "/": "tls qux",
		}
		for path, want := range expectations {
			// As the conformance test asks: AbsPath keeps the trailing
			// slash, Do().Raw() turns an API error into an error.
			var code int
			body, err := client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).StatusCode(&code).Raw()
			if err != nil || code != http.StatusOK || string(body) != want {
				t.Errorf("%s: %d %q, %v; want 200 %q", path, code, body, err, want)
			}
		}
	})

	t.Run("A set of valid responses are returned for both pod and service Proxy and ProxyWithPath", func(t *testing.T) {
		ip := porter(t, agnhost, []string{"--json-response"}, map[string]string{"SERVE_PORT_80": "foo"})
		pod := runningPod(t, ctx, client, ns, "agnhost", ip, map[string]string{"test": "response"})
		if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "test-service"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"test": "response"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		endpointSlice(t, ctx, client, ns, "test-service", pod, map[string]int32{"": 80})
		tr, err := rest.TransportFor(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		do := func(method, path string) (int, []byte) {
			t.Helper()
			req, _ := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Config.Host, "/")+path, nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			return resp.StatusCode, b.Bytes()
		}
		base := "/api/v1/namespaces/" + ns
		for _, target := range []string{"pods/agnhost", "services/test-service"} {
			// ProxyWithPath: every method; HEAD only 200.
			for _, m := range []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"} {
				code, body := do(m, base+"/"+target+"/proxy/some/path/with/"+m)
				var jr struct{ Method, Body string }
				if code != 200 || (m != "HEAD" && (json.Unmarshal(body, &jr) != nil || jr.Method != m || jr.Body != "foo")) {
					t.Errorf("%s %s/proxy/some/path/with/%s: %d %s", m, target, m, code, body)
				}
			}
			// Proxy: the bare path, with the method in the query.
			for _, m := range []string{"DELETE", "OPTIONS", "PATCH", "POST", "PUT"} {
				code, body := do(m, base+"/"+target+"/proxy?method="+m)
				var jr struct{ Method, Body string }
				if code != 200 || json.Unmarshal(body, &jr) != nil || jr.Method != m || jr.Body != "foo" {
					t.Errorf("%s %s/proxy?method=%s: %d %s", m, target, m, code, body)
				}
			}
			for _, m := range []string{"GET", "HEAD"} {
				if code, _ := do(m, base+"/"+target+"/proxy?method="+m); code != http.StatusMovedPermanently {
					t.Errorf("%s %s/proxy?method=%s: %d, want 301", m, target, m, code)
				}
			}
		}
	})
}

// porter runs `agnhost porter` with args and env in a network namespace of
// its own, joined to the host by a veth pair, and returns the namespace's
// address (which the test's pod has as its IP).
func porter(t *testing.T, agnhost string, args []string, env map[string]string) string {
	t.Helper()
	id := rand.IntN(1 << 16)
	netns, host, peer := fmt.Sprintf("skpx%04x", id), fmt.Sprintf("skpxh%04x", id), fmt.Sprintf("skpxp%04x", id)
	a, b := rand.IntN(250)+1, rand.IntN(60)*4
	hostIP, podIP := fmt.Sprintf("10.252.%d.%d", a, b+1), fmt.Sprintf("10.252.%d.%d", a, b+2)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", netns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", netns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", peer, "netns", netns)
	run("addr", "add", hostIP+"/30", "dev", host)
	run("link", "set", host, "up")
	run("-n", netns, "addr", "add", podIP+"/30", "dev", peer)
	run("-n", netns, "link", "set", peer, "up")
	run("-n", netns, "link", "set", "lo", "up")

	// The image's porter reads localhost.crt from its working directory;
	// here the certificate is the test's own.
	certFile, keyFile := selfSigned(t)
	cmdArgs := []string{"CERT_FILE=" + certFile, "KEY_FILE=" + keyFile}
	for k, v := range env {
		cmdArgs = append(cmdArgs, k+"="+v)
	}
	cmdArgs = append(cmdArgs, "ip", "netns", "exec", netns, agnhost, "porter")
	cmdArgs = append(cmdArgs, args...)
	p := start(t, t.TempDir(), "agnhost-porter-"+netns, "env", cmdArgs...)
	// Ready once every port answers.
	waitFor(t, 30*time.Second, "agnhost porter listening", p, func() bool {
		for k := range env {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(podIP, k[strings.LastIndex(k, "_")+1:]), time.Second)
			if err != nil {
				return false
			}
			conn.Close()
		}
		return true
	})
	return podIP
}

// runningPod creates a pod with one agnhost container declaring ports and
// gives it the status a kubelet would: Running, Ready, pod IP ip.
func runningPod(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, name, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.59", Ports: ports}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if pod, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod
}

// endpointSlice writes the slice the EndpointSlice controller would for
// service svc with the one pod: port name → target port.
func endpointSlice(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, svc string, pod *corev1.Pod, ports map[string]int32) {
	t.Helper()
	var eps []discoveryv1.EndpointPort
	for name, port := range ports {
		eps = append(eps, discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: svc + "-", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{pod.Status.PodIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}}},
		Ports: eps,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// selfSigned writes a self-signed serving certificate and its key.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "porter"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
