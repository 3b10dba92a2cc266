package pki

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRenew re-issues exactly the leaves within RenewBefore of expiry,
// under both the cluster CA and the etcd CA, keeping their names; Reissue
// re-issues a named leaf whenever asked and refuses a CA.
func TestRenew(t *testing.T) {
	dir := t.TempDir()
	b, err := Ensure(dir, Options{BindAddress: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureEtcd(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.EnsureFrontProxy(Options{}); err != nil {
		t.Fatal(err)
	}
	if got, err := Renew(dir, Options{}); err != nil || len(got) > 0 {
		t.Fatalf("nothing due: renewed %v, %v", got, err)
	}
	due := time.Now().Add(LeafValidity - RenewBefore + time.Hour)
	got, err := Renew(dir, Options{Now: func() time.Time { return due }})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range got {
		r, _ := filepath.Rel(dir, f)
		rel = append(rel, r)
	}
	want := []string{"admin.crt", "apiserver.crt", "front-proxy-client.crt", "etcd/apiserver-etcd-client.crt", "etcd/peer.crt", "etcd/server.crt"}
	if diff := cmp.Diff(want, rel); diff != "" {
		t.Errorf("renewed (-want +got):\n%s", diff)
	}
	renewed := readCertFile(t, filepath.Join(dir, ServingCertFile))
	if old := leaf(t, b.Serving); renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || !cmp.Equal(renewed.DNSNames, old.DNSNames) || renewed.Subject.String() != old.Subject.String() {
		t.Errorf("renewed serving certificate: serial %v names %v subject %v; old %v %v %v", renewed.SerialNumber, renewed.DNSNames, renewed.Subject, old.SerialNumber, old.DNSNames, old.Subject)
	}
	if err := renewed.CheckSignatureFrom(b.CA); err != nil {
		t.Errorf("renewed serving certificate: %v", err)
	}

	if err := Reissue(dir, Options{}, ServingCertFile); err != nil {
		t.Fatal(err)
	}
	if again := readCertFile(t, filepath.Join(dir, ServingCertFile)); again.SerialNumber.Cmp(renewed.SerialNumber) == 0 {
		t.Error("Reissue left the serving certificate as it was")
	}
	if err := Reissue(dir, Options{}, CACertFile); err == nil {
		t.Error("Reissue of the CA: no error")
	}
}
