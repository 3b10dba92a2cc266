package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func leaf(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	cert, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestEnsureCreatesFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	b, err := Ensure(dir, Options{BindAddress: "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %v, want 0600", f, got)
		}
	}
	if !b.CA.IsCA {
		t.Error("CA certificate is not a CA")
	}
	if got := b.CA.NotAfter.Sub(b.CA.NotBefore); got < 9*365*24*time.Hour {
		t.Errorf("CA validity = %v, want about 10 years", got)
	}
}

func TestServingCertificateNames(t *testing.T) {
	b, err := Ensure(t.TempDir(), Options{BindAddress: "192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	cert := leaf(t, b.Serving)
	host, _ := os.Hostname()
	for _, name := range []string{
		"localhost", "127.0.0.1", "192.0.2.10", "10.43.0.1", host,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := cert.Verify(x509.VerifyOptions{
				DNSName:   name,
				Roots:     b.CAPool,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				t.Errorf("verify for %q: %v", name, err)
			}
		})
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: b.CAPool}); err == nil {
		t.Error("serving certificate is valid for example.com")
	}
}

func TestAdminCertificate(t *testing.T) {
	b, err := Ensure(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.AdminCertPEM, b.AdminKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert := leaf(t, pair)
	type subject struct {
		CN string
		O  []string
	}
	if diff := cmp.Diff(subject{AdminUser, []string{AdminGroup}}, subject{cert.Subject.CommonName, cert.Subject.Organization}); diff != "" {
		t.Errorf("admin subject (-want +got):\n%s", diff)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: b.CAPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin cert does not verify as a client: %v", err)
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		out[f] = data
	}
	return out
}

func TestEnsureReuse(t *testing.T) {
	tests := []struct {
		name    string
		second  Options
		changed []string // files expected to change on the second Ensure
	}{
		{name: "same options", second: Options{BindAddress: "127.0.0.1"}},
		{name: "new bind address", second: Options{BindAddress: "192.0.2.44"}, changed: []string{ServingCertFile, ServingKeyFile}},
		{name: "extra SAN", second: Options{BindAddress: "127.0.0.1", ExtraSANs: []string{"api.example"}}, changed: []string{ServingCertFile, ServingKeyFile}},
		{
			name:   "91 days left: kept",
			second: Options{BindAddress: "127.0.0.1", Now: func() time.Time { return time.Now().Add(LeafValidity - 91*24*time.Hour) }},
		},
		{
			name:    "89 days left: renewed at start",
			second:  Options{BindAddress: "127.0.0.1", Now: func() time.Time { return time.Now().Add(LeafValidity - 89*24*time.Hour) }},
			changed: []string{ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile},
		},
		{
			name:    "leaves near expiry",
			second:  Options{BindAddress: "127.0.0.1", Now: func() time.Time { return time.Now().Add(LeafValidity - RenewBefore/2) }},
			changed: []string{ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Ensure(dir, Options{BindAddress: "127.0.0.1"}); err != nil {
				t.Fatal(err)
			}
			before := readAll(t, dir)
			if _, err := Ensure(dir, tc.second); err != nil {
				t.Fatal(err)
			}
			after := readAll(t, dir)
			var changed []string
			for _, f := range []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile} {
				if !bytes.Equal(before[f], after[f]) {
					changed = append(changed, f)
				}
			}
			if diff := cmp.Diff(tc.changed, changed); diff != "" {
				t.Errorf("changed files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnsureIncompleteCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, Options{}); err == nil {
		t.Fatal("Ensure with a CA certificate but no key succeeded; want an error")
	}
}

// TestKubeconfigTLS checks the written kubeconfig end to end: client-go loads
// it, trusts the serving certificate and presents the admin certificate.
func TestKubeconfigTLS(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(filepath.Join(dir, "pki"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		io.WriteString(w, c.Subject.CommonName+"/"+c.Subject.Organization[0])
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{b.Serving}, ClientCAs: b.CAPool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	path := filepath.Join(dir, AdminKubeconfigFile)
	if err := b.WriteAdminKubeconfig(path, srv.URL); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode = %v, want 0600", st.Mode().Perm())
	}
	loaded, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.Clusters[loaded.Contexts[loaded.CurrentContext].Cluster].Server; got != srv.URL {
		t.Errorf("server = %q, want %q", got, srv.URL)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*rest.Config{"kubeconfig": restCfg, "AdminRESTConfig": b.AdminRESTConfig(srv.URL)} {
		t.Run(name, func(t *testing.T) {
			tr, err := rest.TransportFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if got, want := string(body), "system:admin/system:masters"; got != want {
				t.Errorf("server saw client %q, want %q", got, want)
			}
		})
	}
}

func TestServerURL(t *testing.T) {
	tests := []struct {
		host string
		port int
		want string
	}{
		{"127.0.0.1", 6443, "https://127.0.0.1:6443"},
		{"::1", 443, "https://[::1]:443"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := ServerURL(tc.host, tc.port); got != tc.want {
				t.Errorf("ServerURL(%q, %d) = %q, want %q", tc.host, tc.port, got, tc.want)
			}
		})
	}
}
