package authn

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/satoken"
)

// ServiceAccountObjects reads the objects a service-account token names.
// A missing object is an apierrors NotFound.
type ServiceAccountObjects interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// ServiceAccountTokens authenticates "Authorization: Bearer <jwt>" with
// service-account tokens, as upstream's two JWT authenticators do:
//   - bound tokens (TokenRequest) must be signed by one of the keys, name a
//     configured issuer, be within exp/nbf (one minute of leeway), carry one
//     of the API server's audiences, and name an account (and pod, secret or
//     node) that still exists with the same UID;
//   - legacy tokens (iss kubernetes/serviceaccount) must still be the
//     token of their kubernetes.io/service-account-token Secret, whose
//     account still exists with the same UID.
//
// The user is system:serviceaccount:<ns>:<name>, UID the account's, in
// system:serviceaccounts and system:serviceaccounts:<ns>, with the pod,
// node and credential id in Extra as upstream.
type ServiceAccountTokens struct {
	Verifier *satoken.Verifier
	Objects  ServiceAccountObjects
	// Clock is the time tokens are checked at (default: the real clock).
	Clock clock.PassiveClock
}

var _ Authenticator = (*ServiceAccountTokens)(nil)

// LegacyTokenInvalidSinceLabel marks a legacy token Secret whose token no
// longer works (upstream's legacy token cleaner sets it).
const LegacyTokenInvalidSinceLabel = "kubernetes.io/legacy-token-invalid-since"

// Authenticate implements Authenticator.
func (a *ServiceAccountTokens) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false, nil
	}
	u, _, err := a.AuthenticateToken(r.Context(), strings.TrimSpace(token), nil)
	if errors.Is(err, satoken.ErrNotServiceAccountToken) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// AuthenticateToken checks token for one of audiences (nil: the API
// server's own) and returns the user and the audiences it is good for.
// satoken.ErrNotServiceAccountToken means it is not a service-account
// token at all (TokenReview and the bearer chain then ask others).
func (a *ServiceAccountTokens) AuthenticateToken(ctx context.Context, token string, audiences []string) (*User, []string, error) {
	now := a.now()
	c, auds, err := a.Verifier.Verify(token, now, audiences)
	if err != nil {
		return nil, nil, err
	}
	if c.IsLegacy() {
		u, err := a.legacyUser(ctx, token, c)
		return u, auds, err
	}
	u, err := a.boundUser(ctx, c, now)
	return u, auds, err
}

func (a *ServiceAccountTokens) now() time.Time {
	if a.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return a.Clock.Now()
}

func (a *ServiceAccountTokens) boundUser(ctx context.Context, c *satoken.Claims, now time.Time) (*User, error) {
	k := c.Kubernetes
	ns := k.Namespace
	// An object deleted longer ago than the leeway no longer backs tokens;
	// one whose deletion just started still does (upstream).
	cutoff := now.Add(-satoken.Leeway)
	sa, err := a.Objects.ServiceAccount(ctx, ns, k.ServiceAccount.Name)
	if err != nil {
		return nil, lookupErr("service account", ns, k.ServiceAccount.Name, err)
	}
	if string(sa.UID) != k.ServiceAccount.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, k.ServiceAccount.UID)
	}
	if sa.DeletionTimestamp != nil && sa.DeletionTimestamp.Time.Before(cutoff) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, sa.Name)
	}
	extra := map[string][]string{}
	if ref := k.Secret; ref != nil {
		s, err := a.Objects.Secret(ctx, ns, ref.Name)
		if err != nil {
			return nil, errors.New("service account token has been invalidated")
		}
		if string(s.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", s.UID, ref.UID)
		}
		if s.DeletionTimestamp != nil && s.DeletionTimestamp.Time.Before(cutoff) {
			return nil, errors.New("service account token has been invalidated")
		}
	}
	switch {
	case k.Pod != nil:
		p, err := a.Objects.Pod(ctx, ns, k.Pod.Name)
		if err != nil {
			return nil, errors.New("service account token has been invalidated")
		}
		if string(p.UID) != k.Pod.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", p.UID, k.Pod.UID)
		}
		if p.DeletionTimestamp != nil && p.DeletionTimestamp.Time.Before(cutoff) {
			return nil, errors.New("service account token has been invalidated")
		}
		extra[satoken.ExtraPodName] = []string{k.Pod.Name}
		extra[satoken.ExtraPodUID] = []string{k.Pod.UID}
		if k.Node != nil {
			// The node of a pod-bound token is information, not a binding.
			extra[satoken.ExtraNodeName] = []string{k.Node.Name}
			if k.Node.UID != "" {
				extra[satoken.ExtraNodeUID] = []string{k.Node.UID}
			}
		}
	case k.Node != nil:
		n, err := a.Objects.Node(ctx, k.Node.Name)
		if err != nil {
			return nil, errors.New("service account token has been invalidated")
		}
		if string(n.UID) != k.Node.UID {
			return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", n.UID, k.Node.UID)
		}
		if n.DeletionTimestamp != nil && n.DeletionTimestamp.Time.Before(cutoff) {
			return nil, errors.New("service account token has been invalidated")
		}
		extra[satoken.ExtraNodeName] = []string{k.Node.Name}
		extra[satoken.ExtraNodeUID] = []string{k.Node.UID}
	}
	if c.ID != "" {
		extra[satoken.ExtraCredentialID] = []string{"JTI=" + c.ID}
	}
	return serviceAccountUser(ns, sa.Name, string(sa.UID), extra), nil
}

func (a *ServiceAccountTokens) legacyUser(ctx context.Context, token string, c *satoken.Claims) (*User, error) {
	ns, name := c.LegacyNamespace, c.LegacyServiceAccountName
	if sns, sname, ok := satoken.SplitUsername(c.Subject); !ok || sns != ns || sname != name {
		return nil, errors.New("sub claim is invalid")
	}
	s, err := a.Objects.Secret(ctx, ns, c.LegacySecretName)
	if err != nil || s.DeletionTimestamp != nil {
		return nil, errors.New("token has been invalidated")
	}
	if subtle.ConstantTimeCompare(s.Data[corev1.ServiceAccountTokenKey], []byte(token)) != 1 {
		return nil, errors.New("token does not match server's copy")
	}
	sa, err := a.Objects.ServiceAccount(ctx, ns, name)
	if err != nil {
		return nil, lookupErr("service account", ns, name, err)
	}
	if sa.DeletionTimestamp != nil {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, name)
	}
	if string(sa.UID) != c.LegacyServiceAccountUID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, c.LegacyServiceAccountUID)
	}
	if since := s.Labels[LegacyTokenInvalidSinceLabel]; since != "" {
		return nil, fmt.Errorf("the token in secret %s/%s for service account %s/%s has been marked invalid", ns, s.Name, ns, name)
	}
	return serviceAccountUser(ns, name, c.LegacyServiceAccountUID, nil), nil
}

func lookupErr(what, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s not found", what, ns, name)
	}
	return fmt.Errorf("look up %s %s/%s: %w", what, ns, name, err)
}

// serviceAccountUser is the user of a service account, as upstream's
// ServiceAccountInfo.UserInfo.
func serviceAccountUser(ns, name, uid string, extra map[string][]string) *User {
	if len(extra) == 0 {
		extra = nil
	}
	return &User{
		Name:   satoken.Username(ns, name),
		UID:    uid,
		Groups: []string{satoken.AllServiceAccountsGroup, satoken.NamespaceGroupPrefix + ns, AllAuthenticated},
		Extra:  extra,
	}
}
