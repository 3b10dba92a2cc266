package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// sarServer is a webhook authorizer: alice may do anything, "mallory" is
// denied outright, "broken" makes it fail; it records what it was asked.
type sarServer struct {
	mu    sync.Mutex
	asked []string
}

func (s *sarServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	what := sar.APIVersion + " " + sar.Spec.User
	if ra := sar.Spec.ResourceAttributes; ra != nil {
		what += " " + ra.Verb + " " + ra.Resource + " " + ra.Namespace
	} else if nra := sar.Spec.NonResourceAttributes; nra != nil {
		what += " " + nra.Verb + " " + nra.Path
	}
	s.mu.Lock()
	s.asked = append(s.asked, what)
	s.mu.Unlock()
	switch sar.Spec.User {
	case "alice":
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "alice is trusted"}
	case "mallory":
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "mallory is banned"}
	case "broken":
		http.Error(w, "boom", 500)
		return
	default:
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no idea"}
	}
	_ = json.NewEncoder(w).Encode(sar)
}

func (s *sarServer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.asked
	s.asked = nil
	return got
}

// kubeconfigFor writes a kubeconfig naming srv (trusting its certificate).
func kubeconfigFor(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["authz"] = &clientcmdapi.Cluster{Server: srv.URL, CertificateAuthorityData: pemCert(srv)}
	cfg.AuthInfos["apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["authz"] = &clientcmdapi.Context{Cluster: "authz", AuthInfo: "apiserver"}
	cfg.CurrentContext = "authz"
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func webhookConfig(path string) *apiserverapi.WebhookConfiguration {
	return &apiserverapi.WebhookConfiguration{
		AuthorizedTTL: metav1.Duration{Duration: time.Minute}, CacheAuthorizedRequests: true,
		UnauthorizedTTL: metav1.Duration{Duration: time.Minute}, CacheUnauthorizedRequests: true,
		Timeout: metav1.Duration{Duration: 5 * time.Second}, FailurePolicy: apiserverapi.FailurePolicyNoOpinion,
		SubjectAccessReviewVersion: "v1", MatchConditionSubjectAccessReviewVersion: "v1",
		ConnectionInfo: apiserverapi.WebhookConnectionInfo{Type: apiserverapi.AuthorizationWebhookConnectionInfoTypeKubeConfigFile, KubeConfigFile: &path},
	}
}

var fastBackoff = &wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 2}

func attrs(user, verb, resource, ns string) authz.Attributes {
	return authz.Attributes{User: &authn.User{Name: user, Groups: []string{"system:authenticated"}}, Verb: verb, APIVersion: "v1", Resource: resource, Namespace: ns, ResourceRequest: true}
}

func TestWebhook(t *testing.T) {
	sar := &sarServer{}
	srv := httptest.NewTLSServer(sar)
	defer srv.Close()
	kc := kubeconfigFor(t, srv)
	ctx := context.Background()

	a, err := New("webhook", webhookConfig(kc), nil, fastBackoff)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		a          authz.Attributes
		want       authz.Decision
		wantReason string
		wantAsked  []string
	}{
		{"allowed", attrs("alice", "get", "pods", "ns"), authz.Allow, "alice is trusted", []string{"authorization.k8s.io/v1 alice get pods ns"}},
		{"allowed, cached", attrs("alice", "get", "pods", "ns"), authz.Allow, "alice is trusted", nil},
		{"denied", attrs("mallory", "get", "pods", "ns"), authz.Deny, "mallory is banned", []string{"authorization.k8s.io/v1 mallory get pods ns"}},
		{"no opinion", attrs("bob", "list", "secrets", ""), authz.NoOpinion, "no idea", []string{"authorization.k8s.io/v1 bob list secrets "}},
		{"path", authz.Attributes{User: &authn.User{Name: "alice"}, Verb: "get", Path: "/metrics"}, authz.Allow, "alice is trusted", []string{"authorization.k8s.io/v1 alice get /metrics"}},
		{"failure: NoOpinion", attrs("broken", "get", "pods", "ns"), authz.NoOpinion, "", []string{"authorization.k8s.io/v1 broken get pods ns", "authorization.k8s.io/v1 broken get pods ns"}},
	}
	for _, tt := range tests {
		got, reason, _ := a.Authorize(ctx, tt.a)
		if got != tt.want || reason != tt.wantReason {
			t.Errorf("%s: %v %q, want %v %q", tt.name, got, reason, tt.want, tt.wantReason)
		}
		if diff := cmp.Diff(tt.wantAsked, sar.take()); diff != "" {
			t.Errorf("%s: asked (-want +got):\n%s", tt.name, diff)
		}
	}

	// failurePolicy Deny, no caching, v1beta1, and a match condition that
	// leaves kube-system out.
	c := webhookConfig(kc)
	c.FailurePolicy = apiserverapi.FailurePolicyDeny
	c.CacheAuthorizedRequests = false
	c.SubjectAccessReviewVersion = "v1beta1"
	c.MatchConditions = []apiserverapi.WebhookMatchCondition{{Expression: "!has(request.resourceAttributes) || request.resourceAttributes.namespace != 'kube-system'"}}
	d, err := New("strict", c, nil, fastBackoff)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		a         authz.Attributes
		want      authz.Decision
		wantAsked []string
	}{
		{"failure: Deny", attrs("broken", "get", "pods", "ns"), authz.Deny, []string{"authorization.k8s.io/v1beta1 broken get pods ns", "authorization.k8s.io/v1beta1 broken get pods ns"}},
		{"not cached", attrs("alice", "get", "pods", "ns"), authz.Allow, []string{"authorization.k8s.io/v1beta1 alice get pods ns"}},
		{"not cached again", attrs("alice", "get", "pods", "ns"), authz.Allow, []string{"authorization.k8s.io/v1beta1 alice get pods ns"}},
		{"match condition false", attrs("alice", "get", "pods", "kube-system"), authz.NoOpinion, nil},
	} {
		got, reason, _ := d.Authorize(ctx, tt.a)
		if got != tt.want {
			t.Errorf("%s: %v %q, want %v", tt.name, got, reason, tt.want)
		}
		if diff := cmp.Diff(tt.wantAsked, sar.take()); diff != "" {
			t.Errorf("%s: asked (-want +got):\n%s", tt.name, diff)
		}
	}

	if _, err := New("x", &apiserverapi.WebhookConfiguration{ConnectionInfo: apiserverapi.WebhookConnectionInfo{Type: apiserverapi.AuthorizationWebhookConnectionInfoTypeInCluster}}, nil, nil); err == nil {
		t.Error("InClusterConfig accepted")
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := New("x", webhookConfig(missing), nil, nil); err == nil {
		t.Error("missing kubeconfig accepted")
	}
}

func pemCert(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}
