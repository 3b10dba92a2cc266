package apiserver

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/tokenrequest"
	"github.com/skiff-sh/skiff/internal/satoken"
)

// ServiceAccountConfig configures service-account tokens: the TokenRequest
// subresource, their authentication, TokenReview and the issuer's OpenID
// discovery documents.
type ServiceAccountConfig struct {
	// SigningKey signs tokens (--service-account-signing-key-file); nil
	// serves no TokenRequest (503) but still verifies.
	SigningKey crypto.Signer
	// PublicKeys verify tokens (--service-account-key-file); the signing
	// key's public half is always among them.
	PublicKeys []crypto.PublicKey
	// Issuers (--service-account-issuer): the first is written into new
	// tokens, all are accepted. Default satoken.DefaultIssuer.
	Issuers []string
	// Audiences are the API server's (--api-audiences); default the
	// first issuer.
	Audiences []string
	// JWKSURI is the jwks_uri of the discovery document
	// (--service-account-jwks-uri); default <issuer>/openid/v1/jwks.
	JWKSURI string
	// ExtendExpiration: see tokenrequest.Issuer (upstream default on).
	ExtendExpiration bool
	// MaxExpiration shortens longer requests (0: no limit).
	MaxExpiration time.Duration
}

// serviceAccounts is the server's token machinery.
type serviceAccounts struct {
	authn    *authn.ServiceAccountTokens
	issuer   *tokenrequest.Issuer // nil without a signing key
	oidc     []byte               // /.well-known/openid-configuration
	jwks     []byte               // /openid/v1/jwks
	issuerOK bool                 // discovery is served (an https issuer)
}

func newServiceAccounts(cfg *ServiceAccountConfig, objects authn.ServiceAccountObjects, s *Server) (*serviceAccounts, error) {
	if len(cfg.Issuers) == 0 {
		cfg.Issuers = []string{satoken.DefaultIssuer}
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = []string{cfg.Issuers[0]}
	}
	keys := append([]crypto.PublicKey(nil), cfg.PublicKeys...)
	if cfg.SigningKey != nil {
		keys = append(keys, cfg.SigningKey.Public())
	}
	if len(keys) == 0 {
		return nil, errors.New("service accounts: no key to verify tokens with")
	}
	keys = uniqueKeys(keys)
	v, err := satoken.NewVerifier(keys, satoken.VerifierOptions{Issuers: cfg.Issuers, Audiences: cfg.Audiences})
	if err != nil {
		return nil, err
	}
	sa := &serviceAccounts{authn: &authn.ServiceAccountTokens{Verifier: v, Objects: objects, Clock: s.clock}}
	if cfg.SigningKey != nil {
		signer, err := satoken.NewSigner(cfg.Issuers[0], cfg.SigningKey)
		if err != nil {
			return nil, err
		}
		sa.issuer = &tokenrequest.Issuer{
			Signer: signer, Objects: objects, Audiences: cfg.Audiences,
			ExtendExpiration: cfg.ExtendExpiration, MaxExpiration: cfg.MaxExpiration, Clock: s.clock,
		}
	}
	// Discovery, as upstream: only for an https issuer URL.
	if u, err := url.Parse(cfg.Issuers[0]); err == nil && u.Scheme == "https" {
		sa.issuerOK = true
		jwksURI := cfg.JWKSURI
		if jwksURI == "" {
			jwksURI = strings.TrimSuffix(cfg.Issuers[0], "/") + "/openid/v1/jwks"
		}
		algs := []string{}
		for _, k := range keys {
			if alg, err := satoken.Algorithm(k); err == nil && !slices.Contains(algs, string(alg)) {
				algs = append(algs, string(alg))
			}
		}
		if sa.oidc, err = json.Marshal(map[string]any{
			"issuer": cfg.Issuers[0], "jwks_uri": jwksURI,
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": algs,
		}); err != nil {
			return nil, err
		}
		set, err := satoken.JWKS(keys)
		if err != nil {
			return nil, err
		}
		if sa.jwks, err = json.Marshal(set); err != nil {
			return nil, err
		}
	}
	return sa, nil
}

func uniqueKeys(keys []crypto.PublicKey) []crypto.PublicKey {
	var out []crypto.PublicKey
	seen := map[string]bool{}
	for _, k := range keys {
		kid, err := satoken.KeyID(k)
		if err != nil || seen[kid] {
			continue
		}
		seen[kid] = true
		out = append(out, k)
	}
	return out
}

// The issuer's OpenID Connect discovery paths.
const (
	oidcConfigPath = "/.well-known/openid-configuration"
	oidcJWKSPath   = "/openid/v1/jwks"
)

// serveDiscovery serves the issuer's discovery documents; it reports
// whether the path was one of them.
func (sa *serviceAccounts) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	if sa == nil || !sa.issuerOK {
		return false
	}
	var body []byte
	ctype := "application/json"
	switch r.URL.Path {
	case oidcConfigPath:
		body = sa.oidc
	case oidcJWKSPath:
		body, ctype = sa.jwks, "application/jwk-set+json"
	default:
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return true
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return true
}

// reviewToken answers TokenReviews: service-account tokens for the asked
// audiences, then the other token authenticators.
func (s *Server) reviewToken(other authn.Authenticator) registry.TokenReviewer {
	return func(ctx context.Context, token string, audiences []string) (*authn.User, []string, bool, error) {
		if sa := s.serviceAccounts; sa != nil {
			u, auds, err := sa.authn.AuthenticateToken(ctx, token, audiences)
			if err == nil {
				return u, auds, true, nil
			}
			if !errors.Is(err, satoken.ErrNotServiceAccountToken) {
				return nil, nil, false, err
			}
		}
		if other == nil {
			return nil, nil, false, nil
		}
		r := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/"}, Header: http.Header{}}).WithContext(ctx)
		r.Header.Set("Authorization", "Bearer "+token)
		u, ok, err := other.Authenticate(r)
		if !ok {
			return nil, nil, false, err
		}
		auds := audiences
		if len(auds) == 0 && s.serviceAccounts != nil {
			auds = s.serviceAccounts.authn.Verifier.Audiences()
		}
		return u, auds, true, nil
	}
}

// serveTokenRequest serves serviceaccounts/token: a TokenRequest answered
// with a signed token (registry/tokenrequest decides).
func serveTokenRequest(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	if info.Verb != "create" {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	sa := h.srv.serviceAccounts
	if sa == nil || sa.issuer == nil {
		h.codecs.writeError(w, apierrors.NewServiceUnavailable("the API server has no service-account signing key"))
		return
	}
	body, err := readBody(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	gvk := authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")
	req := &authenticationv1.TokenRequest{}
	if _, err := h.codecs.decodeBody(r, body, req, gvk); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	dry, err := dryRun(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if err := objectNamespace(req, info.Namespace); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if req.Spec.ExpirationSeconds == nil { // upstream's defaulting, before admission
		s := int64(tokenrequest.DefaultExpirationSeconds)
		req.Spec.ExpirationSeconds = &s
	}
	// Admission sees the TokenRequest (CREATE of serviceaccounts/token):
	// mutating now, validating once the issuer has defaulted and
	// validated it. Nothing is stored: a dry run answers too.
	a := h.subresourceAdmission(ctx, admission.Create, req, info, dry)
	if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	validate := func(ctx context.Context, tr *authenticationv1.TokenRequest) error {
		a.Object = tr
		return h.runAdmission(ctx, a, h.srv.admission.Validate)
	}
	res, warnings, err := sa.issuer.Create(ctx, info.Namespace, info.Name, req, validate)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if rec := warningsFrom(ctx); rec != nil {
		for _, msg := range warnings {
			rec.add(msg)
		}
	}
	res.APIVersion, res.Kind = gvk.GroupVersion().String(), gvk.Kind
	h.codecs.writeObject(w, http.StatusCreated, output{mediaType: out.mediaType}, res)
}

// saObjects reads what tokens name from the server's caches (etcd on a
// cache miss).
type saObjects struct{ r reader }

var _ authn.ServiceAccountObjects = saObjects{}

func (o saObjects) ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{}
	return sa, o.r.Get(ctx, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), ns, name, false, sa)
}

func (o saObjects) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, o.r.Get(ctx, corev1.SchemeGroupVersion.WithResource("pods"), ns, name, false, p)
}

func (o saObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, o.r.Get(ctx, corev1.SchemeGroupVersion.WithResource("secrets"), ns, name, false, s)
}

func (o saObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	return n, o.r.Get(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), "", name, false, n)
}

// discoveryPath says p is a discovery document this server serves. Such
// requests without credentials go on as system:anonymous, so that a
// binding to system:unauthenticated makes them public, as upstream.
func (sa *serviceAccounts) discoveryPath(p string) bool {
	return sa != nil && sa.issuerOK && (p == oidcConfigPath || p == oidcJWKSPath)
}
