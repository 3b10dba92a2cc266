package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestWebhookSubresourcesAndCredentials: the requests upstream admits on
// subresources (CONNECT of pods/exec, attach, portforward, pods/proxy,
// services/proxy and nodes/proxy with their options objects; CREATE of pods/binding,
// bindings, pods/eviction and serviceaccounts/token) reach a webhook
// with upstream's resource, subresource, operation and kind, and its
// refusal stops them with its message; and the webhook plugins present
// the client certificate or token that the kubeconfig of their
// WebhookAdmissionConfiguration (--admission-control-config-file) gives
// for a webhook's host, and nothing to a host it does not name.
func TestWebhookSubresourcesAndCredentials(t *testing.T) {
	crt := newCerts(t, []net.IP{net.IPv4(127, 0, 0, 1)})
	h := &hooks{t: t}
	client := newClientCert(t, "webhook-client")
	// Three webhook servers: one requires a client certificate, one
	// records the bearer token, one is named by no kubeconfig entry.
	certSrv := &credentials{next: h}
	certAddr := serveTLSConfig(t, &tls.Config{Certificates: []tls.Certificate{crt.tls}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: client.pool}, certSrv)
	tokenSrv := &credentials{next: h}
	tokenAddr := serveTLS(t, "127.0.0.1:0", crt.tls, tokenSrv)
	plainSrv := &credentials{next: h}
	plainAddr := serveTLS(t, "127.0.0.1:0", crt.tls, plainSrv)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "webhook-kubeconfig.yaml")
	writeFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: %q
  user:
    client-certificate-data: %s
    client-key-data: %s
- name: %q
  user:
    token: s3cret-webhook-token
`, certAddr, base64.StdEncoding.EncodeToString(client.certPEM), base64.StdEncoding.EncodeToString(client.keyPEM), tokenAddr))
	admissionConfig := filepath.Join(dir, "admission.yaml")
	// A static manifest: a validating webhook no API object holds.
	static := filepath.Join(dir, "static")
	if err := os.Mkdir(static, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(static, "deny.yaml"), fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny.static.k8s.io
webhooks:
- name: deny.static.webhook.test
  clientConfig:
    url: "https://%s/deny"
    caBundle: %s
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: wh-static}}
  sideEffects: None
  admissionReviewVersions: [v1]
`, plainAddr, base64.StdEncoding.EncodeToString(crt.caPEM)))
	writeFile(t, filepath.Join(dir, "webhooks.yaml"), fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: WebhookAdmissionConfiguration
kubeConfigFile: %q
staticManifestsDir: %q
`, kubeconfig, static))
	writeFile(t, admissionConfig, fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  path: webhooks.yaml
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`, kubeconfig))
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *apiserver.Config) {
		cfg.Admission.ConfigFile = admissionConfig
	}})
	e := &env{c: c, cs: c.Clientset(), hooks: h, ca: crt.caPEM, addr: plainAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("subresources reach webhooks", func(t *testing.T) {
		testSubresources(t, ctx, e)
	})

	t.Run("a webhook from the staticManifestsDir", func(t *testing.T) {
		ns := "wh-static"
		namespace(t, ctx, e.cs, ns, nil)
		_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "refused", map[string]string{"deny": "true"}), metav1.CreateOptions{})
		want := `admission webhook "deny.static.webhook.test" denied the request: objects labelled deny=true are refused by the test`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create labelled deny=true: %v, want %q", err, want)
		}
		if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "fine", nil), metav1.CreateOptions{}); err != nil {
			t.Errorf("create unlabelled: %v", err)
		}
	})

	t.Run("client credentials from the kubeconfig of the WebhookAdmissionConfiguration", func(t *testing.T) {
		ns := "wh-creds"
		namespace(t, ctx, e.cs, ns, nil)
		at := func(addr, path string) admissionregistrationv1.WebhookClientConfig {
			u := "https://" + addr + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: crt.caPEM}
		}
		vwh := func(name, addr string) admissionregistrationv1.ValidatingWebhook {
			return admissionregistrationv1.ValidatingWebhook{Name: name, ClientConfig: at(addr, "/deny"),
				Rules: rule("configmaps", admissionregistrationv1.Create), NamespaceSelector: inNamespace(ns), FailurePolicy: ptr(admissionregistrationv1.Fail)}
		}
		e.validating(t, ctx, "creds", vwh("cert.creds.test", certAddr), vwh("token.creds.test", tokenAddr), vwh("plain.creds.test", plainAddr))
		e.mutating(t, ctx, "creds", admissionregistrationv1.MutatingWebhook{Name: "token.creds.test", ClientConfig: at(tokenAddr, "/label"),
			Rules: rule("configmaps", admissionregistrationv1.Create), NamespaceSelector: inNamespace(ns), FailurePolicy: ptr(admissionregistrationv1.Fail)})
		e.waitMutated(t, ctx, ns, "probe", nil)
		for _, s := range []*credentials{certSrv, tokenSrv, plainSrv} {
			s.reset()
		}
		cm, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "creds", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create with three webhooks (one requiring a client certificate): %v", err)
		}
		if cm.Labels["mutated"] != "yes" {
			t.Errorf("labels %v: the mutating webhook (token) did not label", cm.Labels)
		}
		if got := certSrv.seen(); len(got) != 1 || got[0] != "cert=webhook-client token=" {
			t.Errorf("the webhook requiring a client certificate saw %q, want the certificate webhook-client once", got)
		}
		if got := tokenSrv.seen(); len(got) != 2 || got[0] != "cert= token=Bearer s3cret-webhook-token" || got[1] != got[0] {
			t.Errorf("the token webhook saw %q, want the kubeconfig's token on both calls (mutating and validating)", got)
		}
		if got := plainSrv.seen(); len(got) != 1 || got[0] != "cert= token=" {
			t.Errorf("the webhook no kubeconfig entry names saw %q, want no credentials", got)
		}
	})
}

// testSubresources: each request runs admission on a webhook that refuses
// in namespace wh-sub-deny (and node deny-node) and allows elsewhere.
func testSubresources(t *testing.T, ctx context.Context, e *env) {
	deny, allow := "wh-sub-deny", "wh-sub-allow"
	for _, ns := range []string{deny, allow} {
		namespace(t, ctx, e.cs, ns, nil)
		for _, name := range []string{"p", "q"} {
			if _, err := e.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.validating(t, ctx, "subresources", admissionregistrationv1.ValidatingWebhook{
		Name: "subresources.test.skiff", ClientConfig: e.url("/subresources"), FailurePolicy: ptr(admissionregistrationv1.Fail),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Connect},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{
				"pods/exec", "pods/attach", "pods/portforward", "pods/binding", "pods/eviction", "nodes/proxy", "serviceaccounts/token", "bindings",
				"pods/proxy", "services/proxy"}},
		}},
	})
	refusal := func(what string) string {
		return `admission webhook "subresources.test.skiff" denied the request: the test refuses ` + what
	}
	eventually(t, 10*time.Second, "the webhook refuses tokens in "+deny, func() (bool, error) {
		_, err := e.cs.CoreV1().ServiceAccounts(deny).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), refusal("CREATE serviceaccounts/token")), err
	})
	rc := e.cs.CoreV1().RESTClient()
	post := func(ns, pod, sub string, params ...string) error {
		r := rc.Post().Namespace(ns).Resource("pods").Name(pod).SubResource(sub)
		for i := 0; i+1 < len(params); i += 2 {
			r = r.Param(params[i], params[i+1])
		}
		return r.Do(ctx).Error()
	}
	evict := func(ns, pod string, dry bool) error {
		r := rc.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("eviction").
			Body(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Name: pod}})
		if dry {
			r = r.Param("dryRun", "All")
		}
		return r.Do(ctx).Error()
	}
	bind := func(ns, pod string) error {
		return e.cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Name: "n1"}}, metav1.CreateOptions{})
	}
	bindings := func(ns, pod string) error {
		return rc.Post().Namespace(ns).Resource("bindings").
			Body(&corev1.Binding{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"}, ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Name: "n1"}}).
			Do(ctx).Error()
	}
	token := func(ns string) (*authenticationv1.TokenRequest, error) {
		return e.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	}
	nodeProxy := func(node string) error {
		return rc.Get().AbsPath("/api/v1/nodes/" + node + "/proxy/metrics").Do(ctx).Error()
	}
	core := func(r string) metav1.GroupVersionResource {
		return metav1.GroupVersionResource{Version: "v1", Resource: r}
	}
	coreKind := func(k string) metav1.GroupVersionKind { return metav1.GroupVersionKind{Version: "v1", Kind: k} }
	cases := []struct {
		what, sub string
		op        admissionv1.Operation
		resource  metav1.GroupVersionResource
		kind      metav1.GroupVersionKind
		name      string // the request's name
		do        func(ns string) error
		object    func(t *testing.T, obj map[string]any) // checks the object the webhook saw
	}{
		{what: "CONNECT pods/exec", sub: "exec", op: admissionv1.Connect, resource: core("pods"), kind: coreKind("PodExecOptions"), name: "p",
			do: func(ns string) error {
				return post(ns, "p", "exec", "command", "ls", "stdout", "true", "container", "c")
			},
			object: func(t *testing.T, obj map[string]any) {
				if fmt.Sprint(obj["command"]) != "[ls]" || obj["stdout"] != true || obj["container"] != "c" || obj["kind"] != "PodExecOptions" {
					t.Errorf("exec options %v, want command [ls], stdout, container c", obj)
				}
			}},
		{what: "CONNECT pods/attach", sub: "attach", op: admissionv1.Connect, resource: core("pods"), kind: coreKind("PodAttachOptions"), name: "p",
			do: func(ns string) error { return post(ns, "p", "attach", "stdin", "true", "tty", "true") },
			object: func(t *testing.T, obj map[string]any) {
				if obj["stdin"] != true || obj["tty"] != true || obj["kind"] != "PodAttachOptions" {
					t.Errorf("attach options %v, want stdin and tty", obj)
				}
			}},
		{what: "CONNECT pods/portforward", sub: "portforward", op: admissionv1.Connect, resource: core("pods"), kind: coreKind("PodPortForwardOptions"), name: "p",
			do: func(ns string) error { return post(ns, "p", "portforward", "ports", "8080,9090") },
			object: func(t *testing.T, obj map[string]any) {
				if fmt.Sprint(obj["ports"]) != "[8080 9090]" {
					t.Errorf("port-forward options %v, want ports [8080 9090]", obj)
				}
			}},
		{what: "CONNECT pods/proxy", sub: "proxy", op: admissionv1.Connect, resource: core("pods"), kind: coreKind("PodProxyOptions"), name: "https:p:8443",
			// The pod has no address: allowed, the request then fails 400.
			do: func(ns string) error {
				return rc.Delete().AbsPath("/api/v1/namespaces/"+ns+"/pods/https:p:8443/proxy/some/path/").Param("q", "1").Do(ctx).Error()
			},
			object: func(t *testing.T, obj map[string]any) {
				if obj["path"] != "/some/path/" {
					t.Errorf("pod proxy options %v, want path /some/path/", obj)
				}
			}},
		{what: "CONNECT services/proxy", sub: "proxy", op: admissionv1.Connect, resource: core("services"), kind: coreKind("ServiceProxyOptions"), name: "web:http",
			do: func(ns string) error {
				return rc.Get().AbsPath("/api/v1/namespaces/" + ns + "/services/web:http/proxy").Do(ctx).Error()
			},
			object: func(t *testing.T, obj map[string]any) {
				if p, ok := obj["path"]; ok && p != "" {
					t.Errorf("service proxy options %v, want no path", obj)
				}
			}},
		{what: "CREATE pods/binding", sub: "binding", op: admissionv1.Create, resource: core("pods"), kind: coreKind("Binding"), name: "p",
			do: func(ns string) error { return bind(ns, "p") },
			object: func(t *testing.T, obj map[string]any) {
				if target, _ := obj["target"].(map[string]any); target["name"] != "n1" {
					t.Errorf("binding %v, want target n1", obj)
				}
			}},
		{what: "CREATE bindings", op: admissionv1.Create, resource: core("bindings"), kind: coreKind("Binding"), name: "q",
			do: func(ns string) error { return bindings(ns, "q") }},
		{what: "CREATE pods/eviction", sub: "eviction", op: admissionv1.Create, resource: core("pods"),
			kind: metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, name: "p",
			do: func(ns string) error { return evict(ns, "p", true) }},
		{what: "CREATE serviceaccounts/token", sub: "token", op: admissionv1.Create, resource: core("serviceaccounts"),
			kind: metav1.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, name: "robot",
			do: func(ns string) error { _, err := token(ns); return err },
			object: func(t *testing.T, obj map[string]any) {
				if spec, _ := obj["spec"].(map[string]any); spec["expirationSeconds"] == nil {
					t.Errorf("token request %v, want the defaulted expirationSeconds", obj)
				}
			}},
	}
	find := func(ns string, name, sub string, op admissionv1.Operation) []admissionv1.AdmissionRequest {
		var out []admissionv1.AdmissionRequest
		for _, c := range e.hooks.received("/subresources", "") {
			if c.req.Namespace == ns && c.req.Name == name && c.req.SubResource == sub && c.req.Operation == op {
				out = append(out, c.req)
			}
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			err := tc.do(deny)
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refusal(tc.what)) {
				t.Fatalf("in %s: %v, want 403 with the webhook's message %q", deny, err, refusal(tc.what))
			}
			err = tc.do(allow)
			if err != nil && strings.Contains(err.Error(), "the test refuses") {
				t.Fatalf("in %s: %v, want the webhook to allow", allow, err)
			}
			reqs := find(allow, tc.name, tc.sub, tc.op)
			if len(reqs) == 0 {
				t.Fatalf("the webhook saw no %s of %s in %s", tc.what, tc.name, allow)
			}
			r := reqs[len(reqs)-1]
			if r.Resource != tc.resource || r.Kind != tc.kind || r.RequestKind == nil || *r.RequestKind != tc.kind {
				t.Errorf("resource %v kind %v requestKind %v, want %v and %v", r.Resource, r.Kind, r.RequestKind, tc.resource, tc.kind)
			}
			if tc.op == admissionv1.Connect && len(r.Options.Raw) != 0 {
				t.Errorf("a CONNECT carries options %s, want none (upstream's)", r.Options.Raw)
			}
			obj := map[string]any{}
			if err := json.Unmarshal(r.Object.Raw, &obj); err != nil {
				t.Fatalf("object %s: %v", r.Object.Raw, err)
			}
			if wantAPI := (schemaVersion(tc.kind)); obj["apiVersion"] != wantAPI || obj["kind"] != tc.kind.Kind {
				t.Errorf("object is %v %v, want %s %s", obj["apiVersion"], obj["kind"], wantAPI, tc.kind.Kind)
			}
			if tc.object != nil {
				tc.object(t, obj)
			}
		})
	}

	t.Run("nodes/proxy", func(t *testing.T) {
		err := nodeProxy("deny-node")
		if err == nil || !strings.Contains(err.Error(), refusal("CONNECT nodes/proxy")) {
			t.Fatalf("nodes/deny-node/proxy: %v, want the webhook's refusal", err)
		}
		_ = nodeProxy("other-node") // no such node: the webhook allows, the proxy fails after
		reqs := find("", "other-node", "proxy", admissionv1.Connect)
		if len(reqs) == 0 {
			t.Fatal("the webhook saw no CONNECT of nodes/other-node/proxy")
		}
		r := reqs[0]
		obj := map[string]any{}
		_ = json.Unmarshal(r.Object.Raw, &obj)
		if r.Resource != core("nodes") || r.Kind != coreKind("NodeProxyOptions") || obj["path"] != "/metrics" {
			t.Errorf("resource %v kind %v object %v, want nodes, NodeProxyOptions, path /metrics", r.Resource, r.Kind, obj)
		}
	})

	t.Run("a refused request has no effect; an allowed one does", func(t *testing.T) {
		for _, ns := range []string{deny, allow} {
			for _, name := range []string{"p", "q"} {
				pod, err := e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if want := map[string]string{deny: "", allow: "n1"}[ns]; pod.Spec.NodeName != want {
					t.Errorf("pod %s/%s on node %q, want %q", ns, name, pod.Spec.NodeName, want)
				}
				if pod.DeletionTimestamp != nil {
					t.Errorf("pod %s/%s is being deleted after a dry-run or refused eviction", ns, name)
				}
			}
		}
		// The dry-run eviction reached the webhook as a dry run.
		if reqs := find(allow, "p", "eviction", admissionv1.Create); len(reqs) == 0 || reqs[0].DryRun == nil || !*reqs[0].DryRun {
			t.Errorf("the dry-run eviction reached the webhook as %v, want dryRun true", reqs)
		}
		if err := evict(deny, "p", false); err == nil || !strings.Contains(err.Error(), refusal("CREATE pods/eviction")) {
			t.Errorf("eviction in %s: %v, want the refusal", deny, err)
		}
		if err := evict(allow, "p", false); err != nil {
			t.Fatalf("eviction in %s: %v", allow, err)
		}
		if reqs := find(allow, "p", "eviction", admissionv1.Create); len(reqs) < 2 || *reqs[len(reqs)-1].DryRun {
			t.Errorf("the eviction reached the webhook as %v, want a second call, not a dry run", reqs)
		}
		if pod, err := e.cs.CoreV1().Pods(allow).Get(ctx, "p", metav1.GetOptions{}); err == nil && pod.DeletionTimestamp == nil {
			t.Errorf("pod %s/p is not being deleted after its eviction", allow)
		}
		if pod, err := e.cs.CoreV1().Pods(deny).Get(ctx, "p", metav1.GetOptions{}); err != nil || pod.DeletionTimestamp != nil {
			t.Errorf("pod %s/p after the refused eviction: %v, %v", deny, err, pod)
		}
		tr, err := token(allow)
		if err != nil || tr.Status.Token == "" {
			t.Errorf("token in %s: %v", allow, err)
		}
	})
}

// schemaVersion is a kind's apiVersion.
func schemaVersion(k metav1.GroupVersionKind) string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// credentials records what each call to a webhook server presented: the
// client certificate's common name and the Authorization header.
type credentials struct {
	next  http.Handler
	mu    sync.Mutex
	calls []string
}

func (c *credentials) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cn := ""
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cn = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	c.mu.Lock()
	c.calls = append(c.calls, fmt.Sprintf("cert=%s token=%s", cn, r.Header.Get("Authorization")))
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *credentials) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *credentials) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = nil
}

// clientCert is a client certificate and the pool of the CA that signed it.
type clientCert struct {
	pool            *x509.CertPool
	certPEM, keyPEM []byte
}

func newClientCert(t *testing.T, cn string) clientCert {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook client CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return clientCert{pool: pool,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}

// serveTLSConfig serves h with cfg on 127.0.0.1 until the test ends.
func serveTLSConfig(t *testing.T, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
