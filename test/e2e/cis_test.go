package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/pki"
)

// TestCISProbe checks, from outside a running `skiff server` with its node
// agent and default flags, the CIS Kubernetes benchmark items that can be
// seen without reading its code: anonymous access, authorization,
// NodeRestriction, kubelet authentication and authorization, etcd's mutual
// TLS, encryption at rest, protected profiling and metrics, the files'
// modes, the audit log (the shared cluster runs with --audit-policy-file
// and --audit-log-path, which are off by default as in kube-apiserver),
// certificate rotation, and who holds system:masters. Each check logs
// PASS or FAIL.
func TestCISProbe(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(admin.CAData)
	pkiDir := filepath.Join(c.dataDir, "pki")

	check := func(name string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Errorf("FAIL %s: %v", name, err)
			return
		}
		t.Logf("PASS %s", name)
	}
	// get is an HTTPS GET with the given client certificate (none if
	// empty) and bearer token.
	get := func(url string, cert *tls.Certificate, token string) (int, string, error) {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(body), nil
	}
	statuses := func(base string, paths []string, cert *tls.Certificate, token string, want int) error {
		var bad []string
		for _, p := range paths {
			code, _, err := get(base+p, cert, token)
			if err != nil {
				return fmt.Errorf("GET %s: %w", p, err)
			}
			if code != want {
				bad = append(bad, fmt.Sprintf("%s: %d", p, code))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("want %d, got %s", want, strings.Join(bad, ", "))
		}
		return nil
	}

	// A service account with no role bound: authenticated, never authorized.
	ns := c.namespace(t, "cis-probe")
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := tr.Status.Token

	check("1.2.1 anonymous requests are refused (401) except health and version", func() error {
		if err := statuses(admin.Host, []string{"/api", "/apis", "/api/v1/secrets", "/api/v1/namespaces/kube-system/pods", "/openapi/v2", "/metrics", "/debug/pprof/", "/logs/"}, nil, "", http.StatusUnauthorized); err != nil {
			return err
		}
		return statuses(admin.Host, []string{"/healthz", "/livez", "/readyz", "/version"}, nil, "", http.StatusOK)
	})
	check("1.2.6-1.2.8 authorization is not AlwaysAllow: a user without roles gets 403", func() error {
		return statuses(admin.Host, []string{"/api/v1/secrets", "/api/v1/namespaces/" + ns + "/pods", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"}, nil, token, http.StatusForbidden)
	})
	check("1.2.8 authorization mode RBAC: a RoleBinding to view lets the user read, not write", func() error {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nobody-view"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nobody", Namespace: ns}}}
		if _, err := c.client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		defer c.client.RbacV1().RoleBindings(ns).Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
		cfg := rest.AnonymousClientConfig(admin)
		cfg.BearerToken = token
		sa, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(10 * time.Second) // the binding reaches the authorizer's cache
		for {
			_, err = sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("list pods with view: %w", err)
		}
		if _, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			return fmt.Errorf("create a configmap with view: %v, want 403", err)
		}
		return nil
	})
	check("1.2.18, 1.3.2, 1.4.1 profiling and metrics need authorization", func() error {
		return statuses(admin.Host, []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap"}, nil, token, http.StatusForbidden)
	})
	check("1.2.15 NodeRestriction: a node cannot change another node", func() error {
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cis-other-node"}}
		if _, err := c.client.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		defer c.client.CoreV1().Nodes().Delete(context.Background(), other.Name, metav1.DeleteOptions{})
		nodeCfg := rest.AnonymousClientConfig(admin)
		nodeCfg.CertFile, nodeCfg.KeyFile = filepath.Join(pkiDir, "kubelet-client.crt"), filepath.Join(pkiDir, "kubelet-client.key")
		node, err := kubernetes.NewForConfig(nodeCfg)
		if err != nil {
			return err
		}
		self, err := node.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("who is the node: %w", err)
		}
		if self.Status.UserInfo.Username != pki.NodeUser(c.node) {
			return fmt.Errorf("the agent's credentials are %q, want %q", self.Status.UserInfo.Username, pki.NodeUser(c.node))
		}
		patch := []byte(`{"metadata":{"labels":{"cis":"probe"}}}`)
		_, err = node.CoreV1().Nodes().Patch(ctx, other.Name, "application/merge-patch+json", patch, metav1.PatchOptions{})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("patch another node as %s: %v, want 403", pki.NodeUser(c.node), err)
		}
		return nil
	})
	kubelet := fmt.Sprintf("https://127.0.0.1:%d", c.kubeletPort)
	check("4.2.1 the kubelet API refuses anonymous requests (401)", func() error {
		return statuses(kubelet, []string{"/pods", "/metrics", "/stats/summary", "/logs/", "/configz"}, nil, "", http.StatusUnauthorized)
	})
	check("4.2.2 the kubelet API authorizes (403 for a user without nodes/proxy)", func() error {
		return statuses(kubelet, []string{"/pods", "/metrics", "/stats/summary"}, nil, token, http.StatusForbidden)
	})

	etcdAddr := fmt.Sprintf("127.0.0.1:%d", c.ports.etcdClient)
	etcdCA, err := os.ReadFile(filepath.Join(pkiDir, pki.EtcdDir, pki.EtcdCACertFile))
	if err != nil {
		t.Fatal(err)
	}
	etcdRoots := x509.NewCertPool()
	etcdRoots.AppendCertsFromPEM(etcdCA)
	check("2.1, 2.2 etcd serves only TLS with client certificates from its own CA", func() error {
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + etcdAddr + "/version"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return fmt.Errorf("plain http /version answered 200")
			}
		}
		adminPair, err := tls.X509KeyPair(admin.CertData, admin.KeyData)
		if err != nil {
			return err
		}
		for _, tc := range []struct {
			what    string
			certs   []tls.Certificate
			wantErr string
		}{
			{"no certificate", nil, "certificate required"},
			{"the cluster CA's admin certificate", []tls.Certificate{adminPair}, "unknown certificate authority"},
		} {
			cfg := &tls.Config{RootCAs: etcdRoots, MinVersion: tls.VersionTLS12}
			if len(tc.certs) > 0 {
				// Sent even though etcd asks for its own CA's certificates.
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc.certs[0], nil }
			}
			conn, err := tls.Dial("tcp", etcdAddr, cfg)
			if err == nil {
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				return fmt.Errorf("%s: %v, want %q", tc.what, err, tc.wantErr)
			}
		}
		return nil
	})
	check("1.2.27 Secrets are encrypted at rest", func() error {
		if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"p": "cis-clear-text"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, pki.EtcdDir, pki.EtcdClientCertFile), filepath.Join(pkiDir, pki.EtcdDir, pki.EtcdClientKeyFile))
		if err != nil {
			return err
		}
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + etcdAddr}, DialTimeout: 5 * time.Second,
			TLS: &tls.Config{RootCAs: etcdRoots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
		if err != nil {
			return err
		}
		defer etcd.Close()
		resp, err := etcd.Get(ctx, "/registry/secrets/"+ns+"/s")
		if err != nil || len(resp.Kvs) != 1 {
			return fmt.Errorf("read the secret from etcd: %v %v", resp, err)
		}
		if v := resp.Kvs[0].Value; !bytes.HasPrefix(v, []byte("k8s:enc:")) || bytes.Contains(v, []byte("cis-clear-text")) {
			return fmt.Errorf("stored value begins %q", v[:min(len(v), 24)])
		}
		return nil
	})
	check("1.2.7 authorization mode Node: a node reads no Secret its pods do not use", func() error {
		nodeCfg := rest.AnonymousClientConfig(admin)
		nodeCfg.CertFile, nodeCfg.KeyFile = filepath.Join(pkiDir, "kubelet-client.crt"), filepath.Join(pkiDir, "kubelet-client.key")
		node, err := kubernetes.NewForConfig(nodeCfg)
		if err != nil {
			return err
		}
		_, err = node.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no relationship found between node") {
			return fmt.Errorf("get a secret no pod uses as %s: %v, want 403 from the Node authorizer", pki.NodeUser(c.node), err)
		}
		return nil
	})
	check("1.2.16-1.2.19 the audit log records requests (Metadata: who, what, no Secret data)", func() error {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(c.auditLog())
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte("cis-clear-text")) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte("cis-clear-text")))) {
				return fmt.Errorf("the audit log holds the Secret's data")
			}
			for _, line := range bytes.Split(b, []byte("\n")) {
				var ev struct {
					Level, Stage, Verb string
					User               struct{ Username string }
					ObjectRef          struct{ Resource, Namespace, Name string }
					ResponseStatus     struct{ Code int }
				}
				if json.Unmarshal(line, &ev) == nil && ev.Verb == "create" && ev.ObjectRef.Resource == "secrets" && ev.ObjectRef.Namespace == ns && ev.ObjectRef.Name == "s" &&
					ev.Stage == "ResponseComplete" && ev.Level == "Metadata" && ev.User.Username == pki.AdminUser && ev.ResponseStatus.Code == http.StatusCreated {
					return nil
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no Metadata event for the Secret's create in %s", c.auditLog())
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	check("1.1.x data and PKI directories 0700, keys and credentials 0600", func() error {
		var bad []string
		for _, d := range []string{c.dataDir, pkiDir, filepath.Join(pkiDir, pki.EtcdDir), filepath.Join(c.dataDir, "etcd")} {
			if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
				bad = append(bad, fmt.Sprintf("%s: %v %v", d, st.Mode().Perm(), err))
			}
		}
		creds := []string{filepath.Join(c.dataDir, pki.AdminKubeconfigFile), filepath.Join(c.dataDir, "encryption-config.yaml"), filepath.Join(c.dataDir, "token"), c.auditLog()}
		err := filepath.WalkDir(pkiDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".key") || strings.HasSuffix(path, ".crt")) {
				creds = append(creds, path)
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, f := range creds {
			if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
				bad = append(bad, fmt.Sprintf("%s: %v %v", f, st.Mode().Perm(), err))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return nil
	})
	check("1.2.29, 4.2.10 serving certificates are reloaded from their files without a restart (API server, kubelet)", func() error {
		apiURL, err := url.Parse(admin.Host)
		if err != nil {
			return err
		}
		for _, tc := range []struct{ file, addr string }{
			{pki.ServingCertFile, apiURL.Host},
			{pki.KubeletServingCertFile, fmt.Sprintf("127.0.0.1:%d", c.kubeletPort)},
		} {
			// What the server's renewal does once a certificate is due.
			if err := pki.Reissue(pkiDir, pki.Options{}, tc.file); err != nil {
				return err
			}
			b, err := os.ReadFile(filepath.Join(pkiDir, tc.file))
			if err != nil {
				return err
			}
			block, _ := pem.Decode(b)
			want, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return err
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				conn, err := tls.Dial("tcp", tc.addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
				if err != nil {
					return fmt.Errorf("%s: %w", tc.addr, err)
				}
				got := conn.ConnectionState().PeerCertificates[0]
				conn.Close()
				if got.SerialNumber.Cmp(want.SerialNumber) == 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s still serves serial %v 30s after %s was replaced (serial %v)", tc.addr, got.SerialNumber, tc.file, want.SerialNumber)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return nil
	})
	check("5.1.1 only the admin credentials are in system:masters, bound only to cluster-admin", func() error {
		var masters []string
		err := filepath.WalkDir(c.dataDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".crt") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for block, rest := pem.Decode(b); block != nil; block, rest = pem.Decode(rest) {
				if cert, err := x509.ParseCertificate(block.Bytes); err == nil && slices.Contains(cert.Subject.Organization, pki.AdminGroup) {
					masters = append(masters, strings.TrimPrefix(path, c.dataDir+"/"))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !slices.Equal(masters, []string{"pki/" + pki.AdminCertFile}) {
			return fmt.Errorf("certificates in system:masters: %v, want only pki/admin.crt", masters)
		}
		crbs, err := c.client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, b := range crbs.Items {
			for _, s := range b.Subjects {
				if s.Name == pki.AdminGroup && b.RoleRef.Name != "cluster-admin" {
					return fmt.Errorf("%s binds system:masters to %s", b.Name, b.RoleRef.Name)
				}
				if b.RoleRef.Name == "cluster-admin" && s.Name != pki.AdminGroup {
					return fmt.Errorf("%s gives cluster-admin to %s %s", b.Name, s.Kind, s.Name)
				}
			}
		}
		return nil
	})
}
