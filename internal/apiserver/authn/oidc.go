package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// OIDCOptions are the `--oidc-*` flags of the API server, as upstream names
// them.
type OIDCOptions struct {
	// IssuerURL (--oidc-issuer-url) must be https; its
	// /.well-known/openid-configuration names the JWKS.
	IssuerURL string
	// ClientID (--oidc-client-id) must be in every token's audience.
	ClientID string
	// CAFile (--oidc-ca-file) verifies the issuer's certificate (default:
	// the host's roots).
	CAFile string
	// UsernameClaim (--oidc-username-claim, default "sub") names the user.
	UsernameClaim string
	// UsernamePrefix (--oidc-username-prefix) goes before the name. Unset:
	// "<issuer>#" unless the claim is "email"; "-" means none.
	UsernamePrefix *string
	// GroupsClaim (--oidc-groups-claim) is a string or a list of strings;
	// GroupsPrefix (--oidc-groups-prefix) goes before each.
	GroupsClaim  string
	GroupsPrefix string
	// RequiredClaims (--oidc-required-claim key=value) must all be in the
	// token with exactly these values.
	RequiredClaims map[string]string
	// SigningAlgs (--oidc-signing-algs, default RS256) are accepted.
	SigningAlgs []string
	// Now is the time tokens are checked against (nil: time.Now).
	Now func() time.Time
}

// Validate checks the options as upstream does.
func (o OIDCOptions) Validate() error {
	var errs []error
	u, err := url.Parse(o.IssuerURL)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--oidc-issuer-url: %w", err))
	case u.Scheme != "https":
		errs = append(errs, fmt.Errorf("--oidc-issuer-url (%q) must use https scheme", o.IssuerURL))
	}
	if o.ClientID == "" {
		errs = append(errs, errors.New("--oidc-client-id must be set when --oidc-issuer-url is"))
	}
	return errors.Join(errs...)
}

// OIDC authenticates the ID tokens of one OpenID Connect issuer: a bearer
// JWT whose `iss` is the issuer is verified against the issuer's JWKS (found
// by discovery on first use, retried until it works), its audience must hold
// the client ID, it must not have expired, and the required claims must
// match. Other bearer tokens get no opinion. The user is the prefixed
// username claim, with the prefixed groups and system:authenticated; a token
// with a `jti` carries it as the extra authentication.kubernetes.io/credential-id
// (JTI=<jti>), as upstream.
type OIDC struct {
	opts   OIDCOptions
	prefix string
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

var _ Authenticator = (*OIDC)(nil)

// NewOIDC builds the authenticator; it reads the CA file but does not yet
// talk to the issuer.
func NewOIDC(opts OIDCOptions) (*OIDC, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.UsernameClaim == "" {
		opts.UsernameClaim = "sub"
	}
	if len(opts.SigningAlgs) == 0 {
		opts.SigningAlgs = []string{oidc.RS256}
	}
	prefix := ""
	switch {
	case opts.UsernamePrefix == nil && opts.UsernameClaim != "email":
		prefix = opts.IssuerURL + "#"
	case opts.UsernamePrefix != nil && *opts.UsernamePrefix != "-":
		prefix = *opts.UsernamePrefix
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--oidc-ca-file %s: no certificates found", opts.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}}
	return &OIDC{opts: opts, prefix: prefix, client: client}, nil
}

// errOIDCNotReady is returned while the issuer's discovery document cannot
// be read.
var errOIDCNotReady = errors.New("oidc: authenticator not initialized")

func (a *OIDC) getVerifier() (*oidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	// The provider keeps the context for its later JWKS fetches: give it
	// one that lives as long as the authenticator, carrying our client.
	pctx := oidc.ClientContext(context.Background(), a.client)
	dctx, cancel := context.WithTimeout(pctx, 10*time.Second)
	defer cancel()
	// Discovery with a bounded context; the key set gets the long-lived one.
	p, err := oidc.NewProvider(dctx, a.opts.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errOIDCNotReady, err)
	}
	var doc struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil || doc.JWKSURL == "" {
		return nil, fmt.Errorf("%w: discovery document has no jwks_uri", errOIDCNotReady)
	}
	keys := oidc.NewRemoteKeySet(pctx, doc.JWKSURL)
	a.verifier = oidc.NewVerifier(a.opts.IssuerURL, keys, &oidc.Config{
		ClientID: a.opts.ClientID, SupportedSigningAlgs: a.opts.SigningAlgs, Now: a.opts.Now,
	})
	return a.verifier, nil
}

// Authenticate implements Authenticator.
func (a *OIDC) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := BearerToken(r)
	if !ok || !a.hasIssuer(token) {
		return nil, false, nil
	}
	v, err := a.getVerifier()
	if err != nil {
		return nil, false, err
	}
	idToken, err := v.Verify(r.Context(), token)
	if err != nil {
		return nil, false, fmt.Errorf("oidc: verify token: %w", err)
	}
	var claims map[string]json.RawMessage
	if err := idToken.Claims(&claims); err != nil {
		return nil, false, fmt.Errorf("oidc: parse claims: %w", err)
	}
	u, err := a.userFrom(claims)
	if err != nil {
		return nil, false, err
	}
	return u, true, nil
}

// userFrom maps verified claims to a user.
func (a *OIDC) userFrom(claims map[string]json.RawMessage) (*User, error) {
	var name string
	if err := claimString(claims, a.opts.UsernameClaim, &name); err != nil {
		return nil, err
	}
	if a.opts.UsernameClaim == "email" {
		// A present email_verified must be true (upstream).
		if raw, ok := claims["email_verified"]; ok {
			var verified bool
			if err := json.Unmarshal(raw, &verified); err != nil {
				return nil, fmt.Errorf("oidc: parse 'email_verified' claim: %w", err)
			}
			if !verified {
				return nil, fmt.Errorf("oidc: email not verified")
			}
		}
	}
	u := &User{Name: a.prefix + name}
	if a.opts.GroupsClaim != "" {
		if raw, ok := claims[a.opts.GroupsClaim]; ok {
			var groups []string
			var one string
			if err := json.Unmarshal(raw, &groups); err != nil {
				if err := json.Unmarshal(raw, &one); err != nil {
					return nil, fmt.Errorf("oidc: parse groups claim %q: %w", a.opts.GroupsClaim, err)
				}
				groups = []string{one}
			}
			for _, g := range groups {
				u.Groups = append(u.Groups, a.opts.GroupsPrefix+g)
			}
		}
	}
	for k, want := range a.opts.RequiredClaims {
		var got string
		if err := claimString(claims, k, &got); err != nil {
			return nil, err
		}
		if got != want {
			return nil, fmt.Errorf("oidc: required claim %s value does not match. Got = %s, want = %s", k, got, want)
		}
	}
	var jti string
	if claimString(claims, "jti", &jti) == nil && jti != "" {
		u.Extra = map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=" + jti}}
	}
	u.Groups = append(u.Groups, AllAuthenticated)
	return u, nil
}

func claimString(claims map[string]json.RawMessage, name string, out *string) error {
	raw, ok := claims[name]
	if !ok {
		return fmt.Errorf("oidc: claim not present: %s", name)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("oidc: parse claim %s: %w", name, err)
	}
	return nil
}

// hasIssuer reports whether token is a JWT whose unverified `iss` is this
// authenticator's issuer, so that other JWTs (service-account tokens, other
// issuers) are left to other authenticators.
func (a *OIDC) hasIssuer(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	return json.Unmarshal(payload, &c) == nil && c.Issuer == a.opts.IssuerURL
}
