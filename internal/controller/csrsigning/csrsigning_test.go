package csrsigning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func testCA(t *testing.T, notAfter time.Time) *CA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: notAfter.Add(-20 * 365 * 24 * time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, Key: key}
}

func csrPEM(t *testing.T, cn string, orgs, dns []string) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestSign(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ten := int32(3600)
	nodes := []string{"system:nodes"}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	tests := []struct {
		name        string
		caNotAfter  time.Time
		signer      string
		req         []byte
		usages      []certificatesv1.KeyUsage
		expSeconds  *int32
		wantErr     string
		wantExpires time.Time
		wantExt     x509.ExtKeyUsage
	}{
		{name: "node client, default duration", caNotAfter: now.Add(10 * 365 * 24 * time.Hour), signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
			req: csrPEM(t, "system:node:a", nodes, nil), usages: client, wantExpires: now.Add(DefaultDuration), wantExt: x509.ExtKeyUsageClientAuth},
		{name: "expirationSeconds honoured", caNotAfter: now.Add(10 * 365 * 24 * time.Hour), signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
			req: csrPEM(t, "system:node:a", nodes, nil), usages: client, expSeconds: &ten, wantExpires: now.Add(time.Hour), wantExt: x509.ExtKeyUsageClientAuth},
		{name: "never outlives the CA", caNotAfter: now.Add(48 * time.Hour), signer: certificatesv1.KubeletServingSignerName,
			req: csrPEM(t, "system:node:a", nodes, []string{"a"}), usages: serving, wantExpires: now.Add(48 * time.Hour), wantExt: x509.ExtKeyUsageServerAuth},
		{name: "client signer refuses server auth", caNotAfter: now.Add(time.Hour * 24 * 365 * 10), signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
			req: csrPEM(t, "system:node:a", nodes, nil), usages: serving, wantErr: `usages did not include "client auth"`},
		{name: "kubelet client signer wants a node subject", caNotAfter: now.Add(time.Hour * 24 * 365 * 10), signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
			req: csrPEM(t, "alice", []string{"system:masters"}, nil), usages: client, wantErr: "subject must be CN=system:node:<name>, O=system:nodes"},
		{name: "serving signer wants names", caNotAfter: now.Add(time.Hour * 24 * 365 * 10), signer: certificatesv1.KubeletServingSignerName,
			req: csrPEM(t, "system:node:a", nodes, nil), usages: serving, wantErr: "need at least one DNS or IP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca := testCA(t, tc.caNotAfter)
			c := &Controller{clock: testingclock.NewFakeClock(now), ca: ca, duration: DefaultDuration}
			out, err := c.Sign(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: tc.signer, Request: tc.req, Usages: tc.usages, ExpirationSeconds: tc.expSeconds,
			}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Sign error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(out)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !cert.NotAfter.Equal(tc.wantExpires) || !cert.NotBefore.Equal(now.Add(-backdate)) {
				t.Errorf("validity %v..%v, want %v..%v", cert.NotBefore, cert.NotAfter, now.Add(-backdate), tc.wantExpires)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{tc.wantExt}}); err != nil {
				t.Errorf("the certificate does not verify for %v: %v", tc.wantExt, err)
			}
		})
	}
}
