package integration

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// remoteAuthorizer is a webhook authorizer served on loopback: bob may
// read and write configmaps, mallory is denied everything, "flaky" makes it
// fail; everyone else gets no opinion. It counts the reviews it answers.
type remoteAuthorizer struct {
	mu      sync.Mutex
	reviews int
}

func (ra *remoteAuthorizer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ra.mu.Lock()
	ra.reviews++
	ra.mu.Unlock()
	switch sar.Spec.User {
	case "bob":
		if a := sar.Spec.ResourceAttributes; a != nil && a.Resource == "configmaps" {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "bob owns configmaps"}
		}
	case "mallory":
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "mallory is banned"}
	case "flaky":
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	_ = json.NewEncoder(w).Encode(sar)
}

func (ra *remoteAuthorizer) count() int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.reviews
}

// startRemoteAuthorizer serves ra over TLS and returns a kubeconfig for it.
func startRemoteAuthorizer(t *testing.T, ra *remoteAuthorizer) string {
	t.Helper()
	srv := httptest.NewTLSServer(ra)
	t.Cleanup(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["authz"] = &clientcmdapi.Cluster{Server: srv.URL + "/authorize", CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	cfg.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["authz"] = &clientcmdapi.Context{Cluster: "authz", AuthInfo: "apiserver"}
	cfg.CurrentContext = "authz"
	path := filepath.Join(t.TempDir(), "authz-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuthzABACAndWebhook runs --authorization-mode=ABAC,Webhook: an ABAC
// policy file and a webhook the test serves, asked in that order.
func TestAuthzABACAndWebhook(t *testing.T) {
	ra := &remoteAuthorizer{}
	kubeconfig := startRemoteAuthorizer(t, ra)
	policy := writeFile(t, "abac.jsonl", `{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "system:authenticated", "nonResourcePath": "*", "readonly": true}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "default", "resource": "*", "apiGroup": "*", "readonly": true}}
{"user": "carol", "namespace": "default", "resource": "pods"}
`)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.AuthorizationModes = []string{kubeapiserver.ModeABAC, kubeapiserver.ModeWebhook}
		cfg.Authorization = kubeapiserver.AuthorizationOptions{
			PolicyFile: policy, WebhookConfigFile: kubeconfig, WebhookVersion: "v1",
			WebhookCacheAuthorizedTTL: time.Minute, // unauthorized answers are not cached
			WebhookRetryBackoff:       &wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2},
		}
	}})
	ctx := testCtx(t, time.Minute)
	admin := c.Clientset()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	alice := as(t, c, "alice")
	if _, err := alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("ABAC: alice lists configmaps in default: %v", err)
	}
	if _, err := alice.Discovery().ServerVersion(); err != nil {
		t.Errorf("ABAC: alice reads /version: %v", err)
	}
	_, err := alice.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	wantForbidden(t, err, `configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "default": No policy matched.`)
	_, err = alice.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "kube-system": No policy matched.`)
	carol := as(t, c, "carol")
	if _, err := carol.CoreV1().Pods("default").Create(ctx, newPod("by-carol"), metav1.CreateOptions{}); err != nil {
		t.Errorf("ABAC unversioned line: carol creates a pod: %v", err)
	}

	bob := as(t, c, "bob")
	before := ra.count()
	for range 3 {
		if _, err := bob.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
			t.Fatalf("webhook: bob reads a configmap: %v", err)
		}
	}
	if got := ra.count() - before; got != 1 {
		t.Errorf("webhook asked %d times for three identical allowed requests, want 1 (cached)", got)
	}
	if _, err := bob.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("webhook: bob creates a configmap: %v", err)
	}
	_, err = bob.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "default": No policy matched.`)

	mallory := as(t, c, "mallory")
	_, err = mallory.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
	wantForbidden(t, err, `configmaps "cm" is forbidden: User "mallory" cannot get resource "configmaps" in API group "" in the namespace "default": mallory is banned`)
	// A failing webhook has no opinion (the legacy flags' failure policy).
	_, err = as(t, c, "flaky").CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("failing webhook: %v, want 403", err)
	}
}

// TestAuthzConfigFile runs --authorization-config: Node, a webhook that
// fails closed and leaves kube-system to the next authorizer by a match
// condition, then RBAC.
func TestAuthzConfigFile(t *testing.T) {
	ra := &remoteAuthorizer{}
	kubeconfig := startRemoteAuthorizer(t, ra)
	config := writeFile(t, "authz.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: Webhook
  name: remote
  webhook:
    timeout: 5s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: `+kubeconfig+`
    matchConditions:
    - expression: "!has(request.resourceAttributes) || request.resourceAttributes.namespace != 'kube-system'"
- type: RBAC
  name: rbac
`)
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.Authorization = kubeapiserver.AuthorizationOptions{ConfigFile: config, WebhookRetryBackoff: &wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2}}
	}})
	ctx := testCtx(t, time.Minute)
	admin := c.Clientset()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := as(t, c, "bob").CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Errorf("webhook: bob reads a configmap: %v", err)
	}
	// (The harness reconciles no bootstrap policy: a role of our own.)
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// failurePolicy Deny: a failing webhook refuses, RBAC is not asked.
	bindRole(t, admin, "default", "flaky-view", "cm-reader", "flaky")
	_, err := as(t, c, "flaky").CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("failing webhook with failurePolicy Deny: %v, want 403", err)
	}
	// kube-system is left to RBAC by the match condition: the binding
	// there counts even for mallory, whom the webhook bans elsewhere.
	bindRole(t, admin, "kube-system", "mallory-reader", "cm-reader", "mallory")
	mallory := as(t, c, "mallory")
	eventually(t, 10*time.Second, "RBAC lets mallory list kube-system configmaps", func() (bool, error) {
		_, err := mallory.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	_, err = mallory.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mallory is banned") {
		t.Errorf("mallory in default: %v, want 403 from the webhook", err)
	}
}

// TestMetricsAuthz: /metrics is for system:monitoring (upstream's
// bootstrap binding), not for any authenticated user.
func TestMetricsAuthz(t *testing.T) {
	c := startRBAC(t)
	ctx := testCtx(t, 30*time.Second)
	res := as(t, c, "plain").CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx)
	var code int
	res.StatusCode(&code)
	raw, _ := res.Raw()
	if code != 403 || !strings.Contains(string(raw), `forbidden: User \"plain\" cannot get path \"/metrics\"`) {
		t.Errorf("plain user /metrics: %d %s, want 403", code, raw)
	}
	body, err := as(t, c, "prometheus", "system:monitoring").CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), "apiserver_request_total") {
		t.Errorf("system:monitoring /metrics: %v %.200s", err, body)
	}
}
