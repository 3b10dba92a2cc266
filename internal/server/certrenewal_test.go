package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/pki"
)

// TestCertificateRenewalWhileRunning runs a server whose certificates
// have 90 days and 10 minutes left (so its start keeps them), then lets
// its renewal check run 11 minutes later: every leaf is re-issued, a new
// connection gets the new serving certificate with no restart, and the
// rewritten admin kubeconfig, holding the new admin certificate, works.
func TestCertificateRenewalWhileRunning(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now()
	issued := pki.Options{BindAddress: "127.0.0.1", Now: func() time.Time { return t0.Add(-(pki.LeafValidity - pki.RenewBefore) + 10*time.Minute) }}
	bundle, err := pki.Ensure(PKIDir(dir), issued)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.EnsureEtcd(PKIDir(dir), issued); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.EnsureFrontProxy(issued); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.EnsureKubeletClient(issued); err != nil {
		t.Fatal(err)
	}
	for name, user := range map[string]string{"kube-controller-manager": pki.ControllerManagerUser, "kube-scheduler": pki.SchedulerUser} {
		if _, _, err := bundle.EnsureClient(name, user, nil, issued); err != nil {
			t.Fatal(err)
		}
	}
	stop := runServer(t, Config{DataDir: dir, BindAddress: "127.0.0.1", DisableAgent: true, Services: ServicesConfig{DisableDNS: true}})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kubeconfig := AdminKubeconfigPath(dir)
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(admin.CAData)
	served := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("dial the API server: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	before := served()
	if left := time.Until(before.NotAfter); left > pki.RenewBefore+10*time.Minute || left < pki.RenewBefore {
		t.Fatalf("the server started with a serving certificate %v from expiry, want the one made 90 days and 10 minutes from it", left)
	}

	r := newCertRenewal(dir, admin.Host)
	r.clock = testingclock.NewFakeClock(t0.Add(11 * time.Minute))
	renewed, err := r.renew(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pkiDir := PKIDir(dir)
	var names []string
	for _, f := range renewed {
		rel, _ := filepath.Rel(pkiDir, f)
		names = append(names, rel)
	}
	want := []string{"admin.crt", "apiserver-kubelet-client.crt", "apiserver.crt", "front-proxy-client.crt", "kube-controller-manager.crt", "kube-scheduler.crt",
		"etcd/apiserver-etcd-client.crt", "etcd/peer.crt", "etcd/server.crt"}
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Errorf("renewed %v, missing %s", names, n)
		}
	}
	// Nothing is due any more.
	if again, err := r.renew(ctx); err != nil || len(again) > 0 {
		t.Errorf("second check renewed %v (%v), want nothing", again, err)
	}

	file := readCertificate(t, filepath.Join(pkiDir, pki.ServingCertFile))
	if file.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("apiserver.crt was not re-issued")
	}
	if diff := cmp.Diff(before.DNSNames, file.DNSNames); diff != "" {
		t.Errorf("renewed serving certificate's names (-old +new):\n%s", diff)
	}
	deadline := time.Now().Add(30 * time.Second)
	for served().SerialNumber.Cmp(file.SerialNumber) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the API server still serves the old certificate 30s after renewal")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The admin kubeconfig holds the new admin certificate, and works.
	admin2, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(admin2.CertData)
	if block == nil {
		t.Fatal("admin kubeconfig holds no certificate")
	}
	if cert, _ := x509.ParseCertificate(block.Bytes); cert == nil || cert.SerialNumber.Cmp(readCertificate(t, filepath.Join(pkiDir, pki.AdminCertFile)).SerialNumber) != 0 {
		t.Error("the admin kubeconfig was not rewritten with the renewed admin certificate")
	}
	cs, err := kubernetes.NewForConfig(admin2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the renewed admin kubeconfig: %v", err)
	}
}

func readCertificate(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
