package integration

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/satoken"
)

// tokenClient is a client that authenticates with a bearer token only.
func tokenClient(t *testing.T, c *cluster, token string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	cfg := &rest.Config{Host: c.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CAPEM}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cfg
}

func requestToken(t *testing.T, cs kubernetes.Interface, ns, sa string, spec authenticationv1.TokenRequestSpec) *authenticationv1.TokenRequest {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(testCtx(t, 10*time.Second), sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	return tr
}

// TestServiceAccountTokenWorksForExactlyItsRole: a TokenRequest token
// authenticates as the account, is allowed exactly what its RoleBinding
// grants, is answered by TokenReview, and stops working when the account
// is deleted.
func TestServiceAccountTokenWorksForExactlyItsRole(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, admin)
	sa, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := requestToken(t, admin, ns, "robot", authenticationv1.TokenRequestSpec{})
	if tr.Status.Token == "" || tr.Name != "robot" || tr.UID != sa.UID || *tr.Spec.ExpirationSeconds != 3600 || !cmp.Equal(tr.Spec.Audiences, []string{satoken.DefaultIssuer}) {
		t.Fatalf("TokenRequest answer = %+v", tr)
	}
	if d := time.Until(tr.Status.ExpirationTimestamp.Time); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("expirationTimestamp in %v, want an hour", d)
	}
	robot, _ := tokenClient(t, c, tr.Status.Token)
	user := "system:serviceaccount:" + ns + ":robot"

	_, err = robot.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	wantForbidden(t, err, `pods is forbidden: User "`+user+`" cannot list resource "pods" in API group "" in the namespace "`+ns+`"`)

	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "robot", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the robot lists pods", func() (bool, error) {
		_, err := robot.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	_, err = robot.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	wantForbidden(t, err, `configmaps is forbidden: User "`+user+`" cannot create resource "configmaps" in API group "" in the namespace "`+ns+`"`)
	_, err = robot.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list pods in default: %v, want 403", err)
	}

	// Who am I, and what does a TokenReview say?
	ssr, err := robot.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ssr.Status.UserInfo.Username != user || ssr.Status.UserInfo.UID != string(sa.UID) {
		t.Errorf("whoami = %+v", ssr.Status.UserInfo)
	}
	rev, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := authenticationv1.TokenReviewStatus{
		Authenticated: true,
		User: authenticationv1.UserInfo{Username: user, UID: string(sa.UID),
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			Extra:  map[string]authenticationv1.ExtraValue{satoken.ExtraCredentialID: rev.Status.User.Extra[satoken.ExtraCredentialID]}},
		Audiences: []string{satoken.DefaultIssuer},
	}
	if d := cmp.Diff(want, rev.Status); d != "" {
		t.Errorf("TokenReview status (-want +got):\n%s", d)
	}
	if id := rev.Status.User.Extra[satoken.ExtraCredentialID]; len(id) != 1 || len(id[0]) < len("JTI=")+10 {
		t.Errorf("credential id = %v, want JTI=<uuid>", id)
	}

	// Deleting the account ends the token.
	if err := admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the robot's token is refused", func() (bool, error) {
		_, err := robot.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err), nil
	})
	rev, err = admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rev.Status.Authenticated || rev.Status.Error == "" {
		t.Errorf("TokenReview of a deleted account's token = %+v, want unauthenticated with an error", rev.Status)
	}
}

// TestServiceAccountTokenAudienceBindingAndValidation: a token for another
// audience fails on the API but passes a TokenReview for that audience; a
// pod-bound token dies with its pod; bad requests get upstream's errors.
func TestServiceAccountTokenAudienceBindingAndValidation(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, admin)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindSA := func() {
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "robot-view"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "robot", Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindSA()

	t.Run("audience", func(t *testing.T) {
		tr := requestToken(t, admin, ns, "robot", authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}})
		cs, _ := tokenClient(t, c, tr.Status.Token)
		if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			t.Errorf("list with a vault token: %v, want 401", err)
		}
		rev, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token, Audiences: []string{"vault"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rev.Status.Authenticated || !cmp.Equal(rev.Status.Audiences, []string{"vault"}) {
			t.Errorf("TokenReview for vault = %+v", rev.Status)
		}
	})

	t.Run("bound to a pod", func(t *testing.T) {
		pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       corev1.PodSpec{ServiceAccountName: "robot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tr := requestToken(t, admin, ns, "robot", authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: pod.UID}})
		cs, _ := tokenClient(t, c, tr.Status.Token)
		if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list with a pod-bound token: %v", err)
		}
		rev, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rev.Status.User.Extra; !cmp.Equal(got[satoken.ExtraPodName], authenticationv1.ExtraValue{"web"}) || !cmp.Equal(got[satoken.ExtraPodUID], authenticationv1.ExtraValue{string(pod.UID)}) {
			t.Errorf("extra = %v, want the pod's name and uid", got)
		}
		// A wrong UID is a conflict; a pod of another account a bad request.
		_, err = admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "not-it"}}}, metav1.CreateOptions{})
		if !apierrors.IsConflict(err) {
			t.Errorf("wrong pod uid: %v, want 409", err)
		}
		if err := admin.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the pod-bound token is refused", func() (bool, error) {
			_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return apierrors.IsUnauthorized(err), nil
		})
	})

	t.Run("validation", func(t *testing.T) {
		_, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](599)}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || err.Error() != `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes` {
			t.Errorf("expirationSeconds 599: %v, want 422", err)
		}
		_, err = admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("token for a missing account: %v, want 404", err)
		}
		_, err = admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("TokenReview without a token: %v, want 400", err)
		}
	})

	t.Run("a node asks only for its pods' tokens, bound to them", func(t *testing.T) {
		pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "on-n1"},
			Spec:       corev1.PodSpec{NodeName: "n1", ServiceAccountName: "robot", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n1 := as(t, c, "system:node:n1", "system:nodes")
		n2 := as(t, c, "system:node:n2", "system:nodes")
		ref := &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "on-n1", UID: pod.UID}
		var tr *authenticationv1.TokenRequest
		eventually(t, 20*time.Second, "n1 gets its pod's token", func() (bool, error) {
			tr, err = n1.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
			return err == nil, nil
		})
		if tr.Status.Token == "" {
			t.Fatal("no token")
		}
		_, err = n1.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		wantForbidden(t, err, `serviceaccounts "robot" is forbidden: node requested token not bound to a pod`)
		_, err = n2.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "robot", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("n2 asks for n1's pod's token: %v, want 403", err)
		}
	})
}

// TestServiceAccountIssuerDiscovery: the issuer's discovery documents are
// served to service accounts (upstream's bootstrap policy), and a token
// verifies against the published keys.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	c := startRBAC(t)
	admin := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, admin)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := requestToken(t, admin, ns, "robot", authenticationv1.TokenRequestSpec{})
	_, cfg := tokenClient(t, c, tr.Status.Token)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(client *http.Client, path string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.Config.Host+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := get(hc, "/.well-known/openid-configuration")
	if code != 200 {
		t.Fatalf("openid-configuration: %d %s", code, body)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["issuer"] != satoken.DefaultIssuer || doc["jwks_uri"] != satoken.DefaultIssuer+"/openid/v1/jwks" {
		t.Errorf("discovery = %v", doc)
	}
	code, body = get(hc, "/openid/v1/jwks")
	if code != 200 {
		t.Fatalf("jwks: %d %s", code, body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseSigned(tr.Status.Token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(tok.Headers[0].KeyID)
	if len(keys) != 1 {
		t.Fatalf("jwks has no key %q: %s", tok.Headers[0].KeyID, body)
	}
	var claims jwt.Claims
	var private map[string]any
	if err := tok.Claims(keys[0].Key, &claims, &private); err != nil {
		t.Fatalf("token does not verify with the published key: %v", err)
	}
	if claims.Subject != "system:serviceaccount:"+ns+":robot" || claims.Issuer != satoken.DefaultIssuer {
		t.Errorf("claims = %+v", claims)
	}
	// Without credentials: not 401 but authorization's answer (upstream's
	// policy grants it to service accounts only).
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS(t, cfg)}}
	if code, body := get(anon, "/openid/v1/jwks"); code != 403 {
		t.Errorf("anonymous jwks: %d %s, want 403", code, body)
	}
	if code, _ := get(anon, "/api/v1/namespaces"); code != 401 {
		t.Errorf("anonymous namespaces: %d, want 401", code)
	}
}

func mustTLS(t *testing.T, cfg *rest.Config) *tls.Config {
	t.Helper()
	anon := rest.AnonymousClientConfig(cfg)
	tc, err := rest.TLSConfigFor(anon)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}
