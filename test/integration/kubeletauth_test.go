package integration

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"

	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/kubelet/server/servertest"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestKubeletAPIAuth runs the kubelet API as an agent does (webhook
// authentication and authorization: TokenReview and SubjectAccessReview
// asked of the API server under the node's identity) against a Node,RBAC
// API server: anonymous is 401, a service account's token is 403 until a
// ClusterRole grants it nodes/metrics or nodes/proxy, and the API server's
// own kubelet client (pods/log, nodes/proxy) is allowed by the bootstrap
// policy's skiff:kubelet-api-admin binding.
func TestKubeletAPIAuth(t *testing.T) {
	// The kubelet link (the API server's kubelet client certificate, the
	// kubelet's serving certificate) has a CA of its own here, as in
	// TestKubeletProxy; tokens and reviews go to the cluster.
	link, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	linkTLS, err := link.KubeletClientTLS(pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.AuthorizationModes = kubeapiserver.DefaultAuthorizationModes
		cfg.KubeletClientTLS = linkTLS
	}})
	admin := c.Clientset()
	ctx := testCtx(t, 2*time.Minute)
	policy, err := bootstrappolicy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrappolicy.Reconcile(ctx, admin, policy); err != nil {
		t.Fatal(err)
	}

	// The node's own client, as the agent's kubelet has it.
	nodeCert, nodeKey, err := c.PKI.IssueClient("system:node:node-a", []string{"system:nodes"}, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := kubernetes.NewForConfig(c.PKI.ClientRESTConfig(c.Config.Host, nodeCert, nodeKey))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := link.EnsureKubeletServing("kubelet-a.crt", "kubelet-a.key", "node-a", []string{"127.0.0.1"}, pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, rt := servertest.NewHost(), servertest.NewRuntime(t)
	servertest.AddWebPod(t, host, rt, filepath.Join(t.TempDir(), "pods"), "node-a", proxyLog, "")
	ks, err := kubeletserver.New(host, rt, nil, kubeletserver.Options{
		Address: "127.0.0.1:0", Certificate: &serving, ClientCA: link.CAPool, NodeName: "node-a",
		Metrics: kubeletserver.NewMetrics(nil), APIClient: nodeClient,
		UnauthorizedCacheTTL: time.Nanosecond, // a new grant counts at once
	})
	if err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(context.Background())
	kdone := make(chan error, 1)
	go func() { kdone <- ks.Start(kctx) }()
	t.Cleanup(func() { stop(); <-kdone })
	<-ks.Ready()
	_, portStr, _ := net.SplitHostPort(ks.Addr())
	port, _ := strconv.Atoi(portStr)
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t, admin)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token
	user := "system:serviceaccount:" + ns + ":scraper"
	direct := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: link.CAPool}}}
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ks.Addr()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := direct.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	if code, body := get("/pods", ""); code != 401 || body != "Unauthorized" {
		t.Errorf("anonymous /pods = %d %q, want 401 Unauthorized", code, body)
	}
	if code, body := get("/healthz", "not-a-token"); code != 401 {
		t.Errorf("bad token /healthz = %d %q, want 401", code, body)
	}
	if code, body := get("/metrics", token); code != 403 || body != "Forbidden (user="+user+", verb=get, resource=nodes, subresource(s)=[metrics])" {
		t.Errorf("service account without RBAC: /metrics = %d %q, want 403", code, body)
	}
	if code, body := get("/pods", token); code != 403 || body != "Forbidden (user="+user+", verb=get, resource=nodes, subresource(s)=[pods proxy])" {
		t.Errorf("service account without RBAC: /pods = %d %q, want 403", code, body)
	}

	grant := func(name string, resources ...string) {
		t.Helper()
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "create"}, APIGroups: []string{""}, Resources: resources}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant(ns+"-metrics", "nodes/metrics")
	eventually(t, 10*time.Second, "nodes/metrics lets the scraper read /metrics/resource", func() (bool, error) {
		code, _ := get("/metrics/resource", token)
		return code == 200, nil
	})
	if code, _ := get("/pods", token); code != 403 {
		t.Errorf("nodes/metrics grants /pods: %d", code)
	}
	grant(ns+"-proxy", "nodes/proxy")
	eventually(t, 10*time.Second, "nodes/proxy lets the scraper read /pods", func() (bool, error) {
		code, body := get("/pods", token)
		return code == 200 && strings.Contains(body, `"kind":"PodList"`), nil
	})
	if code, body := get("/containerLogs/default/web/app", token); code != 200 || !strings.Contains(body, "last line") {
		t.Errorf("nodes/proxy: /containerLogs = %d %q", code, body)
	}
	if code, _ := get("/stats/summary", token); code != 403 {
		t.Errorf("nodes/proxy grants /stats/summary: %d", code)
	}

	// The API server's kubelet client is authorized by the bootstrap
	// policy: nodes/proxy and pods/log through the API server work.
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/node-a/proxy/metrics").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), "kubelet_node_name") {
		t.Errorf("nodes/proxy/metrics through the API server: %v %.200s", err, raw)
	}
	pod := servertest.WebPod("node-a")
	pod.ObjectMeta = metav1.ObjectMeta{Name: "web", Namespace: "default"}
	pod.Status = corev1.PodStatus{}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs, err := admin.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "last line") {
		t.Errorf("pods/log through the API server: %v %q", err, logs)
	}

	// Over a websocket, as the e2e suite and browsers read logs: the log
	// arrives as binary messages ("binary.k8s.io"), base64 when asked.
	tlsCfg, err := rest.TLSConfigFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"binary.k8s.io", "base64.binary.k8s.io"} {
		u := strings.Replace(c.Config.Host, "https://", "wss://", 1) + "/api/v1/namespaces/default/pods/web/log?container=app"
		wsCfg, err := websocket.NewConfig(u, "https://localhost")
		if err != nil {
			t.Fatal(err)
		}
		wsCfg.Protocol, wsCfg.TlsConfig = []string{proto}, tlsCfg
		ws, err := websocket.DialConfig(wsCfg)
		if err != nil {
			t.Fatalf("pods/log over a websocket (%s): %v", proto, err)
		}
		var got []byte
		for {
			var msg []byte
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				break
			}
			if proto == "base64.binary.k8s.io" {
				if msg, err = base64.StdEncoding.DecodeString(string(msg)); err != nil {
					t.Fatalf("a base64 log message: %v", err)
				}
			}
			got = append(got, msg...)
		}
		ws.Close()
		if !strings.Contains(string(got), "last line") {
			t.Errorf("pods/log over a websocket (%s): %q", proto, got)
		}
	}
}
