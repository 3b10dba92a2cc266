package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
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

// Upstream kubelet's defaults for its webhook authentication and
// authorization caches (KubeletConfiguration authentication.webhook.cacheTTL,
// authorization.webhook.cacheAuthorizedTTL and cacheUnauthorizedTTL).
const (
	DefaultAuthenticationCacheTTL  = 2 * time.Minute
	DefaultAuthorizedCacheTTL      = 5 * time.Minute
	DefaultUnauthorizedCacheTTL    = 30 * time.Second
	maxAuthCacheEntries            = 4096
	systemAuthenticated            = "system:authenticated"
	reviewTimeout                  = 10 * time.Second
	kubeletAuthorizationAPIVersion = "v1"
)

// requester is who a request comes from.
type requester struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// authenticator identifies requests as upstream's kubelet does with
// --client-ca-file and --authentication-token-webhook: a client
// certificate signed by the cluster CA (CN the user, O the groups), else a
// bearer token the API server accepts in a TokenReview (answers cached for
// a TTL, by the token's hash). Anonymous requests are refused.
type authenticator struct {
	reviews kubernetes.Interface // nil: certificates only
	clock   clock.Clock
	ttl     time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]tokenAnswer
}

type tokenAnswer struct {
	user    *requester // nil: refused
	expires time.Time
}

// authenticate returns the request's user, or nil (401).
func (a *authenticator) authenticate(r *http.Request) *requester {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		subject := r.TLS.VerifiedChains[0][0].Subject
		groups := append(slices.Clone(subject.Organization), systemAuthenticated)
		return &requester{Name: subject.CommonName, Groups: groups}
	}
	token, ok := bearerToken(r)
	if !ok || a.reviews == nil {
		return nil
	}
	key := sha256.Sum256([]byte(token))
	now := a.clock.Now()
	a.mu.Lock()
	if got, ok := a.cache[key]; ok && now.Before(got.expires) {
		a.mu.Unlock()
		return got.user
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), reviewTimeout)
	defer cancel()
	review, err := a.reviews.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		// Not cached: the next request asks again (upstream retries too).
		klog.FromContext(r.Context()).Error(err, "Kubelet API: TokenReview failed")
		return nil
	}
	var user *requester
	if review.Status.Authenticated {
		u := review.Status.User
		user = &requester{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				user.Extra[k] = v
			}
		}
	}
	a.mu.Lock()
	if len(a.cache) >= maxAuthCacheEntries {
		a.cache = map[[sha256.Size]byte]tokenAnswer{}
	}
	a.cache[key] = tokenAnswer{user: user, expires: now.Add(a.ttl)}
	a.mu.Unlock()
	return user
}

func bearerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// nodeAttributes are what a request is authorized as: a verb on a
// subresource of this node (upstream's mapping).
type nodeAttributes struct {
	Verb         string
	Subresources []string // tried in order; the first allowed admits
}

// attributesOf maps a request as upstream's kubelet does (with
// KubeletFineGrainedAuthz, on by default): the verb from the HTTP method
// (POST create, GET get, PUT update, PATCH patch, DELETE delete), the
// subresource from the path: /stats stats, /metrics metrics, /logs log,
// /checkpoint checkpoint, /pods and /runningpods pods then proxy,
// /healthz healthz then proxy, /configz configz then proxy, everything
// else (exec, attach, portForward, containerLogs, run) proxy.
func attributesOf(r *http.Request) nodeAttributes {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	path := r.URL.Path
	var subs []string
	switch {
	case underPath(path, "/pods"), underPath(path, "/runningpods"):
		subs = append(subs, "pods")
	case underPath(path, "/healthz"):
		subs = append(subs, "healthz")
	case underPath(path, "/configz"):
		subs = append(subs, "configz")
	}
	switch {
	case underPath(path, "/stats"):
		subs = append(subs, "stats")
	case underPath(path, "/metrics"):
		subs = append(subs, "metrics")
	case underPath(path, "/logs"):
		subs = append(subs, "log")
	case underPath(path, "/checkpoint"):
		subs = append(subs, "checkpoint")
	default:
		subs = append(subs, "proxy")
	}
	return nodeAttributes{Verb: verb, Subresources: subs}
}

// underPath says whether p is prefix or below it.
func underPath(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// authorizer decides on a user and node attributes. The delegated one asks
// the API server with a SubjectAccessReview per (user, verb, subresource),
// answers cached (allowed 5 min, denied 30 s, as upstream's kubelet); the
// static one (no API client, as in tests) admits listed users and groups.
type authorizer struct {
	reviews  kubernetes.Interface // nil: static
	nodeName string
	users    []string
	groups   []string
	clock    clock.Clock
	allowTTL time.Duration
	denyTTL  time.Duration

	mu    sync.Mutex
	cache map[string]sarAnswer
}

type sarAnswer struct {
	allowed bool
	expires time.Time
}

// allowed asks whether u may verb the node's subresource.
func (z *authorizer) allowed(ctx context.Context, u *requester, verb, subresource string) (bool, error) {
	if z.reviews == nil {
		return slices.Contains(z.users, u.Name) || slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(z.groups, g) }), nil
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Version: kubeletAuthorizationAPIVersion, Resource: "nodes", Subresource: subresource, Name: z.nodeName,
		},
	}
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = v
		}
	}
	keyBytes, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	key := string(keyBytes)
	now := z.clock.Now()
	z.mu.Lock()
	if got, ok := z.cache[key]; ok && now.Before(got.expires) {
		z.mu.Unlock()
		return got.allowed, nil
	}
	z.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := z.reviews.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := z.denyTTL
	if allowed {
		ttl = z.allowTTL
	}
	z.mu.Lock()
	if len(z.cache) >= maxAuthCacheEntries {
		z.cache = map[string]sarAnswer{}
	}
	z.cache[key] = sarAnswer{allowed: allowed, expires: now.Add(ttl)}
	z.mu.Unlock()
	return allowed, nil
}

// authFilter authenticates (401 "Unauthorized") and authorizes every
// request (403 or, when the API server cannot be asked, 500, worded as
// upstream's kubelet).
func authFilter(authn *authenticator, authz *authorizer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := authn.authenticate(r)
		if user == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := attributesOf(r)
		for _, sub := range attrs.Subresources {
			ok, err := authz.allowed(r.Context(), user, attrs.Verb, sub)
			if err != nil {
				klog.FromContext(r.Context()).Error(err, "Kubelet API: authorization error", "user", user.Name, "verb", attrs.Verb, "subresource", sub)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", user.Name, attrs.Verb, sub), http.StatusInternalServerError)
				return
			}
			if ok {
				next.ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", user.Name, attrs.Verb, attrs.Subresources), http.StatusForbidden)
	})
}
