package authn

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Bootstrap tokens, as upstream defines them (k8s.io/cluster-bootstrap):
// "<id>.<secret>" with a 6-character id and a 16-character secret, kept in
// the kube-system Secret bootstrap-token-<id> of type
// bootstrap.kubernetes.io/token.
const (
	BootstrapTokenSecretType     = corev1.SecretType("bootstrap.kubernetes.io/token")
	BootstrapTokenSecretPrefix   = "bootstrap-token-"
	BootstrapTokenIDKey          = "token-id"
	BootstrapTokenSecretKey      = "token-secret"
	BootstrapTokenExpirationKey  = "expiration"
	BootstrapTokenUsageAuthKey   = "usage-bootstrap-authentication"
	BootstrapTokenExtraGroupsKey = "auth-extra-groups"
	// BootstrapUserPrefix prefixes the token id in the user name.
	BootstrapUserPrefix = "system:bootstrap:"
	// BootstrappersGroup is the group of every bootstrap token user.
	BootstrappersGroup = "system:bootstrappers"
)

// BootstrapTokenPattern matches a bootstrap token.
var BootstrapTokenPattern = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// SecretGetter reads a Secret; an error satisfying apierrors.IsNotFound
// means there is none.
type SecretGetter func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// BootstrapToken authenticates "Authorization: Bearer <id>.<secret>" with
// the bootstrap-token Secrets of kube-system, as upstream does, so a new
// node can ask for its certificates: the user is system:bootstrap:<id> in
// system:bootstrappers (plus the Secret's auth-extra-groups).
//
// Until Skiff has authorization (today every authenticated user is allowed
// everything), the token is accepted only on the certificates.k8s.io API,
// the one thing a joining node does with it; elsewhere it gets no opinion
// (so 401).
type BootstrapToken struct {
	// Get reads Secrets; it must not itself need this authenticator.
	Get SecretGetter
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

var _ Authenticator = (*BootstrapToken)(nil)

// errBadBootstrapToken is the one error a client sees for any bad token, so
// it learns nothing about which part was wrong.
var errBadBootstrapToken = errors.New("invalid bootstrap token")

// Authenticate implements Authenticator.
func (a *BootstrapToken) Authenticate(r *http.Request) (*User, bool, error) {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return nil, false, nil
	}
	m := BootstrapTokenPattern.FindStringSubmatch(strings.TrimSpace(token))
	if m == nil {
		return nil, false, nil // some other kind of bearer token
	}
	if !strings.HasPrefix(r.URL.Path, "/apis/certificates.k8s.io/") {
		return nil, false, nil
	}
	id, secret := m[1], m[2]
	s, err := a.Get(r.Context(), "kube-system", BootstrapTokenSecretPrefix+id)
	if apierrors.IsNotFound(err) {
		return nil, false, errBadBootstrapToken
	}
	if err != nil {
		return nil, false, fmt.Errorf("bootstrap token %s: %w", id, err)
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	if s.DeletionTimestamp != nil || s.Type != BootstrapTokenSecretType ||
		string(s.Data[BootstrapTokenIDKey]) != id ||
		subtle.ConstantTimeCompare(s.Data[BootstrapTokenSecretKey], []byte(secret)) != 1 ||
		string(s.Data[BootstrapTokenUsageAuthKey]) != "true" {
		return nil, false, errBadBootstrapToken
	}
	if exp := string(s.Data[BootstrapTokenExpirationKey]); exp != "" {
		t, err := time.Parse(time.RFC3339, exp)
		if err != nil || !now.Before(t) {
			return nil, false, errBadBootstrapToken
		}
	}
	groups := []string{BootstrappersGroup}
	for _, g := range strings.Split(string(s.Data[BootstrapTokenExtraGroupsKey]), ",") {
		if g = strings.TrimSpace(g); strings.HasPrefix(g, BootstrappersGroup+":") {
			groups = append(groups, g)
		}
	}
	groups = append(groups, AllAuthenticated)
	return &User{Name: BootstrapUserPrefix + id, Groups: groups}, true, nil
}
