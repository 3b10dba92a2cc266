// Package webhooks tests admission webhooks (MutatingWebhookConfiguration,
// ValidatingWebhookConfiguration) and CRD conversion webhooks against an
// in-process API server, with webhooks served by the test over TLS.
package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
	kubectltest "github.com/skiff-sh/skiff/internal/testing/kubectl"
)

// certs is a CA and a serving certificate it signed.
type certs struct {
	caPEM []byte
	tls   tls.Certificate
}

// newCerts makes a CA and a serving certificate for ips and names.
func newCerts(t *testing.T, ips []net.IP, names ...string) certs {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: ips, DNSNames: names,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return certs{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// serveTLS serves h over TLS on addr (host:0) until the test ends and
// returns the address it listens on.
func serveTLS(t *testing.T, addr string, cert tls.Certificate, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// call is one AdmissionReview a webhook received.
type call struct {
	path    string
	version string // the AdmissionReview apiVersion
	req     admissionv1.AdmissionRequest
}

// hooks is the test's webhook server: each path is one behaviour, and
// every review received is recorded.
type hooks struct {
	t     *testing.T
	mu    sync.Mutex
	calls []call
}

func (h *hooks) received(path, name string) []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []call
	for _, c := range h.calls {
		if c.path == path && (name == "" || c.req.Name == name || objectName(c.req) == name) {
			out = append(out, c)
		}
	}
	return out
}

// objectName is the name in the request's object (a generateName
// request has none in req.Name).
func objectName(r admissionv1.AdmissionRequest) string {
	u := &unstructured.Unstructured{}
	if len(r.Object.Raw) == 0 || u.UnmarshalJSON(r.Object.Raw) != nil {
		return ""
	}
	return u.GetName()
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// v1 and v1beta1 AdmissionReviews have the same shape.
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := *review.Request
	h.mu.Lock()
	h.calls = append(h.calls, call{path: r.URL.Path, version: review.APIVersion, req: req})
	h.mu.Unlock()
	obj := &unstructured.Unstructured{}
	if len(req.Object.Raw) > 0 {
		_ = obj.UnmarshalJSON(req.Object.Raw)
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	switch r.URL.Path {
	case "/label": // adds the label mutated=yes, warns, annotates the audit event
		resp.Patch = addPatch(obj, "labels", "mutated", "yes")
		resp.Warnings = []string{"labelled by the test webhook"}
		resp.AuditAnnotations = map[string]string{"labelled": "yes"}
	case "/deny": // refuses objects labelled deny=true
		if obj.GetLabels()["deny"] == "true" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "objects labelled deny=true are refused by the test"}
		}
	case "/slow": // answers after 5 s, or never if the caller gives up first
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
		}
	case "/reinvoke-first": // records whether the second webhook's label is there yet
		saw := "false"
		if obj.GetLabels()["second"] == "added" {
			saw = "true"
		}
		resp.Patch = addPatch(obj, "annotations", "first-saw-second", saw)
	case "/subresources": // refuses what is asked in namespace wh-sub-deny or of node deny-node
		if req.Namespace == "wh-sub-deny" || (req.Namespace == "" && req.Name == "deny-node") {
			sub := req.Resource.Resource
			if req.SubResource != "" {
				sub += "/" + req.SubResource
			}
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: fmt.Sprintf("the test refuses %s %s", req.Operation, sub)}
		}
	case "/reinvoke-second":
		resp.Patch = addPatch(obj, "labels", "second", "added")
	}
	if resp.Patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// addPatch is a JSON patch setting metadata.<field>[key] = value.
func addPatch(obj *unstructured.Unstructured, field, key, value string) []byte {
	var ops []map[string]any
	m, _, _ := unstructured.NestedStringMap(obj.Object, "metadata", field)
	if m == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/" + field, "value": map[string]string{key: value}})
	} else {
		esc := strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/" + field + "/" + esc, "value": value})
	}
	b, _ := json.Marshal(ops)
	return b
}

// warnings collects the Warning headers client-go receives.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// clientWithWarnings is a clientset whose Warning headers land in w.
func clientWithWarnings(t *testing.T, c *testapiserver.Cluster, w *warnings) kubernetes.Interface {
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = w
	return kubernetes.NewForConfigOrDie(cfg)
}

// runKubectl runs the embedded kubectl against the cluster; out is its
// stdout and stderr.
func runKubectl(t *testing.T, c *testapiserver.Cluster, stdin string, args ...string) (out string, err error) {
	t.Helper()
	stdout, stderr, err := kubectltest.Run(t, c.Kubeconfig(), stdin, args...)
	return stdout + stderr, err
}

// namespace creates a namespace with labels for one subtest.
func namespace(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v (last error: %v)", what, d, last)
}

// hostAddress puts a non-loopback address on a veth pair the test creates
// (EndpointSlices refuse loopback addresses, as upstream's validation
// does; this machine's kernel has no dummy links) and removes it after.
// It needs root.
func hostAddress(t *testing.T) net.IP {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a service reference needs an endpoint address on a link the test creates (root)")
	}
	suffix := fmt.Sprintf("%04x", os.Getpid()&0xffff)
	a, b := "skwh"+suffix, "skwp"+suffix
	ip := net.IPv4(192, 0, 2, byte(1+os.Getpid()%250))
	run := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "link", "del", a).Run() // a leftover of a killed run
	run("link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	run("addr", "add", ip.String()+"/32", "dev", a)
	run("link", "set", a, "up")
	run("link", "set", b, "up")
	return ip
}

func ptr[T any](v T) *T { return &v }

// rule is a rule on one core/v1 resource for ops.
func rule(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}
}

// inNamespace selects the namespace named ns only.
func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}
