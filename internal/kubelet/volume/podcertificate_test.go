package volume

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestGenerateKeyAndStub(t *testing.T) {
	for _, tc := range []struct {
		keyType string
		check   func(pub crypto.PublicKey) bool
	}{
		{"RSA3072", func(p crypto.PublicKey) bool { k, ok := p.(*rsa.PublicKey); return ok && k.Size() == 384 }},
		{"RSA4096", func(p crypto.PublicKey) bool { k, ok := p.(*rsa.PublicKey); return ok && k.Size() == 512 }},
		{"ECDSAP256", func(p crypto.PublicKey) bool { k, ok := p.(*ecdsa.PublicKey); return ok && k.Curve == elliptic.P256() }},
		{"ECDSAP384", func(p crypto.PublicKey) bool { k, ok := p.(*ecdsa.PublicKey); return ok && k.Curve == elliptic.P384() }},
		{"ECDSAP521", func(p crypto.PublicKey) bool { k, ok := p.(*ecdsa.PublicKey); return ok && k.Curve == elliptic.P521() }},
		{"ED25519", func(p crypto.PublicKey) bool { _, ok := p.(ed25519.PublicKey); return ok }},
	} {
		t.Run(tc.keyType, func(t *testing.T) {
			key, stub, err := GenerateKeyAndStub(tc.keyType)
			if err != nil {
				t.Fatal(err)
			}
			req, err := x509.ParseCertificateRequest(stub)
			if err != nil {
				t.Fatalf("stub is not a PKCS#10 request: %v", err)
			}
			if err := req.CheckSignature(); err != nil {
				t.Fatalf("stub's signature (proof of possession): %v", err)
			}
			if !tc.check(req.PublicKey) {
				t.Fatalf("stub's public key is a %T, not a %s key", req.PublicKey, tc.keyType)
			}
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(req.PublicKey) {
				t.Fatal("stub does not carry the generated key's public key")
			}
			p, err := EncodeKey(key)
			if err != nil {
				t.Fatal(err)
			}
			blk, _ := pem.Decode(p)
			if blk == nil || blk.Type != "PRIVATE KEY" {
				t.Fatalf("key PEM: %q", p)
			}
			if _, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, _, err := GenerateKeyAndStub("DSA1024"); err == nil || !strings.Contains(err.Error(), `unknown key type "DSA1024"`) {
		t.Fatalf("unknown key type: %v", err)
	}
}

func TestCleanCertificateChain(t *testing.T) {
	in := "junk\n-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAQID\n-----END CERTIFICATE-----\nmore junk\n-----BEGIN TRUSTED CERTIFICATE-----\nBAUG\n-----END TRUSTED CERTIFICATE-----\n"
	want := "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBAUG\n-----END CERTIFICATE-----\n"
	if diff := cmp.Diff(want, string(CleanCertificateChain([]byte(in)))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// fakeSigner is the API's side of podCertificate requests: it keeps the
// requests and answers them as a signer would when told to.
type fakeSigner struct {
	clock *clocktesting.FakeClock
	reqs  map[string]*certificatesv1.PodCertificateRequest
	n     int
}

func (f *fakeSigner) CreatePodCertificateRequest(_ context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	f.n++
	out := pcr.DeepCopy()
	out.Name = fmt.Sprintf("%s%d", pcr.GenerateName, f.n)
	out.CreationTimestamp = metav1.NewTime(f.clock.Now())
	f.reqs[out.Name] = out
	return out, nil
}

func (f *fakeSigner) GetPodCertificateRequest(_ context.Context, ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	if r, ok := f.reqs[name]; ok && r.Namespace == ns {
		return r.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

func (f *fakeSigner) ServiceAccountUID(_ context.Context, ns, name string) (types.UID, error) {
	return types.UID("sa-uid-" + name), nil
}

func (f *fakeSigner) NodeUID() types.UID { return "node-uid" }

// issue signs request name's public key with a fresh self-signed CA and
// returns the leaf.
func (f *fakeSigner) issue(t *testing.T, name string, lifetime time.Duration) *x509.Certificate {
	t.Helper()
	r := f.reqs[name]
	csr, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	_, caKey, _ := ed25519.GenerateKey(rand.Reader)
	now := f.clock.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: now, NotAfter: now.Add(lifetime), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: now, NotAfter: now.Add(lifetime)}, caCert, csr.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue, Reason: "Reason"}},
		CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})) + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		NotBefore:        ptr.To(metav1.NewTime(now)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(now.Add(lifetime / 2))),
		NotAfter:         ptr.To(metav1.NewTime(now.Add(lifetime))),
	}
	return leaf
}

type event struct{ Type, Reason, Message string }

func TestPodCertificateProjection(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	signer := &fakeSigner{clock: clk, reqs: map[string]*certificatesv1.PodCertificateRequest{}}
	m := NewManager(t.TempDir(), &fakeGetter{})
	m.Certificates = NewCertificates(signer, clk)
	m.Certificates.jitter = func() time.Duration { return 0 }
	var events []event
	m.Certificates.Event = func(_ *corev1.Pod, typ, reason, msg string) { events = append(events, event{typ, reason, msg}) }
	t.Cleanup(func() { _ = m.Teardown("pod-1") })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-1"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "robot", Volumes: []corev1.Volume{
			{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: "example.com/spiffe", KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To[int32](7200),
					CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem",
					UserAnnotations: map[string]string{"example.com/path": "/x"},
				}},
			}}}},
		}},
	}

	// First sync: a key and a request, and the volume cannot be set up yet.
	if _, err := m.Setup(context.Background(), pod); err == nil || !strings.Contains(err.Error(), "credential bundle is not issued yet") {
		t.Fatalf("before issuance: %v", err)
	}
	if len(signer.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(signer.reqs))
	}
	req := signer.reqs["req-1"]
	wantSpec := certificatesv1.PodCertificateRequestSpec{
		SignerName: "example.com/spiffe", PodName: "web", PodUID: "pod-1", ServiceAccountName: "robot", ServiceAccountUID: "sa-uid-robot",
		NodeName: "node-a", NodeUID: "node-uid", MaxExpirationSeconds: ptr.To[int32](7200),
		StubPKCS10Request: req.Spec.StubPKCS10Request, UnverifiedUserAnnotations: map[string]string{"example.com/path": "/x"},
	}
	if diff := cmp.Diff(wantSpec, req.Spec); diff != "" {
		t.Fatalf("request spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-1"}}, req.OwnerReferences); diff != "" {
		t.Fatalf("owner (-want +got):\n%s", diff)
	}
	// Waiting: no second request.
	if _, err := m.Setup(context.Background(), pod); err == nil {
		t.Fatal("set up before issuance")
	}
	if len(signer.reqs) != 1 {
		t.Fatalf("%d requests while waiting, want 1", len(signer.reqs))
	}

	leaf := signer.issue(t, "req-1", 2*time.Hour)
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(paths["tls"], name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key, chain, bundle := read("key.pem"), read("chain.pem"), read("bundle.pem")
	if !bytes.Equal(bundle, append(append([]byte{}, key...), chain...)) {
		t.Fatal("credential bundle is not the key followed by the chain")
	}
	blk, _ := pem.Decode(key)
	priv, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.(crypto.Signer).Public().(*ecdsa.PublicKey).Equal(leaf.PublicKey) {
		t.Fatal("the written key is not the certified one")
	}
	if strings.Count(string(chain), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("chain: %s", chain)
	}

	// Past beginRefreshAt: a new request; the old credentials stay.
	clk.Step(time.Hour + time.Second)
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if len(signer.reqs) != 2 || !bytes.Equal(read("key.pem"), key) {
		t.Fatalf("refresh: %d requests, key changed %v", len(signer.reqs), !bytes.Equal(read("key.pem"), key))
	}
	signer.issue(t, "req-2", 2*time.Hour)
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(read("key.pem"), key) {
		t.Fatal("the refreshed key was not written")
	}
	if len(events) != 0 {
		t.Fatalf("events: %v", events)
	}

	// Another pod whose request is denied fails for good, with an event.
	denied := pod.DeepCopy()
	denied.UID, denied.Name = "pod-2", "denied"
	t.Cleanup(func() { _ = m.Teardown("pod-2") })
	_, _ = m.Setup(context.Background(), denied)
	signer.reqs["req-3"].Status.Conditions = []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "UnsupportedKeyType", Message: "use ED25519"}}
	for range 2 {
		_, err = m.Setup(context.Background(), denied)
		if err == nil || !strings.Contains(err.Error(), `PodCertificateRequest was permanently denied: reason="UnsupportedKeyType" message="use ED25519"`) {
			t.Fatalf("denied: %v", err)
		}
	}
	wantEvents := []event{{"Warning", "Denied", `PodCertificateRequest ns/req-3 was denied, reason="UnsupportedKeyType", message="use ED25519"`}}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	if len(signer.reqs) != 3 {
		t.Fatalf("%d requests after a denial, want 3", len(signer.reqs))
	}
}

type fakeBundles map[string]*certificatesv1.ClusterTrustBundle

func (f fakeBundles) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	if b, ok := f[name]; ok {
		return b, nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), name)
}

func (f fakeBundles) ClusterTrustBundles(_ context.Context, sel labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	var out []certificatesv1.ClusterTrustBundle
	for _, b := range f {
		if sel.Matches(labels.Set(b.Labels)) {
			out = append(out, *b)
		}
	}
	return out, nil
}

func TestClusterTrustBundleProjection(t *testing.T) {
	certPEM := func(b byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{b}}))
	}
	bundles := fakeBundles{
		"a": {ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "x"}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: certPEM(3) + certPEM(1)}},
		"b": {ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"team": "y"}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/s", TrustBundle: certPEM(2) + certPEM(1)}},
		"c": {ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/other", TrustBundle: certPEM(9)}},
	}
	m := NewManager(t.TempDir(), &fakeGetter{})
	m.TrustBundles = bundles
	for _, tc := range []struct {
		name    string
		src     corev1.ClusterTrustBundleProjection
		want    string
		wantErr string
	}{
		{name: "by name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("a")}, want: certPEM(1) + certPEM(3)},
		{name: "signer, all labels, deduplicated and sorted", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), LabelSelector: &metav1.LabelSelector{}}, want: certPEM(1) + certPEM(2) + certPEM(3)},
		{name: "signer and label", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}}, want: certPEM(1) + certPEM(2)},
		{name: "no selector matches nothing", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s")}, wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "optional, none", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/none"), LabelSelector: &metav1.LabelSelector{}, Optional: ptr.To(true)}, want: ""},
		{name: "missing name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("zz")}, wantErr: `clustertrustbundles.certificates.k8s.io "zz" not found`},
		{name: "missing name, optional", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("zz"), Optional: ptr.To(true)}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Path = "trust.pem"
			got, err := m.trustBundlePayload(context.Background(), &tc.src, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got["trust.pem"].Data)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
