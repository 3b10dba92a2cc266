package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// proxyEcho is what the proxy tests' backend answers: the request as it
// arrived.
type proxyEcho struct {
	Method, Path, Query, Body, Proto string
	// Credentials that reached the backend: none should.
	Authorization, ImpersonateUser string
}

// proxyBackend serves HTTP (and HTTPS) on an address of a test interface:
// an echo of each request as JSON, /page (HTML with a root-relative
// link), /moved (a redirect), /stream (one line, then a second once the
// test releases it), and a protocol upgrade "echo-test" that echoes bytes.
type proxyBackend struct {
	ip              string
	httpPort, https int
	release         chan struct{}
}

func startProxyBackend(t *testing.T, ip string) *proxyBackend {
	t.Helper()
	b := &proxyBackend{ip: ip, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><a href="/rewriteme">test</a></body></html>`)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-b.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "second\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "echo-test" {
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo-test\r\n\r\n")
			rw.Flush()
			buf := make([]byte, 64)
			for {
				n, err := rw.Read(buf)
				if n > 0 {
					rw.Write(buf[:n])
					rw.Flush()
				}
				if err != nil {
					return
				}
			}
		}
		body, _ := io.ReadAll(r.Body)
		proto := "http"
		if r.TLS != nil {
			proto = "https"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(proxyEcho{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Proto: proto,
			Authorization: r.Header.Get("Authorization"), ImpersonateUser: r.Header.Get("Impersonate-User")})
	})
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	plain := httptest.NewUnstartedServer(mux)
	plain.Listener = listen()
	plain.Start()
	t.Cleanup(plain.Close)
	_, serving := servingPair(t, "web", ip)
	secure := httptest.NewUnstartedServer(mux)
	secure.Listener = listen()
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	b.httpPort = plain.Listener.Addr().(*net.TCPAddr).Port
	b.https = secure.Listener.Addr().(*net.TCPAddr).Port
	return b
}

// proxyResponse is one response through the API server, redirects not
// followed.
type proxyResponse struct {
	code   int
	header http.Header
	body   string
}

func (r proxyResponse) echo(t *testing.T) proxyEcho {
	t.Helper()
	var e proxyEcho
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("response %d %q is not the backend's echo: %v", r.code, r.body, err)
	}
	return e
}

func (r proxyResponse) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal([]byte(r.body), &s); err != nil || s.Kind != "Status" {
		t.Fatalf("response %d %q is not a Status: %v", r.code, r.body, err)
	}
	return s
}

func proxyDo(t *testing.T, cfg *rest.Config, method, path, body string) proxyResponse {
	t.Helper()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(t, 30*time.Second), method, strings.TrimSuffix(cfg.Host, "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return proxyResponse{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestProxySubresources drives pods/proxy and services/proxy as the
// conformance tests and kubectl do, to a backend on a pod address (an
// interface the test makes: the API server refuses to proxy to loopback,
// as upstream's).
func TestProxySubresources(t *testing.T) {
	ip := dummyAddress(t)
	be := startProxyBackend(t, ip)
	c := startRBAC(t)
	cs := c.Clientset()
	ctx := testCtx(t, 2*time.Minute)
	ns := newNamespace(t, cs)

	// Pod web: its first declared port is the backend's HTTP port (the
	// first container declares none).
	podWithIP := func(name, podIP string, ports ...int32) {
		t.Helper()
		var cps []corev1.ContainerPort
		for _, p := range ports {
			cps = append(cps, corev1.ContainerPort{ContainerPort: p})
		}
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "busybox"}, {Name: "app", Image: "agnhost", Ports: cps}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if podIP == "" {
			return
		}
		pod.Status.PodIP, pod.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podWithIP("web", ip, int32(be.httpPort))
	podWithIP("noport", ip)
	podWithIP("pending", "")
	podWithIP("local", "127.0.0.1", 80)

	// Service web: port 80 "http" and 443 "tls" to the backend; its
	// EndpointSlice, written here, points at pod web. Service stray has an
	// endpoint at the same address that is no pod's; service empty has no
	// EndpointSlice at all.
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "tls", Port: 443}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "stray"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slice := func(svc string, target *corev1.ObjectReference, ports ...discoveryv1.EndpointPort) {
		t.Helper()
		_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: target}},
			Ports:       ports,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	slice("web", &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web"},
		discoveryv1.EndpointPort{Name: ptr.To("http"), Port: ptr.To(int32(be.httpPort))},
		discoveryv1.EndpointPort{Name: ptr.To("tls"), Port: ptr.To(int32(be.https))})
	slice("stray", nil, discoveryv1.EndpointPort{Name: ptr.To(""), Port: ptr.To(int32(be.httpPort))})

	admin := c.Config
	base := "/api/v1/namespaces/" + ns
	httpPort, httpsPort := strconv.Itoa(be.httpPort), strconv.Itoa(be.https)

	t.Run("path and query reach the pod", func(t *testing.T) {
		r := proxyDo(t, admin, "GET", base+"/pods/web/proxy/some/path/?x=1&y=a%20b", "")
		if r.code != 200 {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		want := proxyEcho{Method: "GET", Path: "/some/path/", Query: "x=1&y=a%20b", Proto: "http"}
		if got := r.echo(t); got != want {
			t.Errorf("the backend saw %+v, want %+v", got, want)
		}
	})

	t.Run("the query is the backend's", func(t *testing.T) {
		// watch=true is not a watch of pods/proxy.
		for _, q := range []string{"watch=true", "watch=1&resourceVersion=0", "labelSelector=a%3Db"} {
			r := proxyDo(t, admin, "GET", base+"/pods/web/proxy/q?"+q, "")
			if r.code != 200 || r.echo(t).Query != q {
				t.Errorf("GET ...?%s: %d %s", q, r.code, r.body)
			}
		}
	})

	t.Run("every method, pod and service", func(t *testing.T) {
		for _, target := range []string{"pods/web", "pods/web:" + httpPort, "pods/http:web:" + httpPort, "services/web:http", "services/web:80", "services/http:web:80"} {
			for _, m := range []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"} {
				body := ""
				if m == "POST" || m == "PUT" || m == "PATCH" {
					body = "payload of " + m
				}
				r := proxyDo(t, admin, m, base+"/"+target+"/proxy/some/path/with/"+m, body)
				if r.code != 200 {
					t.Errorf("%s %s: code %d: %s", m, target, r.code, r.body)
					continue
				}
				if m == "HEAD" {
					continue
				}
				want := proxyEcho{Method: m, Path: "/some/path/with/" + m, Body: body, Proto: "http"}
				if got := r.echo(t); got != want {
					t.Errorf("%s %s: the backend saw %+v, want %+v", m, target, got, want)
				}
			}
		}
	})

	t.Run("https", func(t *testing.T) {
		for _, target := range []string{"pods/https:web:" + httpsPort, "services/https:web:tls", "services/https:web:443"} {
			r := proxyDo(t, admin, "GET", base+"/"+target+"/proxy/secure", "")
			if r.code != 200 || r.echo(t).Proto != "https" || r.echo(t).Path != "/secure" {
				t.Errorf("%s: %d %s, want the HTTPS backend's echo of /secure", target, r.code, r.body)
			}
		}
	})

	t.Run("the bare proxy path", func(t *testing.T) {
		// GET and HEAD are sent to .../proxy/ (the conformance test's 301);
		// other methods go to the backend's root.
		for _, m := range []string{"GET", "HEAD"} {
			for _, target := range []string{"pods/web", "services/web:http"} {
				r := proxyDo(t, admin, m, base+"/"+target+"/proxy?method="+m, "")
				if want := base + "/" + target + "/proxy/?method=" + m; r.code != 301 || r.header.Get("Location") != want {
					t.Errorf("%s %s/proxy: %d Location %q, want 301 to %s", m, target, r.code, r.header.Get("Location"), want)
				}
			}
		}
		r := proxyDo(t, admin, "POST", base+"/pods/web/proxy?method=POST", "")
		if e := r.echo(t); r.code != 200 || e.Method != "POST" || e.Path != "/" || e.Query != "method=POST" {
			t.Errorf("POST pods/web/proxy: %d %+v", r.code, e)
		}
	})

	t.Run("links and redirects are rewritten under the proxy", func(t *testing.T) {
		prefix := base + "/pods/web:" + httpPort + "/proxy"
		r := proxyDo(t, admin, "GET", prefix+"/page", "")
		if want := `<a href="` + prefix + `/rewriteme">test</a>`; r.code != 200 || !strings.Contains(r.body, want) {
			t.Errorf("page: %d %q, want it to hold %s", r.code, r.body, want)
		}
		r = proxyDo(t, admin, "GET", prefix+"/moved", "")
		if want := prefix + "/target"; r.code != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("redirect: %d Location %q, want 302 to %s", r.code, r.header.Get("Location"), want)
		}
	})

	t.Run("responses stream", func(t *testing.T) {
		tr, err := rest.TransportFor(admin)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(admin.Host, "/")+base+"/services/web:http/proxy/stream", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		// The first line arrives while the backend still holds the rest.
		if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		close(be.release)
		if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
			t.Fatalf("rest %q, %v", rest, err)
		}
	})

	t.Run("upgrades pass through", func(t *testing.T) {
		tlsCfg, err := rest.TLSConfigFor(admin)
		if err != nil {
			t.Fatal(err)
		}
		tlsCfg.NextProtos = []string{"http/1.1"}
		conn, err := tls.Dial("tcp", strings.TrimPrefix(admin.Host, "https://"), tlsCfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET %s/pods/web/proxy/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo-test\r\n\r\n", base)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("upgrade: %d %s", resp.StatusCode, b)
		}
		fmt.Fprint(conn, "ping")
		got := make([]byte, 4)
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
			t.Fatalf("echo over the upgraded connection %q, %v", got, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			code         int32
			msg          string
		}{
			{"GET", "/pods/a:b:c:d/proxy/", 400, `invalid pod request "a:b:c:d"`},
			{"GET", "/pods/ftp:web:80/proxy/", 400, `invalid pod request "ftp:web:80"`},
			{"GET", "/services/a:b:c:d/proxy/", 400, `invalid service request "a:b:c:d"`},
			{"GET", "/pods/missing/proxy/", 404, `pods "missing" not found`},
			{"GET", "/pods/pending/proxy/", 400, "address not allowed"},
			{"GET", "/pods/local/proxy/", 400, "address not allowed"},
			{"GET", "/services/missing:80/proxy/", 404, `services "missing" not found`},
			{"GET", "/services/web:81/proxy/", 503, `no service port 81 found for service "web"`},
			{"GET", "/services/empty/proxy/", 503, `no endpoints available for service "empty"`},
			{"GET", "/services/missing/proxy/", 503, `no endpoints available for service "missing"`},
			{"GET", "/services/web:nope/proxy/", 503, `no endpoints available for service "web"`},
			{"GET", "/services/stray/proxy/", 503, `no endpoints available for service "stray"`},
			{"POST", "/pods/web/proxy/x?dryRun=All", 400, "dryRun is not supported"},
		} {
			r := proxyDo(t, admin, tc.method, base+tc.path, "")
			if s := r.status(t); r.code != int(tc.code) || s.Code != tc.code || s.Message != tc.msg {
				t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, r.code, s.Message, tc.code, tc.msg)
			}
		}
		// Nothing listens on the pod's default port here.
		r := proxyDo(t, admin, "GET", base+"/pods/noport:1/proxy/", "")
		if s := r.status(t); r.code != 503 || !strings.HasPrefix(s.Message, "error trying to reach service: ") {
			t.Errorf("a closed port: %d %q, want 503 error trying to reach service", r.code, s.Message)
		}
	})

	t.Run("kubectl get --raw", func(t *testing.T) {
		out, err := aggKubectl(t, c.Kubeconfig(), "get", "--raw", base+"/pods/web:"+httpPort+"/proxy/raw/path?k=v")
		if err != nil {
			t.Fatal(err)
		}
		var e proxyEcho
		if err := json.Unmarshal([]byte(out), &e); err != nil || e.Path != "/raw/path" || e.Query != "k=v" {
			t.Errorf("kubectl get --raw: %q, %v", out, err)
		}
	})

	t.Run("published in OpenAPI", func(t *testing.T) {
		for _, doc := range []string{"/openapi/v2", "/openapi/v3/api/v1"} {
			r := proxyDo(t, admin, "GET", doc, "")
			for _, p := range []string{"/api/v1/namespaces/{namespace}/pods/{name}/proxy/{path}", "/api/v1/namespaces/{namespace}/services/{name}/proxy",
				"connectCoreV1OptionsNamespacedPodProxyWithPath", "connectCoreV1PostNamespacedServiceProxy"} {
				if !strings.Contains(r.body, `"`+p+`"`) {
					t.Errorf("%s (%d) lacks %s", doc, r.code, p)
				}
			}
		}
	})

	t.Run("authorization is the method's verb on the proxy subresource", func(t *testing.T) {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"get", "list", "watch"}}}}
		if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		alice := rest.CopyConfig(admin)
		alice.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
		for _, target := range []string{"pods/web", "services/web:http"} {
			r := proxyDo(t, alice, "GET", base+"/"+target+"/proxy/", "")
			resource := strings.Split(target, "/")[0] + "/proxy"
			if s := r.status(t); r.code != 403 || !strings.Contains(s.Message, `cannot get resource "`+resource+`"`) {
				t.Errorf("alice GET %s/proxy/: %d %q, want 403 for get %s", target, r.code, s.Message, resource)
			}
		}
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}})
		if _, err := cs.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "alice may get pods/proxy", func() (bool, error) {
			return proxyDo(t, alice, "GET", base+"/pods/web/proxy/", "").code == 200, nil
		})
		// Neither the impersonation headers nor a bearer token reach the pod.
		if e := proxyDo(t, alice, "GET", base+"/pods/web/proxy/", "").echo(t); e.ImpersonateUser != "" || e.Authorization != "" {
			t.Errorf("the pod saw Impersonate-User %q, Authorization %q", e.ImpersonateUser, e.Authorization)
		}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "robot"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "robot"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		robot := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.TLSClientConfig.CAData}, BearerToken: tok.Status.Token}
		var seen proxyEcho
		eventually(t, 10*time.Second, "the service account may get pods/proxy", func() (bool, error) {
			r := proxyDo(t, robot, "GET", base+"/pods/web/proxy/", "")
			if r.code == 200 {
				seen = r.echo(t)
			}
			return r.code == 200, nil
		})
		if seen.Authorization != "" {
			t.Errorf("the pod saw the caller's Authorization %q", seen.Authorization)
		}
		if r := proxyDo(t, alice, "HEAD", base+"/pods/web/proxy/", ""); r.code != 200 {
			t.Errorf("alice HEAD: %d, want 200 (HEAD is get)", r.code)
		}
		if r := proxyDo(t, alice, "OPTIONS", base+"/pods/web/proxy/", ""); r.code != 403 {
			t.Errorf("alice OPTIONS: %d, want 403 (OPTIONS has no verb: only a * rule allows it)", r.code)
		}
		r := proxyDo(t, alice, "POST", base+"/pods/web/proxy/", "x")
		if s := r.status(t); r.code != 403 || !strings.Contains(s.Message, `cannot create resource "pods/proxy"`) {
			t.Errorf("alice POST: %d %q, want 403 for create pods/proxy", r.code, s.Message)
		}
	})
}
