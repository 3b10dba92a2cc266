package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial int64

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

type leafOpts struct {
	cn        string
	orgs      []string
	notBefore time.Time
	notAfter  time.Time
	usage     []x509.ExtKeyUsage
}

func (ca *testCA) issue(t *testing.T, o leafOpts) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.notBefore.IsZero() {
		o.notBefore = time.Now().Add(-time.Hour)
	}
	if o.notAfter.IsZero() {
		o.notAfter = time.Now().Add(time.Hour)
	}
	if o.usage == nil {
		o.usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: o.cn, Organization: o.orgs},
		NotBefore:    o.notBefore,
		NotAfter:     o.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  o.usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestX509(t *testing.T) {
	ca := newCA(t, "skiff-client-ca")
	other := newCA(t, "someone-else")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	tests := []struct {
		name    string
		certs   []*x509.Certificate
		noTLS   bool
		want    *User
		wantOK  bool
		wantErr bool
	}{
		{name: "no TLS", noTLS: true},
		{name: "no client certificate"},
		{
			name:   "admin",
			certs:  []*x509.Certificate{ca.issue(t, leafOpts{cn: "admin", orgs: []string{"system:masters"}})},
			want:   &User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}},
			wantOK: true,
		},
		{
			name:   "node with several groups",
			certs:  []*x509.Certificate{ca.issue(t, leafOpts{cn: "system:node:n1", orgs: []string{"system:nodes", "extra"}})},
			want:   &User{Name: "system:node:n1", Groups: []string{"extra", "system:nodes", "system:authenticated"}}, // DER sorts the organizations
			wantOK: true,
		},
		{
			name:   "no organization",
			certs:  []*x509.Certificate{ca.issue(t, leafOpts{cn: "bob"})},
			want:   &User{Name: "bob", Groups: []string{"system:authenticated"}},
			wantOK: true,
		},
		{
			name:    "expired",
			certs:   []*x509.Certificate{ca.issue(t, leafOpts{cn: "old", notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-24 * time.Hour)})},
			wantErr: true,
		},
		{
			name:    "not yet valid",
			certs:   []*x509.Certificate{ca.issue(t, leafOpts{cn: "early", notBefore: time.Now().Add(time.Hour), notAfter: time.Now().Add(2 * time.Hour)})},
			wantErr: true,
		},
		{
			name:    "signed by another CA",
			certs:   []*x509.Certificate{other.issue(t, leafOpts{cn: "mallory", orgs: []string{"system:masters"}})},
			wantErr: true,
		},
		{
			name:    "server-only certificate",
			certs:   []*x509.Certificate{ca.issue(t, leafOpts{cn: "server", usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})},
			wantErr: true,
		},
		{
			name:    "empty common name",
			certs:   []*x509.Certificate{ca.issue(t, leafOpts{cn: ""})},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api", nil)
			if tc.noTLS {
				r.TLS = nil
			} else {
				r.TLS = &tls.ConnectionState{PeerCertificates: tc.certs}
			}
			u, ok, err := NewX509(roots).Authenticate(r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, u); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestX509Clock(t *testing.T) {
	ca := newCA(t, "ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cert := ca.issue(t, leafOpts{cn: "alice"})
	r := httptest.NewRequest("GET", "/", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	a := &X509{Roots: roots, Now: func() time.Time { return time.Now().Add(3 * time.Hour) }}
	if _, _, err := a.Authenticate(r); err == nil {
		t.Fatal("certificate accepted after expiry by the injected clock")
	}
}

// TestX509CacheHonoursExpiry: a chain verified once is remembered, but only
// while it is valid: the same certificate after its expiry is refused, and
// a different certificate is verified on its own.
func TestX509CacheHonoursExpiry(t *testing.T) {
	ca := newCA(t, "ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cert := ca.issue(t, leafOpts{cn: "alice"})
	r := httptest.NewRequest("GET", "/", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	now := time.Now()
	a := &X509{Roots: roots, Now: func() time.Time { return now }}
	for i := 0; i < 2; i++ {
		u, ok, err := a.Authenticate(r)
		if err != nil || !ok || u.Name != "alice" {
			t.Fatalf("request %d: got %v %v %v", i, u, ok, err)
		}
		u.Groups = append(u.Groups, "mutated") // must not leak into the cache
	}
	u, _, _ := a.Authenticate(r)
	for _, g := range u.Groups {
		if g == "mutated" {
			t.Fatal("cached user was mutated through a returned copy")
		}
	}
	now = now.Add(3 * time.Hour)
	if _, _, err := a.Authenticate(r); err == nil {
		t.Fatal("cached certificate accepted after expiry")
	}
	other := newCA(t, "other")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{other.issue(t, leafOpts{cn: "mallory"})}}
	now = time.Now()
	if _, _, err := a.Authenticate(r); err == nil {
		t.Fatal("certificate from an untrusted CA accepted")
	}
}
