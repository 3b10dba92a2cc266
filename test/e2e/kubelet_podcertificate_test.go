package e2e

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// testSigner is a small signer as upstream's conformance tests run one:
// it issues every PodCertificateRequest for its signer name with a leaf
// for the request's key (a SPIFFE URI of the namespace and service
// account), signed by its own CA, and publishes the CA as a
// ClusterTrustBundle. A request whose userAnnotations ask for it is
// denied.
type testSigner struct {
	name   string
	caKey  ed25519.PrivateKey
	caCert *x509.Certificate
	caPEM  string
}

const denyAnnotation = "e2e.skiff.sh/deny"

func newTestSigner(t *testing.T, name string) *testSigner {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testSigner{name: name, caKey: key, caCert: cert, caPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// publish creates the signer's ClusterTrustBundle.
func (s *testSigner) publish(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	name := strings.Replace(s.name, "/", ":", 1) + ":primary"
	_, err := client.CertificatesV1().ClusterTrustBundles().Create(context.Background(), &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: s.name, TrustBundle: s.caPEM},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CertificatesV1().ClusterTrustBundles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// run answers requests until ctx ends.
func (s *testSigner) run(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	sel := fields.OneTermEqualSelector("spec.signerName", s.name).String()
	for ctx.Err() == nil {
		l, err := client.CertificatesV1().PodCertificateRequests("").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			for i := range l.Items {
				if r := &l.Items[i]; len(r.Status.Conditions) == 0 {
					if err := s.answer(ctx, client, r); err != nil && ctx.Err() == nil {
						t.Logf("signer: %s/%s: %v", r.Namespace, r.Name, err)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *testSigner) answer(ctx context.Context, client kubernetes.Interface, r *certificatesv1.PodCertificateRequest) error {
	now := time.Now()
	if _, deny := r.Spec.UnverifiedUserAnnotations[denyAnnotation]; deny {
		r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
			Reason: "UnsupportedKeyType", Message: "asked to deny", LastTransitionTime: metav1.NewTime(now)}}
		_, err := client.CertificatesV1().PodCertificateRequests(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
		return err
	}
	csr, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		return err
	}
	lifetime := time.Duration(*r.Spec.MaxExpirationSeconds) * time.Second
	notBefore := now.Add(-time.Minute)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		URIs:         []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/" + r.Namespace + "/sa/" + r.Spec.ServiceAccountName}},
		NotBefore:    notBefore, NotAfter: notBefore.Add(lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, s.caCert, csr.PublicKey, s.caKey)
	if err != nil {
		return err
	}
	r.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
		Reason: "Reason", Message: "Issued", LastTransitionTime: metav1.NewTime(now)}}
	r.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	r.Status.NotBefore = ptr.To(metav1.NewTime(notBefore))
	r.Status.BeginRefreshAt = ptr.To(metav1.NewTime(notBefore.Add(lifetime - 30*time.Minute)))
	r.Status.NotAfter = ptr.To(metav1.NewTime(notBefore.Add(lifetime)))
	_, err = client.CertificatesV1().PodCertificateRequests(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
	return err
}

// TestKubeletPodCertificates: a pod with podCertificate and
// clusterTrustBundle sources waits (ContainerCreating, FailedMount) until
// its signer issues; then its files hold a key and a chain the trust
// bundle verifies, for the key the kubelet asked about in a request naming
// the pod, its service account and the node. A denied request keeps its
// pod from starting, with a Denied event.
func TestKubeletPodCertificates(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-podcert")
	ctx := context.Background()
	signer := newTestSigner(t, "e2e.skiff.sh/"+ns)
	signer.publish(t, c.client)

	volume := func(annotations map[string]string) corev1.Volume {
		return corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{PodCertificate: &corev1.PodCertificateProjection{SignerName: signer.name, KeyType: "ECDSAP256",
				CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem", UserAnnotations: annotations}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To(signer.name), LabelSelector: &metav1.LabelSelector{}, Path: "trust.pem"}},
		}}}}
	}
	pod := busyboxPod(ns, "spiffe", c.image, "sh", "-c", "cat /tls/bundle.pem; exec sleep 3600")
	pod.Spec.Volumes = []corev1.Volume{volume(map[string]string{"e2e.skiff.sh/path": "/web"})}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
	pod = c.create(t, pod)

	// No signer yet: the pod waits for its certificate.
	waitFor(t, 30*time.Second, "FailedMount while the certificate is not issued", func() bool {
		return c.hasEvent(ns, "spiffe", "FailedMount", "credential bundle is not issued yet")
	})
	if p, _ := c.client.CoreV1().Pods(ns).Get(ctx, "spiffe", metav1.GetOptions{}); p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod %s before its certificate is issued", p.Status.Phase)
	}
	reqs, err := c.client.CertificatesV1().PodCertificateRequests(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs.Items) != 1 {
		t.Fatalf("%d PodCertificateRequests, want 1", len(reqs.Items))
	}
	req := reqs.Items[0]
	pod, err = c.client.CoreV1().Pods(ns).Get(ctx, "spiffe", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := req.Spec
	if s.SignerName != signer.name || s.PodName != "spiffe" || s.PodUID != pod.UID || s.ServiceAccountName != "default" || s.ServiceAccountUID != sa.UID ||
		string(s.NodeName) != node.Name || s.NodeUID != node.UID || s.UnverifiedUserAnnotations["e2e.skiff.sh/path"] != "/web" ||
		s.MaxExpirationSeconds == nil || *s.MaxExpirationSeconds != 86400 {
		t.Fatalf("request spec %+v", s)
	}
	if len(req.OwnerReferences) != 1 || req.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("request owners %+v, want the pod", req.OwnerReferences)
	}

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go signer.run(sctx, t, c.client)
	c.waitPod(t, ns, "spiffe", 60*time.Second, "Running", podRunningReady)

	read := func(file string) string {
		return kubectl(t, c.kubeconfig, "-n", ns, "exec", "spiffe", "--", "cat", "/tls/"+file)
	}
	key, chain, bundle, trust := read("key.pem"), read("chain.pem"), read("bundle.pem"), read("trust.pem")
	if bundle != key+chain {
		t.Fatalf("credential bundle is not the key followed by the chain:\n%s", bundle)
	}
	if trust != signer.caPEM {
		t.Fatalf("trust bundle %q, want the signer's CA", trust)
	}
	blk, _ := pem.Decode([]byte(chain))
	if blk == nil {
		t.Fatalf("chain %q", chain)
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(trust))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("leaf does not verify against the projected trust bundle: %v", err)
	}
	if got := leaf.URIs[0].String(); got != "spiffe://cluster.local/ns/"+ns+"/sa/default" {
		t.Fatalf("leaf URI %s", got)
	}
	kblk, _ := pem.Decode([]byte(key))
	if kblk == nil || kblk.Type != "PRIVATE KEY" {
		t.Fatalf("key file %q", key)
	}
	priv, err := x509.ParsePKCS8PrivateKey(kblk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		t.Fatal("the projected key is not the certified one")
	}
	// What the pod prints is what upstream's conformance tests parse.
	if logs := kubectl(t, c.kubeconfig, "-n", ns, "logs", "spiffe"); logs != bundle {
		t.Fatalf("logs %q, want the bundle", logs)
	}

	// A denied request: the pod never starts and says why.
	denied := busyboxPod(ns, "denied", c.image, "sleep", "3600")
	denied.Spec.Volumes = []corev1.Volume{volume(map[string]string{denyAnnotation: "yes"})}
	denied.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
	c.create(t, denied)
	waitFor(t, 30*time.Second, "the Denied event", func() bool {
		return c.hasEvent(ns, "denied", "Denied", `was denied, reason="UnsupportedKeyType", message="asked to deny"`)
	})
	waitFor(t, 10*time.Second, "FailedMount after the denial", func() bool {
		return c.hasEvent(ns, "denied", "FailedMount", "PodCertificateRequest was permanently denied")
	})
	if p, _ := c.client.CoreV1().Pods(ns).Get(ctx, "denied", metav1.GetOptions{}); p.Status.Phase != corev1.PodPending {
		t.Fatalf("denied pod %s", p.Status.Phase)
	}

	// A missing trust bundle by name fails the volume unless optional.
	for _, optional := range []bool{false, true} {
		name := fmt.Sprintf("ctb-optional-%v", optional)
		p := busyboxPod(ns, name, c.image, "sh", "-c", "wc -c < /tls/trust.pem; exec sleep 3600")
		p.Spec.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("e2e.skiff.sh:missing"), Path: "trust.pem", Optional: ptr.To(optional)}},
		}}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
		c.create(t, p)
		if optional {
			c.waitPod(t, ns, name, 60*time.Second, "Running", podRunningReady)
			waitFor(t, 10*time.Second, "an empty trust bundle file", func() bool {
				out, _, _ := kubectlResult(c.kubeconfig, "", "-n", ns, "logs", name)
				return strings.TrimSpace(out) == "0"
			})
			continue
		}
		waitFor(t, 30*time.Second, "FailedMount for the missing bundle", func() bool {
			return c.hasEvent(ns, name, "FailedMount", `clustertrustbundles.certificates.k8s.io "e2e.skiff.sh:missing" not found`)
		})
	}
}
