package component

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DelegatedCacheTTL is how long upstream's components cache their
// delegated TokenReview and SubjectAccessReview answers.
const DelegatedCacheTTL = 10 * time.Second

// Auth guards a component's /metrics as upstream's kube-controller-manager
// and kube-scheduler do with delegated authentication and authorization:
// a verified client certificate names the user (secure.go), else a bearer
// token is checked with a TokenReview, then a
// SubjectAccessReview asks whether its user may get the path (RBAC's
// system:monitoring role grants /metrics). No token is 401, a refused
// user 403; answers are cached for DelegatedCacheTTL. /healthz, /livez
// and /readyz stay open (upstream's --authorization-always-allow-paths).
type Auth struct {
	// Client asks the API server (its identity needs create on
	// tokenreviews and subjectaccessreviews, which system:kube-scheduler
	// and system:kube-controller-manager have).
	Client kubernetes.Interface
	// Clock (default the real clock).
	Clock clock.Clock

	mu     sync.Mutex
	tokens map[[sha256.Size]byte]cachedUser
	grants map[string]cachedGrant
}

type cachedUser struct {
	user    *authenticationv1.UserInfo // nil: refused
	expires time.Time
}

type cachedGrant struct {
	allowed bool
	reason  string
	expires time.Time
}

func (a *Auth) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// Wrap guards next.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := a.authenticate(r)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Delegated authentication failed")
		}
		if user == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		allowed, reason, err := a.authorize(r.Context(), user, verb, r.URL.Path)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Delegated authorization failed")
			http.Error(w, "Authorization error", http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("forbidden: User %q cannot %s path %q", user.Username, verb, r.URL.Path)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Auth) authenticate(r *http.Request) (*authenticationv1.UserInfo, error) {
	// A client certificate the TLS handshake verified against the client
	// CA (secure.go): CN the user, O the groups, as upstream's x509
	// authenticator.
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		leaf := r.TLS.VerifiedChains[0][0]
		groups := append(slices.Clone(leaf.Subject.Organization), "system:authenticated")
		return &authenticationv1.UserInfo{Username: leaf.Subject.CommonName, Groups: groups}, nil
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return nil, nil
	}
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	if c, ok := a.tokens[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.user, nil
	}
	a.mu.Unlock()
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var user *authenticationv1.UserInfo
	if tr.Status.Authenticated {
		user = &tr.Status.User
	}
	a.mu.Lock()
	if a.tokens == nil || len(a.tokens) > 4096 {
		a.tokens = map[[sha256.Size]byte]cachedUser{}
	}
	a.tokens[key] = cachedUser{user: user, expires: now.Add(DelegatedCacheTTL)}
	a.mu.Unlock()
	return user, nil
}

func (a *Auth) authorize(ctx context.Context, u *authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path},
	}
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%v\x00%v", u.Username, u.UID, verb, path, u.Groups, u.Extra)
	now := a.now()
	a.mu.Lock()
	if c, ok := a.grants[key]; ok && now.Before(c.expires) {
		a.mu.Unlock()
		return c.allowed, c.reason, nil
	}
	a.mu.Unlock()
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	a.mu.Lock()
	if a.grants == nil || len(a.grants) > 4096 {
		a.grants = map[string]cachedGrant{}
	}
	a.grants[key] = cachedGrant{allowed: allowed, reason: sar.Status.Reason, expires: now.Add(DelegatedCacheTTL)}
	a.mu.Unlock()
	return allowed, sar.Status.Reason, nil
}
