package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/cli/scheduler"
	"github.com/skiff-sh/skiff/internal/component"
	"github.com/skiff-sh/skiff/internal/pki"
)

// TestComponentSecurePort runs `skiff scheduler` (its command's Run) with
// its default serving, as kube-scheduler's secure port: /healthz and
// /metrics over HTTPS with a self-signed certificate; /metrics needs a
// bearer token or a client certificate of the API server's client CA
// (read from kube-system/extension-apiserver-authentication) whose user
// the API server authorizes for the path (system:monitoring); a
// certificate of another CA fails the handshake, plain HTTP is refused.
func TestComponentSecurePort(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	// skiff server publishes its client CA there (the aggregator); the
	// harness runs none, so the test writes what it would.
	if _, err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication"},
		Data:       map[string]string{"client-ca-file": string(c.PKI.CAPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	f := scheduler.DefaultFlags()
	f.Kubeconfig = c.Kubeconfig()
	f.LeaderElect = false
	f.Serving.BindAddress, f.Serving.SecurePort = "127.0.0.1", port
	if f.Serving != (component.SecureServing{BindAddress: "127.0.0.1", SecurePort: port}) {
		t.Fatalf("default serving flags changed: %+v", f.Serving)
	}
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.Run(runCtx, cfg) }()
	t.Cleanup(func() {
		stop()
		<-done
	})

	// A service account bound to nothing, and one that may read /metrics.
	ns := newNamespace(t, admin)
	token := func(name string) string {
		t.Helper()
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	nobody, prom := token("nobody"), token("prom")
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prom-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:monitoring"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prom", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clientCert := func(b *pki.Bundle, user string, groups ...string) *tls.Certificate {
		t.Helper()
		certPEM, keyPEM, err := b.IssueClient(user, groups, pki.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &pair
	}
	other, err := pki.Ensure(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}

	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	get := func(path, token string, cert *tls.Certificate) (int, string, error) {
		tc := &tls.Config{InsecureSkipVerify: true} // the serving certificate is self-signed
		if cert != nil {
			// Presented whatever CAs the server names (Go's client would
			// otherwise leave out a certificate of another CA).
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	eventually(t, 30*time.Second, "the secure port serves /healthz", func() (bool, error) {
		code, _, err := get("/healthz", "", nil)
		return err == nil && code == http.StatusOK, nil
	})
	// Bindings reach the authorizer through the API server's cache.
	eventually(t, 10*time.Second, "prom's token reads /metrics", func() (bool, error) {
		code, body, err := get("/metrics", prom, nil)
		return err == nil && code == http.StatusOK && strings.Contains(body, "scheduler_"), nil
	})

	for _, tc := range []struct {
		name, token string
		cert        *tls.Certificate
		want        int
	}{
		{"no credentials", "", nil, http.StatusUnauthorized},
		{"a token the API server refuses", "not-a-token", nil, http.StatusUnauthorized},
		{"a service account bound to nothing", nobody, nil, http.StatusForbidden},
		{"a client certificate of a user bound to nothing", "", clientCert(c.PKI, "carol"), http.StatusForbidden},
		{"a client certificate in system:monitoring", "", clientCert(c.PKI, "prometheus", "system:monitoring"), http.StatusOK},
		{"the admin certificate", "", clientCert(c.PKI, "admin", "system:masters"), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get("/metrics", tc.token, tc.cert)
			if err != nil || code != tc.want {
				t.Errorf("GET /metrics: %d %v %.200s, want %d", code, err, body, tc.want)
			}
		})
	}
	t.Run("a client certificate of another CA", func(t *testing.T) {
		if code, _, err := get("/metrics", "", clientCert(other, "admin", "system:masters")); err == nil {
			t.Errorf("GET /metrics with a certificate of another CA: %d, want a failed handshake", code)
		}
	})
	t.Run("plain HTTP", func(t *testing.T) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP /metrics: %d, want 400 (an HTTPS port)", resp.StatusCode)
			}
		}
	})
}
