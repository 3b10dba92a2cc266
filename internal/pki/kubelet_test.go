package pki

import (
	"crypto/x509"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubeletCertificates(t *testing.T) {
	b, err := Ensure(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := b.EnsureKubeletClient(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := leaf(t, client)
	if c.Subject.CommonName != KubeletClientUser {
		t.Errorf("client CN = %q", c.Subject.CommonName)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: b.CAPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify as a client: %v", err)
	}
	again, err := b.EnsureKubeletClient(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if leaf(t, again).SerialNumber.Cmp(c.SerialNumber) != 0 {
		t.Error("a valid kubelet client certificate was re-issued")
	}

	serving, err := b.EnsureKubeletServing("kubelet.crt", "kubelet.key", "node-a", []string{"10.0.0.7"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := leaf(t, serving)
	if diff := cmp.Diff([]string{"system:nodes"}, s.Subject.Organization); diff != "" || s.Subject.CommonName != "system:node:node-a" {
		t.Errorf("serving subject = %v", s.Subject)
	}
	for _, host := range []string{"node-a", "10.0.0.7", "127.0.0.1"} {
		if _, err := s.Verify(x509.VerifyOptions{Roots: b.CAPool, DNSName: host}); err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", host, err)
		}
	}
	// A new address re-issues it.
	moved, err := b.EnsureKubeletServing("kubelet.crt", "kubelet.key", "node-a", []string{"10.0.0.8"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := leaf(t, moved); !m.IPAddresses[len(m.IPAddresses)-1].Equal(net.ParseIP("10.0.0.8")) {
		t.Errorf("moved serving certificate IPs = %v", m.IPAddresses)
	}
}
