package certificates

import (
	"context"
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

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func pemCSR(t *testing.T) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})
}

func cond(t certificatesv1.RequestConditionType, s corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: s}
}

func TestPrepareForCreateSetsRequester(t *testing.T) {
	csr := &certificatesv1.CertificateSigningRequest{
		Spec:   certificatesv1.CertificateSigningRequestSpec{Username: "forged", Groups: []string{"system:masters"}},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")}},
	}
	u := &authn.User{Name: "alice", UID: "u1", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a"}}}
	Strategy{}.PrepareForCreate(authn.WithUser(ctx, u), csr)
	want := certificatesv1.CertificateSigningRequestSpec{Username: "alice", UID: "u1", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string]certificatesv1.ExtraValue{"scopes": {"a"}}}
	if diff := cmp.Diff(want, csr.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if len(csr.Status.Conditions) != 0 {
		t.Errorf("status kept on create: %v", csr.Status)
	}
	anon := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Username: "forged"}}
	Strategy{}.PrepareForCreate(ctx, anon)
	if anon.Spec.Username != "" {
		t.Errorf("username without a user = %q", anon.Spec.Username)
	}
}

func TestValidate(t *testing.T) {
	req, cert := pemCSR(t)
	good := certificatesv1.CertificateSigningRequestSpec{
		Request: req, SignerName: certificatesv1.KubeAPIServerClientSignerName,
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
	}
	tests := []struct {
		name   string
		mutate func(*certificatesv1.CertificateSigningRequest)
		want   []string
	}{
		{name: "valid"},
		{name: "request not PEM", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = []byte("hello") },
			want: []string{"spec.request: Invalid value"}},
		{name: "request is a certificate", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = cert },
			want: []string{"spec.request: Invalid value"}},
		{name: "no usages and signer", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil; c.Spec.SignerName = "" },
			want: []string{"spec.usages: Required value", "spec.signerName: Required value"}},
		{name: "bad usages", mutate: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{"client auth", "flying", "client auth"}
		}, want: []string{"spec.usages[1]: Unsupported value", "spec.usages[2]: Duplicate value"}},
		{name: "legacy signer", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = LegacyUnknownSignerName },
			want: []string{"spec.signerName: Invalid value"}},
		{name: "signer without path", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" },
			want: []string{"spec.signerName: Invalid value"}},
		{name: "signer with bare domain", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" },
			want: []string{"spec.signerName: Invalid value"}},
		{name: "short duration", mutate: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](60) },
			want: []string{"spec.expirationSeconds: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := &certificatesv1.CertificateSigningRequest{Spec: *good.DeepCopy()}
			if tc.mutate != nil {
				tc.mutate(csr)
			}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, csr))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateKeepsSpecAndStatus(t *testing.T) {
	old := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x", Username: "alice"}}
	old.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")}
	next := old.DeepCopy()
	next.Spec.SignerName = "b.io/y"
	next.Status = certificatesv1.CertificateSigningRequestStatus{}
	next.Labels = map[string]string{"a": "b"}
	Strategy{}.PrepareForUpdate(ctx, next, old)
	if next.Spec.SignerName != "a.io/x" || len(next.Status.Conditions) != 1 || next.Labels["a"] != "b" {
		t.Errorf("update: %+v", next)
	}
}

func TestStatusUpdate(t *testing.T) {
	_, cert := pemCSR(t)
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	old := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x"}}
	old.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")}

	// A condition appended after Approved stays last, and Approved keeps
	// its old value where it is (the conformance test reads the order).
	next := old.DeepCopy()
	next.Spec.SignerName = "b.io/y"
	next.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
		{Type: "Approved", Status: "True", Reason: "Changed"}, cond("StatusUpdate", "True")}
	prepareStatus(next, old, now)
	var types []certificatesv1.RequestConditionType
	for _, c := range next.Status.Conditions {
		types = append(types, c.Type)
		if !c.LastUpdateTime.Time.Equal(now) && c.Type == "StatusUpdate" {
			t.Errorf("new condition not stamped: %v", c.LastUpdateTime)
		}
	}
	if diff := cmp.Diff([]certificatesv1.RequestConditionType{"Approved", "StatusUpdate"}, types); diff != "" {
		t.Errorf("status conditions (-want +got):\n%s", diff)
	}
	if next.Status.Conditions[0].Reason != old.Status.Conditions[0].Reason {
		t.Errorf("Approved condition changed through /status: %+v", next.Status.Conditions[0])
	}
	if next.Spec.SignerName != "a.io/x" {
		t.Errorf("status update changed spec")
	}
	if errs := (Strategy{}).ValidateStatusUpdate(ctx, next, old); len(errs) != 0 {
		t.Errorf("valid status update refused: %v", errs)
	}

	// Adding Denied or removing Approved through /status is refused.
	for _, tc := range []struct {
		conds []certificatesv1.CertificateSigningRequestCondition
		want  string
	}{
		{[]certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True"), cond("Denied", "True")}, `updates may not add a condition of type "Denied"`},
		{[]certificatesv1.CertificateSigningRequestCondition{cond("Failed", "True")}, `updates may not remove a condition of type "Approved"`},
	} {
		n := old.DeepCopy()
		n.Status.Conditions = tc.conds
		prepareStatus(n, old, now)
		errs := Strategy{}.ValidateStatusUpdate(ctx, n, old)
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("conditions %v: errors %v, want %q", tc.conds, errs, tc.want)
		}
	}

	tests := []struct {
		name string
		old  []byte
		cert []byte
		cond []certificatesv1.CertificateSigningRequestCondition
		want []string
	}{
		{name: "issue on approved", cert: cert, cond: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")}},
		{name: "issue on pending", cert: cert, want: []string{"status.certificate: Forbidden"}},
		{name: "garbage certificate", cert: []byte("x"), cond: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")},
			want: []string{"status.certificate: Invalid value"}},
		{name: "change issued", old: cert, cert: append(append([]byte{}, cert...), cert...),
			cond: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")},
			want: []string{"status.certificate: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Certificate: tc.old, Conditions: tc.cond}}
			n := o.DeepCopy()
			n.Status.Certificate = tc.cert
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.ValidateStatusUpdate(ctx, n, o))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApproval(t *testing.T) {
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	old := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x"}}
	old.Status.Certificate = []byte("kept")
	old.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: "Failed", Status: "True", LastTransitionTime: earlier, LastUpdateTime: earlier}}

	next := old.DeepCopy()
	next.Spec.SignerName = "evil.io/x"
	next.Status.Certificate = []byte("forged")
	next.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
		{Type: "Approved", Status: "True", Reason: "KubectlApprove"},
		{Type: "Failed", Status: "True", LastTransitionTime: earlier, LastUpdateTime: earlier},
		{Type: "ApprovalPatch", Status: "True", Reason: "e2e"},
	}
	PrepareForApprovalUpdateAt(next, old, now)
	want := certificatesv1.CertificateSigningRequest{
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x"},
		Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("kept"), Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: "Approved", Status: "True", Reason: "KubectlApprove", LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)},
			{Type: "Failed", Status: "True", LastTransitionTime: earlier, LastUpdateTime: earlier},
			{Type: "ApprovalPatch", Status: "True", Reason: "e2e", LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)},
		}},
	}
	if diff := cmp.Diff(want, *next); diff != "" {
		t.Errorf("approval prepare (-want +got):\n%s", diff)
	}

	approved := []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True")}
	tests := []struct {
		name string
		old  []certificatesv1.CertificateSigningRequestCondition
		new  []certificatesv1.CertificateSigningRequestCondition
		want []string
	}{
		{name: "approve", new: approved},
		{name: "deny", new: []certificatesv1.CertificateSigningRequestCondition{cond("Denied", "True")}},
		{name: "approved false", new: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "False")},
			want: []string{"status.conditions[0].status: Unsupported value"}},
		{name: "both", new: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True"), cond("Denied", "True")},
			want: []string{"status.conditions: Invalid value"}},
		{name: "duplicate", new: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True"), cond("Approved", "True")},
			want: []string{"status.conditions[1].type: Duplicate value"}},
		{name: "remove approval", old: approved, want: []string{"status.conditions: Forbidden"}},
		{name: "approved then denied", old: approved, new: []certificatesv1.CertificateSigningRequestCondition{cond("Denied", "True")},
			want: []string{"status.conditions: Forbidden"}},
		{name: "re-approve keeps", old: approved, new: approved},
		{name: "remove failed", old: []certificatesv1.CertificateSigningRequestCondition{cond("Failed", "True")}, new: approved,
			want: []string{"status.conditions: Forbidden"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: tc.old}}
			n := &certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{Conditions: tc.new}}
			if diff := cmp.Diff(tc.want, errStrings(ValidateApprovalUpdate(n, o))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableAndFields(t *testing.T) {
	var cols []string
	for _, c := range (Strategy{}).TableColumns() {
		cols = append(cols, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		csr  certificatesv1.CertificateSigningRequest
		want []interface{}
	}{
		{name: "pending", csr: certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
			want: []interface{}{"c", "<unknown>", "<none>", "", "<none>", "Pending"}},
		{name: "issued", csr: certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x", Username: "alice", ExpirationSeconds: ptr.To[int32](3600)},
			Status: certificatesv1.CertificateSigningRequestStatus{Certificate: []byte("x"),
				Conditions: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True"), cond("Failed", "True")}}},
			want: []interface{}{"c", "<unknown>", "a.io/x", "alice", "60m", "Approved,Failed,Issued"}},
		{name: "denied wins", csr: certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{cond("Approved", "True"), cond("Denied", "True")}}},
			want: []interface{}{"c", "<unknown>", "<none>", "", "<none>", "Denied"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			row, err := Strategy{}.TableRow(&tc.csr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, row); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "a.io/x"}}
	if got := (Strategy{}).FieldSet(csr).Get("spec.signerName"); got != "a.io/x" {
		t.Errorf("field spec.signerName = %q", got)
	}
}
