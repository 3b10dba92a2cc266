package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/utils/clock"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/controller/clusterroleaggregation"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
	"github.com/skiff-sh/skiff/internal/testing/oidcissuer"
)

// bearerClient is a client that presents a bearer token and trusts the
// cluster's CA.
func bearerClient(t *testing.T, c *cluster, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CAPEM}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func tokenKubeconfig(t *testing.T, c *cluster, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.PKI.CAPEM}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "u"}
	cfg.CurrentContext = "skiff"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func bindGroup(t *testing.T, admin kubernetes.Interface, ns, name, clusterRole, group string) {
	t.Helper()
	_, err := admin.RbacV1().RoleBindings(ns).Create(testCtx(t, 10*time.Second), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: group}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAuthentication: static tokens (upstream's --token-auth-file CSV) and
// OIDC ID tokens from an issuer on loopback authenticate users whom RBAC
// then authorizes; bad tokens and anonymous requests get 401, except on
// the public health and version paths.
func TestAuthentication(t *testing.T) {
	is := oidcissuer.Start(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token,tok-user,1001,\"tok-devs,other\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := authn.ReadTokenFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "oidc:"
	oidcAuth, err := authn.NewOIDC(authn.OIDCOptions{IssuerURL: is.URL, ClientID: "skiff", CAFile: is.CAFile,
		UsernameClaim: "email", UsernamePrefix: &prefix, GroupsClaim: "groups", GroupsPrefix: "oidc:",
		RequiredClaims: map[string]string{"hd": "example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	c := startRBACWith(t, func(cfg *kubeapiserver.Config) {
		cfg.Authenticator = authn.Union(tokens, oidcAuth)
	})
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	bindGroup(t, admin, ns, "tok-devs-view", "view", "tok-devs")
	bindGroup(t, admin, ns, "oidc-devs-edit", "edit", "oidc:devs")

	idToken := func(extra map[string]any) string {
		claims := map[string]any{"iss": is.URL, "aud": []string{"skiff", "other"}, "sub": "1", "email": "jane@example.com",
			"email_verified": true, "hd": "example.com", "groups": []string{"devs"},
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		for k, v := range extra {
			claims[k] = v
		}
		return is.Sign(t, claims)
	}

	t.Run("static token", func(t *testing.T) {
		cs := bearerClient(t, c, "s3cret-token")
		eventually(t, 10*time.Second, "tok-user lists pods", func() (bool, error) {
			_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1ConfigMap, metav1.CreateOptions{})
		wantForbidden(t, err, `configmaps is forbidden: User "tok-user" cannot create resource "configmaps" in API group "" in the namespace "`+ns+`"`)
		out := kubectlAs(t, tokenKubeconfig(t, c, "s3cret-token"), "auth", "can-i", "list", "pods", "-n", ns)
		if strings.TrimSpace(out) != "yes" {
			t.Errorf("kubectl auth can-i with the token = %q, want yes", out)
		}
	})

	t.Run("OIDC ID token", func(t *testing.T) {
		cs := bearerClient(t, c, idToken(nil))
		eventually(t, 10*time.Second, "jane creates a configmap", func() (bool, error) {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1ConfigMap, metav1.CreateOptions{})
			return err == nil, nil
		})
		_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("edit lists secrets: %v", err)
		}
		_, err = cs.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
		wantForbidden(t, err, `rolebindings.rbac.authorization.k8s.io is forbidden: User "oidc:jane@example.com" cannot list resource "rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "`+ns+`"`)
		if out := kubectlAs(t, tokenKubeconfig(t, c, idToken(nil)), "get", "configmaps", "-n", ns, "-o", "name"); !strings.Contains(out, "configmap/cm") {
			t.Errorf("kubectl get configmaps with the ID token = %q", out)
		}
	})

	unauthorized := []struct{ name, token string }{
		{"unknown static token", "nope"},
		{"expired ID token", idToken(map[string]any{"exp": time.Now().Add(-time.Minute).Unix()})},
		{"ID token for another client", idToken(map[string]any{"aud": "someone-else"})},
		{"ID token without the required claim value", idToken(map[string]any{"hd": "evil.com"})},
		{"ID token signed by another key", func() string {
			other := oidcissuer.Start(t)
			return other.Sign(t, map[string]any{"iss": is.URL, "aud": "skiff", "email": "jane@example.com", "hd": "example.com", "exp": time.Now().Add(time.Hour).Unix()})
		}()},
	}
	for _, tc := range unauthorized {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bearerClient(t, c, tc.token).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if !apierrors.IsUnauthorized(err) {
				t.Errorf("error = %v, want 401 Unauthorized", err)
			}
		})
	}

	t.Run("anonymous", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.PKI.CAPEM)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		for path, want := range map[string]int{
			"/healthz": 200, "/livez": 200, "/readyz": 200, "/version": 200,
			"/api": 401, "/apis": 401, "/api/v1/namespaces": 401, "/metrics": 401, "/openapi/v2": 401,
		} {
			resp, err := hc.Get(c.Config.Host + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("anonymous GET %s = %d, want %d", path, resp.StatusCode, want)
			}
		}
		// Refused credentials are 401 on every path: only a request
		// without any is anonymous (upstream calls an unknown bearer token
		// invalid), so a client learns its token is bad from /version too.
		for _, path := range []string{"/healthz", "/version", "/readyz"} {
			req, _ := http.NewRequest(http.MethodGet, c.Config.Host+path, nil)
			req.Header.Set("Authorization", "Bearer nope")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with an unknown token = %d, want 401", path, resp.StatusCode)
			}
		}
	})
}

var corev1ConfigMap = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}

// startRBACWith is startRBAC (authz_test.go) with the API server's config
// edited by configure first.
func startRBACWith(t *testing.T, configure func(*kubeapiserver.Config)) *cluster {
	t.Helper()
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.AuthorizationModes = kubeapiserver.DefaultAuthorizationModes
		configure(cfg)
	}})
	ctx := testCtx(t, 60*time.Second)
	admin := c.Clientset()
	p, err := bootstrappolicy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := bootstrappolicy.Reconcile(ctx, admin, p); err != nil {
		t.Fatalf("reconcile bootstrap policy: %v", err)
	}
	f := informers.NewSharedInformerFactory(admin, 0)
	ctrl, err := clusterroleaggregation.New(ctx, controllercontext.Context{Client: admin, Informers: f, Clock: clock.RealClock{}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	f.Start(runCtx.Done())
	go func() { defer close(done); _ = ctrl.Start(runCtx) }()
	eventually(t, 30*time.Second, "edit aggregated", func() (bool, error) {
		r, err := admin.RbacV1().ClusterRoles().Get(ctx, "edit", metav1.GetOptions{})
		return err == nil && len(r.Rules) > 0, err
	})
	return c
}
