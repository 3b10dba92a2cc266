package admission

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

var csrsGVR = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

// signerRules allows user u the verb on the named signers.
func signerRules(allowed map[string]bool) authz.Authorizer {
	return authz.AuthorizerFunc(func(ctx context.Context, a authz.Attributes) (authz.Decision, string, error) {
		if a.Resource == "signers" && a.APIGroup == "certificates.k8s.io" && allowed[a.User.Name+" "+a.Verb+" "+a.Name] {
			return authz.Allow, "", nil
		}
		return authz.Deny, "", nil
	})
}

func csrFor(signer string, orgs ...string) *certificatesv1.CertificateSigningRequest {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x", Organization: orgs}}, key)
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

func TestCertificateApprovalAndSigning(t *testing.T) {
	az := signerRules(map[string]bool{"alice approve example.com/*": true, "bob sign example.com/foo": true})
	approval, signing := NewCertificateApproval(az), NewCertificateSigning(az)
	csr := csrFor("example.com/foo")
	signed := csr.DeepCopy()
	signed.Status.Certificate = []byte("cert")
	tests := []struct {
		name string
		p    Validator
		user string
		sub  string
		next *certificatesv1.CertificateSigningRequest
		want string
	}{
		{"approve by domain wildcard", approval, "alice", "approval", csr, ""},
		{"approve refused", approval, "bob", "approval", csr, `certificatesigningrequests.certificates.k8s.io "csr" is forbidden: user not permitted to approve requests with signerName "example.com/foo"`},
		{"sign by name", signing, "bob", "status", signed, ""},
		{"sign refused", signing, "alice", "status", signed, `certificatesigningrequests.certificates.k8s.io "csr" is forbidden: user not permitted to sign requests with signerName "example.com/foo"`},
		{"a status update that changes nothing signed", signing, "alice", "status", csr, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: Update, Resource: csrsGVR, Subresource: tc.sub, Name: "csr", Object: tc.next, OldObject: csr, User: &authn.User{Name: tc.user}}
			got := ""
			if err := tc.p.Validate(context.Background(), a); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCertificateSubjectRestriction(t *testing.T) {
	for name, tc := range map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		want string
	}{
		"system:masters for the client signer": {csrFor(certificatesv1.KubeAPIServerClientSignerName, "system:masters"),
			`certificatesigningrequests.certificates.k8s.io "csr" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`},
		"another group":  {csrFor(certificatesv1.KubeAPIServerClientSignerName, "devs"), ""},
		"another signer": {csrFor("example.com/foo", "system:masters"), ""},
	} {
		got := ""
		if err := (CertificateSubjectRestriction{}).Validate(context.Background(), &Attributes{Operation: Create, Resource: csrsGVR, Name: "csr", Object: tc.csr}); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
	}
}
