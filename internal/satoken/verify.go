package satoken

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Leeway is how far exp and nbf may be off, as upstream (one minute).
const Leeway = jwt.DefaultLeeway

// ErrNotServiceAccountToken means the token is not a JWT of a known issuer:
// another authenticator may know it.
var ErrNotServiceAccountToken = errors.New("not a service-account token")

// Verifier checks the signature, issuer, time and audience of tokens.
type Verifier struct {
	issuers   []string
	keys      map[string][]crypto.PublicKey // by kid
	all       []crypto.PublicKey
	implicit  []string
	legacyOff bool
}

// VerifierOptions tune NewVerifier.
type VerifierOptions struct {
	// Issuers are accepted in iss (the first is the one that signs).
	// Legacy tokens (iss kubernetes/serviceaccount) are always accepted
	// unless NoLegacy is set.
	Issuers []string
	// Audiences are the API server's own (--api-audiences): a token without
	// audience (legacy) counts as one for them, and a request that names
	// none asks for them.
	Audiences []string
	NoLegacy  bool
}

// NewVerifier verifies tokens signed by any of keys.
func NewVerifier(keys []crypto.PublicKey, opts VerifierOptions) (*Verifier, error) {
	v := &Verifier{issuers: opts.Issuers, keys: map[string][]crypto.PublicKey{}, implicit: opts.Audiences, legacyOff: opts.NoLegacy}
	for _, k := range keys {
		kid, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		v.keys[kid] = append(v.keys[kid], k)
		v.all = append(v.all, k)
	}
	return v, nil
}

// Audiences are the API server's audiences.
func (v *Verifier) Audiences() []string { return v.implicit }

var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// Verify checks token at time now for one of audiences (nil: the API
// server's). It returns the claims and the audiences the token is good
// for, ErrNotServiceAccountToken when the token is not one of ours, or an
// error saying why ours is not valid.
func (v *Verifier) Verify(token string, now time.Time, audiences []string) (*Claims, []string, error) {
	iss, ok := peekIssuer(token)
	if !ok || !v.knows(iss) {
		return nil, nil, ErrNotServiceAccountToken
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return nil, nil, ErrNotServiceAccountToken
	}
	keys := v.all
	for _, h := range tok.Headers {
		if h.KeyID != "" {
			keys = v.keys[h.KeyID]
			break
		}
	}
	if len(keys) == 0 {
		return nil, nil, errors.New("invalid signature, no keys found")
	}
	var c Claims
	verified := false
	var errs []error
	for _, k := range keys {
		c = Claims{}
		if err := tok.Claims(k, &c.Claims, &c.Private); err != nil {
			errs = append(errs, err)
			continue
		}
		verified = true
		break
	}
	if !verified {
		return nil, nil, fmt.Errorf("invalid signature: %w", errors.Join(errs...))
	}
	if !v.knows(c.Issuer) {
		return nil, nil, fmt.Errorf("token issuer %q is invalid", c.Issuer)
	}
	if !c.IsLegacy() {
		if c.Expiry == nil {
			return nil, nil, errors.New("service account token has no expiry")
		}
		switch err := c.ValidateWithLeeway(jwt.Expected{Time: now}, Leeway); {
		case err == nil:
		case errors.Is(err, jwt.ErrExpired):
			return nil, nil, errors.New("service account token has expired")
		case errors.Is(err, jwt.ErrNotValidYet):
			return nil, nil, errors.New("service account token is not valid yet")
		case errors.Is(err, jwt.ErrIssuedInTheFuture):
			return nil, nil, errors.New("service account token is issued in the future")
		default:
			return nil, nil, fmt.Errorf("service account token claims could not be validated: %w", err)
		}
		if c.Kubernetes == nil || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
			return nil, nil, errors.New("service account token lacks its kubernetes.io claims")
		}
	} else if c.LegacyNamespace == "" || c.LegacyServiceAccountName == "" || c.LegacyServiceAccountUID == "" || c.LegacySecretName == "" {
		return nil, nil, errors.New("legacy service account token lacks its claims")
	}
	have := []string(c.Audience)
	if len(have) == 0 {
		have = v.implicit // legacy tokens are for the API server only
	}
	want := audiences
	if len(want) == 0 {
		want = v.implicit
	}
	var good []string
	for _, a := range have {
		if slices.Contains(want, a) && !slices.Contains(good, a) {
			good = append(good, a)
		}
	}
	if len(good) == 0 && len(v.implicit) != 0 {
		return nil, nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", have, want)
	}
	return &c, good, nil
}

func (v *Verifier) knows(iss string) bool {
	if iss == LegacyIssuer {
		return !v.legacyOff
	}
	return slices.Contains(v.issuers, iss)
}

// peekIssuer reads iss from an unverified compact JWT.
func peekIssuer(token string) (string, bool) {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return "", false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return "", false
	}
	return c.Issuer, true
}
