package pki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEnsureEtcd: the etcd PKI has a CA of its own (the cluster CA's
// certificates do not verify against it), is kept across starts, and its
// leaves are renewed at a start within RenewBefore of expiry.
func TestEnsureEtcd(t *testing.T) {
	dir := t.TempDir()
	cluster, err := Ensure(dir, Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	files, err := EnsureEtcd(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(readCertFile(t, files.CA))
	for _, f := range []string{files.ServerCert, files.PeerCert, files.ClientCert} {
		if _, err := readCertFile(t, f).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s does not verify against the etcd CA: %v", filepath.Base(f), err)
		}
	}
	if readCertFile(t, files.CA).Equal(cluster.CA) {
		t.Fatal("etcd shares the cluster CA")
	}
	admin := readCertFile(t, filepath.Join(dir, AdminCertFile))
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the admin certificate verifies against the etcd CA")
	}
	if got := readCertFile(t, files.ClientCert).Subject.CommonName; got != EtcdClientUser {
		t.Errorf("client CN = %q, want %q", got, EtcdClientUser)
	}
	if st, err := os.Stat(filepath.Join(dir, EtcdDir)); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("etcd pki dir: %v %v, want 0700", st, err)
	}

	serial := func() []string {
		var out []string
		for _, f := range []string{files.CA, files.ServerCert, files.PeerCert, files.ClientCert} {
			out = append(out, readCertFile(t, f).SerialNumber.String())
		}
		return out
	}
	before := serial()
	if _, err := EnsureEtcd(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, serial()); d != "" {
		t.Errorf("a second start changed certificates (-before +after):\n%s", d)
	}
	if _, err := EnsureEtcd(dir, Options{Now: func() time.Time { return time.Now().Add(LeafValidity - 89*24*time.Hour) }}); err != nil {
		t.Fatal(err)
	}
	after := serial()
	if after[0] != before[0] {
		t.Error("the etcd CA was replaced")
	}
	for i := 1; i < len(after); i++ {
		if after[i] == before[i] {
			t.Errorf("leaf %d not renewed 89 days before expiry", i)
		}
	}
}

func readCertFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
