package podcertificaterequest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func stub(t *testing.T) (ed25519.PrivateKey, []byte) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func request(t *testing.T) *certificatesv1.PodCertificateRequest {
	_, der := stub(t)
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "default"},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/pods", PodName: "p", PodUID: "1",
			ServiceAccountName: "default", ServiceAccountUID: "2", NodeName: "node-1", NodeUID: "3",
			MaxExpirationSeconds: ptr.To[int32](86400), StubPKCS10Request: der}}
}

func TestValidateCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*certificatesv1.PodCertificateRequest)
		want   []string
	}{
		{"valid", func(*certificatesv1.PodCertificateRequest) {}, nil},
		{"no signer", func(r *certificatesv1.PodCertificateRequest) { r.Spec.SignerName = "" }, []string{"FieldValueRequired spec.signerName"}},
		{"no pod uid", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "" }, []string{"FieldValueInvalid spec.podUID"}},
		{"no max expiration", func(r *certificatesv1.PodCertificateRequest) { r.Spec.MaxExpirationSeconds = nil },
			[]string{"FieldValueRequired spec.maxExpirationSeconds"}},
		{"kubernetes signer over a day", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.SignerName = "kubernetes.io/pods"
			r.Spec.MaxExpirationSeconds = ptr.To[int32](2 * 86400)
		}, []string{"FieldValueInvalid spec.maxExpirationSeconds"}},
		{"no stub", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = nil }, []string{"FieldValueInvalid spec"}},
		{"bad stub", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = []byte("x") },
			[]string{"FieldValueInvalid spec.stubPKCS10Request"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := request(t)
			tc.mutate(r)
			if diff := cmp.Diff(tc.want, errorStrings(Strategy{}.Validate(context.Background(), r))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func leafPEM(t *testing.T, notBefore time.Time, life time.Duration) string {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "p"}, NotBefore: notBefore, NotAfter: notBefore.Add(life)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestValidateStatusUpdate(t *testing.T) {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}
	}
	nb := time.Now().Truncate(time.Second)
	issued := certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Issued")},
		CertificateChain: leafPEM(t, nb, 2*time.Hour), NotBefore: &metav1.Time{Time: nb}, NotAfter: &metav1.Time{Time: nb.Add(2 * time.Hour)},
		BeginRefreshAt: &metav1.Time{Time: nb.Add(time.Hour)}}
	tests := []struct {
		name     string
		old, new certificatesv1.PodCertificateRequestStatus
		want     []string
	}{
		{"issue", certificatesv1.PodCertificateRequestStatus{}, issued, nil},
		{"deny", certificatesv1.PodCertificateRequestStatus{}, certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Denied")}}, nil},
		{"deny with a chain", certificatesv1.PodCertificateRequestStatus{},
			certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Denied")}, CertificateChain: issued.CertificateChain},
			[]string{"FieldValueInvalid status"}},
		{"unknown condition", certificatesv1.PodCertificateRequestStatus{}, certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Approved")}},
			[]string{"FieldValueNotSupported status.conditions[0].type"}},
		{"issued is final", issued, certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Failed")}},
			[]string{"FieldValueInvalid status"}},
		{"issued without times", certificatesv1.PodCertificateRequestStatus{},
			certificatesv1.PodCertificateRequestStatus{Conditions: issued.Conditions, CertificateChain: issued.CertificateChain},
			[]string{"FieldValueRequired status.notBefore", "FieldValueRequired status.notAfter", "FieldValueRequired status.beginRefreshAt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, next := request(t), request(t)
			next.Spec = old.Spec
			old.Status, next.Status = tc.old, tc.new
			if diff := cmp.Diff(tc.want, errorStrings(Strategy{}.ValidateStatusUpdate(context.Background(), next, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// A kubelet leaves maxExpirationSeconds out when the pod's source does:
// the request is created with upstream's default of 24 hours.
func TestPrepareForCreateDefaultsExpiration(t *testing.T) {
	r := request(t)
	r.Spec.MaxExpirationSeconds = nil
	r.Status.CertificateChain = "forged"
	Strategy{}.PrepareForCreate(context.Background(), r)
	if diff := cmp.Diff(ptr.To[int32](86400), r.Spec.MaxExpirationSeconds); diff != "" {
		t.Fatalf("maxExpirationSeconds (-want +got):\n%s", diff)
	}
	if r.Status.CertificateChain != "" {
		t.Fatal("status kept on create")
	}
	if errs := (Strategy{}).Validate(context.Background(), r); len(errs) != 0 {
		t.Fatalf("defaulted request invalid: %v", errs)
	}
}
