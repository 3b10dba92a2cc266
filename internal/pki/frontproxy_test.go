package pki

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// TestEnsureFrontProxy: the front-proxy CA is its own (not the cluster
// CA), signs a client certificate CN front-proxy-client, and both are
// reused on the next call.
func TestEnsureFrontProxy(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := b.EnsureFrontProxy(Options{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(fp.CAPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.Equal(b.CA) {
		t.Fatalf("front-proxy CA %q: IsCA %v, the cluster CA: %v", ca.Subject, ca.IsCA, ca.Equal(b.CA))
	}
	leaf, err := x509.ParseCertificate(fp.Client.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != FrontProxyClientUser || leaf.CheckSignatureFrom(ca) != nil || leaf.CheckSignatureFrom(b.CA) == nil {
		t.Errorf("client %q: signed by the front-proxy CA %v, by the cluster CA %v", leaf.Subject,
			leaf.CheckSignatureFrom(ca) == nil, leaf.CheckSignatureFrom(b.CA) == nil)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify for client auth: %v", err)
	}
	again, err := b.EnsureFrontProxy(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CAPEM) != string(fp.CAPEM) || string(again.Client.Certificate[0]) != string(fp.Client.Certificate[0]) {
		t.Error("a second call issued new certificates")
	}
}
