package satoken

import (
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// Upstream's constants.
const (
	// LegacyIssuer is the iss of Secret-based (legacy) tokens.
	LegacyIssuer = "kubernetes/serviceaccount"
	// DefaultIssuer is the issuer Skiff uses when none is configured
	// (--service-account-issuer).
	DefaultIssuer = "https://kubernetes.default.svc.cluster.local"
	// WarnOnlyExpirationSeconds is the lifetime the kubelet asks for by
	// default (one hour and 7 s); such pod-bound tokens for the API server's
	// audiences are issued for a year when expiration extension is on, with
	// warnafter at the hour.
	WarnOnlyExpirationSeconds = 60*60 + 7
	// ExtendedExpirationSeconds is that extended lifetime.
	ExtendedExpirationSeconds = 24 * 365 * 60 * 60
	// UserPrefix prefixes "<ns>:<name>" in a service account's user name.
	UserPrefix = "system:serviceaccount:"
	// AllServiceAccountsGroup and NamespaceGroupPrefix are the groups every
	// service account is in.
	AllServiceAccountsGroup = "system:serviceaccounts"
	NamespaceGroupPrefix    = "system:serviceaccounts:"
)

// The user extra keys of a bound token, as upstream names them.
const (
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
)

// Username is system:serviceaccount:<ns>:<name>.
func Username(namespace, name string) string { return UserPrefix + namespace + ":" + name }

// SplitUsername is the inverse of Username.
func SplitUsername(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, UserPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

// Ref names a Kubernetes object in a token.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// Kubernetes is the private claim "kubernetes.io" of a bound token.
type Kubernetes struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount Ref              `json:"serviceaccount,omitempty"`
	Pod            *Ref             `json:"pod,omitempty"`
	Secret         *Ref             `json:"secret,omitempty"`
	Node           *Ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Private holds the private claims of both token shapes.
type Private struct {
	Kubernetes *Kubernetes `json:"kubernetes.io,omitempty"`
	// Legacy tokens.
	LegacyServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name,omitempty"`
	LegacyServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid,omitempty"`
	LegacySecretName         string `json:"kubernetes.io/serviceaccount/secret.name,omitempty"`
	LegacyNamespace          string `json:"kubernetes.io/serviceaccount/namespace,omitempty"`
}

// Claims are a token's claims: the registered ones and the private ones.
type Claims struct {
	jwt.Claims
	Private
}

// Account is the service account a token is issued for.
type Account struct {
	Namespace, Name, UID string
}

// Binding is what a bound token is tied to: a pod (with the node it runs
// on, when known), a secret, or a node. Zero means only the account.
type Binding struct {
	Pod, Secret, Node *Ref
}

// BoundClaims are the claims of a TokenRequest token as upstream makes them:
// sub, aud, iat, nbf = now, exp = now + expiration, a fresh jti, the
// account and the binding, and warnafter when warnAfter > 0.
func BoundClaims(sa Account, b Binding, audiences []string, now time.Time, expiration, warnAfter time.Duration, jti string) Claims {
	c := Claims{
		Claims: jwt.Claims{
			Subject:   Username(sa.Namespace, sa.Name),
			Audience:  jwt.Audience(audiences),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			Expiry:    jwt.NewNumericDate(now.Add(expiration)),
			ID:        jti,
		},
		Private: Private{Kubernetes: &Kubernetes{
			Namespace:      sa.Namespace,
			ServiceAccount: Ref{Name: sa.Name, UID: sa.UID},
			Pod:            b.Pod,
			Secret:         b.Secret,
			Node:           b.Node,
		}},
	}
	if warnAfter > 0 {
		c.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(warnAfter))
	}
	return c
}

// LegacyClaims are the claims of a Secret-based token: no audience, no
// expiry.
func LegacyClaims(sa Account, secretName string) Claims {
	return Claims{
		Claims: jwt.Claims{Issuer: LegacyIssuer, Subject: Username(sa.Namespace, sa.Name)},
		Private: Private{
			LegacyNamespace:          sa.Namespace,
			LegacyServiceAccountName: sa.Name,
			LegacyServiceAccountUID:  sa.UID,
			LegacySecretName:         secretName,
		},
	}
}

// IsLegacy says the claims are a legacy token's.
func (c *Claims) IsLegacy() bool { return c.Issuer == LegacyIssuer }
