package pki

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCertificateFiles serves a certificate from its files and, once they
// are replaced (written through a temporary file and a rename, as Ensure
// and the agents write them), the new one, without being restarted; a
// pair that does not match keeps the last good one.
func TestCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	files, err := NewCertificateFiles("serving-cert", certFile, keyFile, b.CA.Raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = files.Start(ctx) }()
	<-files.Ready()

	served := func() *tls.Certificate {
		c, err := files.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := served()
	if first.Leaf.SerialNumber.Cmp(leaf(t, b.Serving).SerialNumber) != 0 || len(first.Certificate) != 2 {
		t.Fatalf("serves serial %v with %d certificates, want the file's with the CA after it", first.Leaf.SerialNumber, len(first.Certificate))
	}

	// A key that does not match the certificate: the old pair stays.
	other, err := Ensure(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := os.ReadFile(filepath.Join(other.Dir, ServingKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(keyFile, otherKey); err != nil {
		t.Fatal(err)
	}
	// Renewal (Ensure re-issues an expiring leaf) replaces both files.
	renewed, err := Ensure(dir, Options{BindAddress: "127.0.0.1", Now: func() time.Time { return time.Now().Add(LeafValidity - RenewBefore + time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	want := leaf(t, renewed.Serving).SerialNumber
	if want.Cmp(first.Leaf.SerialNumber) == 0 {
		t.Fatal("Ensure did not renew the serving certificate")
	}
	deadline := time.Now().Add(30 * time.Second)
	for served().Leaf.SerialNumber.Cmp(want) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("still serving the old certificate 30s after the files were replaced")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(served().Certificate) != 2 {
		t.Error("the reloaded certificate lost the CA from its chain")
	}
}
