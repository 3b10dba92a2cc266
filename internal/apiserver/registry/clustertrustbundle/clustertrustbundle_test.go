package clustertrustbundle

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
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func certPEM(t *testing.T, ca bool) string {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: ca, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestValidate(t *testing.T) {
	ca := certPEM(t, true)
	tests := []struct {
		name, objName, signer, bundle string
		want                          []string
	}{
		{"no signer", "roots", "", ca, nil},
		{"signer prefix", "example.com:signer:roots", "example.com/signer", ca, nil},
		{"colon without signer", "a:b", "", ca, []string{"FieldValueInvalid metadata.name"}},
		{"wrong prefix", "roots", "example.com/signer", ca, []string{"FieldValueInvalid metadata.name"}},
		{"bad signer", "example.com:roots", "example.com", ca, []string{"FieldValueInvalid spec.signerName"}},
		{"empty bundle", "roots", "", "", []string{"FieldValueInvalid spec.trustBundle"}},
		{"not a CA", "roots", "", certPEM(t, false), []string{"FieldValueInvalid spec.trustBundle"}},
		{"duplicate", "roots", "", ca + ca, []string{"FieldValueInvalid spec.trustBundle"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: tc.objName},
				Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: tc.signer, TrustBundle: tc.bundle}}
			if diff := cmp.Diff(tc.want, errorStrings(Strategy{}.Validate(context.Background(), b))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	old := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:roots"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca}}
	next := old.DeepCopy()
	next.Spec.SignerName = "example.com/other"
	got := errorStrings(Strategy{}.ValidateUpdate(context.Background(), next, old))
	if diff := cmp.Diff([]string{"FieldValueInvalid metadata.name", "FieldValueInvalid spec.signerName"}, got); diff != "" {
		t.Errorf("signer change (-want +got):\n%s", diff)
	}
}
