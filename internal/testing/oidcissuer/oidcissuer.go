// Package oidcissuer is a small OpenID Connect issuer for tests: an HTTPS
// server on loopback that serves the discovery document and a JWKS, and
// signs ID tokens with its RSA key (RS256).
package oidcissuer

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a running test issuer.
type Issuer struct {
	// URL is the issuer URL (https://127.0.0.1:<port>).
	URL string
	// CAFile is a PEM file with the server's certificate, for --oidc-ca-file.
	CAFile string

	key    *rsa.PrivateKey
	keyID  string
	server *httptest.Server
}

// Start starts an issuer; t.Cleanup stops it.
func Start(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issuer{key: key, keyID: "test-key"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "jwks_uri": is.URL + "/keys",
			"authorization_endpoint": is.URL + "/auth", "token_endpoint": is.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: is.keyID, Algorithm: "RS256", Use: "sig"}}})
	})
	is.server = httptest.NewTLSServer(mux)
	t.Cleanup(is.server.Close)
	is.URL = is.server.URL
	is.CAFile = filepath.Join(t.TempDir(), "oidc-ca.crt")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.server.Certificate().Raw})
	if err := os.WriteFile(is.CAFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return is
}

// Sign returns a compact JWT of claims, signed by the issuer's key.
func (is *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return SignWith(t, is.key, is.keyID, claims)
}

// SignWith signs claims with another key (for wrongly signed tokens).
func SignWith(t testing.TB, key *rsa.PrivateKey, keyID string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", keyID))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
