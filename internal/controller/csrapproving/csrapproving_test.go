package csrapproving

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
)

func request(t *testing.T, cn string, orgs []string, dns []string, ips []net.IP) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns, IPAddresses: ips,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestApprovable(t *testing.T) {
	nodes := []string{"system:nodes"}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	ip := []net.IP{net.ParseIP("10.0.0.5")}
	tests := []struct {
		name     string
		signer   string
		user     string
		groups   []string
		req      []byte
		usages   []certificatesv1.KeyUsage
		approved bool
	}{
		{"bootstrap user asks for a node client cert", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers", "system:authenticated"},
			request(t, "system:node:a", nodes, nil, nil), client, true},
		{"node renews its own client cert", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:a", []string{"system:nodes"},
			request(t, "system:node:a", nodes, nil, nil), client, true},
		{"node asks for another node's client cert", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:node:b", []string{"system:nodes"},
			request(t, "system:node:a", nodes, nil, nil), client, false},
		{"ordinary user asks for a node client cert", certificatesv1.KubeAPIServerClientKubeletSignerName, "alice", nil,
			request(t, "system:node:a", nodes, nil, nil), client, false},
		{"client cert with SANs", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers"},
			request(t, "system:node:a", nodes, []string{"a"}, nil), client, false},
		{"client cert with server auth", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers"},
			request(t, "system:node:a", nodes, nil, nil), append(client, certificatesv1.UsageServerAuth), false},
		{"client cert in system:masters", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers"},
			request(t, "system:node:a", []string{"system:masters"}, nil, nil), client, false},
		{"node asks for its serving cert", certificatesv1.KubeletServingSignerName, "system:node:a", []string{"system:nodes"},
			request(t, "system:node:a", nodes, []string{"a"}, ip), serving, true},
		{"bootstrap user asks for a serving cert", certificatesv1.KubeletServingSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers"},
			request(t, "system:node:a", nodes, []string{"a"}, ip), serving, false},
		{"serving cert without names", certificatesv1.KubeletServingSignerName, "system:node:a", []string{"system:nodes"},
			request(t, "system:node:a", nodes, nil, nil), serving, false},
		{"other signer", "example.com/x", "system:node:a", []string{"system:nodes"},
			request(t, "system:node:a", nodes, nil, nil), client, false},
		{"garbage request", certificatesv1.KubeAPIServerClientKubeletSignerName, "system:bootstrap:abcdef", []string{"system:bootstrappers"},
			[]byte("not pem"), client, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: tc.signer, Username: tc.user, Groups: tc.groups, Request: tc.req, Usages: tc.usages,
			}}
			got, _ := Approvable(csr)
			if diff := cmp.Diff(tc.approved, got); diff != "" {
				t.Errorf("approved (-want +got):\n%s", diff)
			}
		})
	}
}
