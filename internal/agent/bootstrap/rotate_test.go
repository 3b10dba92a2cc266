package bootstrap_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
	"github.com/skiff-sh/skiff/internal/pki"
)

// TestRotate renews a joined node's client certificate through CSRs: not
// before RenewAt, then with the lifetime asked for (10 minutes, the
// shortest the signer gives), and again when that short-lived one is due;
// each new certificate authenticates as the node.
func TestRotate(t *testing.T) {
	c, token := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	id, err := bootstrap.Join(ctx, bootstrap.Options{Server: c.Config.Host, Token: token.String(), NodeName: "node-r", Dir: dir, ServingAddresses: []string{"127.0.0.1"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := readCert(t, id.ClientCertFile)
	clk := testingclock.NewFakeClock(time.Now())
	r := &bootstrap.Rotator{Dir: dir, Node: "node-r", Config: id.RESTConfig, Lifetime: 10 * time.Minute, Clock: clk}

	// Not due: nothing changes.
	next, err := r.RenewIfDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(bootstrap.RenewAt(first)) || readCert(t, id.ClientCertFile).SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("renewed before it was due (next %v, want %v)", next, bootstrap.RenewAt(first))
	}

	serials := map[string]bool{first.SerialNumber.String(): true}
	for round, at := range []func() time.Time{
		func() time.Time { return bootstrap.RenewAt(first).Add(time.Second) },
		func() time.Time { return next.Add(time.Second) },
	} {
		clk.SetTime(at())
		if next, err = r.RenewIfDue(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		renewed := readCert(t, id.ClientCertFile)
		if serials[renewed.SerialNumber.String()] {
			t.Fatalf("round %d: the certificate was not replaced", round)
		}
		serials[renewed.SerialNumber.String()] = true
		if life := time.Until(renewed.NotAfter); life > 10*time.Minute || life < 9*time.Minute {
			t.Errorf("round %d: the renewed certificate expires in %v, want about 10m", round, life)
		}
		if !next.Equal(bootstrap.RenewAt(renewed)) {
			t.Errorf("round %d: next renewal %v, want %v", round, next, bootstrap.RenewAt(renewed))
		}
		// The files now hold a pair the API server takes as the node.
		certPEM, _ := os.ReadFile(id.ClientCertFile)
		keyPEM, _ := os.ReadFile(id.ClientKeyFile)
		cfg := rest.AnonymousClientConfig(id.RESTConfig)
		cfg.CertData, cfg.KeyData = certPEM, keyPEM
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || who.Status.UserInfo.Username != "system:node:node-r" {
			t.Errorf("round %d: the renewed certificate authenticates as %v (%v), want system:node:node-r", round, who, err)
		}
	}
}

// TestRotateServing renews a joined node's kubelet serving certificate by
// CSR at RenewAt, for the node name and its addresses, while a TLS server
// serves the files through pki.CertificateFiles (as the kubelet API does):
// a client connecting afterwards gets the new certificate, with no restart.
func TestRotateServing(t *testing.T) {
	c, token := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	id, err := bootstrap.Join(ctx, bootstrap.Options{Server: c.Config.Host, Token: token.String(), NodeName: "node-s", Dir: dir, ServingAddresses: []string{"127.0.0.1"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	files, err := pki.NewCertificateFiles("kubelet-serving", id.ServingCertFile, id.ServingKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = files.Start(ctx) }()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: files.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	served := func() *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: c.PKI.CAPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("dial the kubelet's address: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	first := served()
	if first.SerialNumber.Cmp(readCert(t, id.ServingCertFile).SerialNumber) != 0 {
		t.Fatal("the server does not serve the joined certificate")
	}

	clk := testingclock.NewFakeClock(time.Now())
	r := &bootstrap.Rotator{Dir: dir, Node: "node-s", Serving: true, Addresses: []string{"127.0.0.1"}, Config: id.RESTConfig, Lifetime: 10 * time.Minute, Clock: clk}
	if next, err := r.RenewIfDue(ctx); err != nil || !next.Equal(bootstrap.RenewAt(first)) {
		t.Fatalf("not due: next %v, %v; want %v", next, err, bootstrap.RenewAt(first))
	}
	clk.SetTime(bootstrap.RenewAt(first).Add(time.Second))
	if _, err := r.RenewIfDue(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := readCert(t, id.ServingCertFile)
	if renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the serving certificate was not replaced")
	}
	if renewed.Subject.CommonName != "system:node:node-s" || !slices.Contains(renewed.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || renewed.VerifyHostname("node-s") != nil || renewed.VerifyHostname("127.0.0.1") != nil {
		t.Errorf("renewed certificate: CN %q, usages %v, names %v %v", renewed.Subject.CommonName, renewed.ExtKeyUsage, renewed.DNSNames, renewed.IPAddresses)
	}
	// The watcher reloads the files (fsnotify; at the latest its retry).
	deadline := time.Now().Add(30 * time.Second)
	for served().SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the server still serves the old certificate 30s after renewal")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
