package volume

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// TokenRequester asks the API server for a service-account token, as the
// node: serviceaccounts/token of namespace/name.
type TokenRequester interface {
	RequestToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

// Refresh rules of upstream's kubelet token manager.
const (
	// TokenMaxTTL: a token older than this is replaced whatever its
	// lifetime.
	TokenMaxTTL = 24 * time.Hour
	// tokenMaxJitter spreads refreshes of many pods.
	tokenMaxJitter = 10 * time.Second
)

// Tokens fills projected serviceAccountToken sources: each pod's token
// for (account, audience, lifetime) is asked for once by TokenRequest,
// bound to the pod, kept, and asked for again when 80% of its lifetime has
// passed or it is older than 24 hours (minus up to 10 s of jitter), as
// upstream's kubelet does. The volume is rewritten at each pod sync, so a
// new token reaches the file atomically (WriteAtomic).
type Tokens struct {
	requester TokenRequester
	clock     clock.PassiveClock
	jitter    func() time.Duration

	mu    sync.Mutex
	cache map[tokenKey]*authenticationv1.TokenRequest
}

type tokenKey struct {
	pod       types.UID
	namespace string
	account   string
	audience  string
	seconds   int64
}

// NewTokens asks r for tokens; c is the time (nil: the real clock).
func NewTokens(r TokenRequester, c clock.PassiveClock) *Tokens {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Tokens{
		requester: r, clock: c,
		jitter: func() time.Duration { return time.Duration(rand.Float64()*tokenMaxJitter.Seconds()) * time.Second },
		cache:  map[tokenKey]*authenticationv1.TokenRequest{},
	}
}

// Token is the pod's token for src.
func (t *Tokens) Token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	seconds := int64(3600)
	if src.ExpirationSeconds != nil {
		seconds = *src.ExpirationSeconds
	}
	key := tokenKey{pod: pod.UID, namespace: pod.Namespace, account: pod.Spec.ServiceAccountName, audience: src.Audience, seconds: seconds}
	t.mu.Lock()
	cached := t.cache[key]
	t.mu.Unlock()
	if cached != nil && !t.needsRefresh(cached) {
		return cached.Status.Token, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tr, err := t.requester.RequestToken(ctx, pod.Namespace, pod.Spec.ServiceAccountName, req)
	if err != nil {
		if cached != nil && t.clock.Now().Before(cached.Status.ExpirationTimestamp.Time) {
			return cached.Status.Token, nil // still valid: keep it, try again next sync
		}
		return "", fmt.Errorf("failed to fetch token: %w", err)
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = &seconds
	}
	t.mu.Lock()
	t.cache[key] = tr
	t.mu.Unlock()
	return tr.Status.Token, nil
}

// needsRefresh is upstream's rule: older than 24 h, or within 20% of the
// lifetime of the expiry, each less a jitter.
func (t *Tokens) needsRefresh(tr *authenticationv1.TokenRequest) bool {
	now := t.clock.Now()
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-ttl)
	j := t.jitter()
	return now.After(issued.Add(TokenMaxTTL-j)) || now.After(exp.Add(-ttl/5-j))
}

// Forget drops the tokens of a pod that is gone.
func (t *Tokens) Forget(pod types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.cache {
		if k.pod == pod {
			delete(t.cache, k)
		}
	}
}

// tokenPayload is the file of a serviceAccountToken source.
func (m *Manager) tokenPayload(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, defaultMode *int32) (map[string]File, error) {
	if m.Tokens == nil {
		return nil, nil // no token source on this node (tests without an API)
	}
	tok, err := m.Tokens.Token(ctx, pod, src)
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(corev1.ProjectedVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	p := strings.TrimPrefix(src.Path, "/")
	if p == "" || slices.Contains(strings.Split(p, "/"), "..") {
		return nil, fmt.Errorf("invalid token path %q", src.Path)
	}
	return map[string]File{p: {Data: []byte(tok), Mode: mode}}, nil
}
