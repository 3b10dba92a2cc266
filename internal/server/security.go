package server

import (
	"fmt"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// SecurityConfig is the API server's authentication beyond client
// certificates and bootstrap tokens (static tokens, OIDC).
type SecurityConfig struct {
	// TokenAuthFile is upstream's --token-auth-file (CSV:
	// token,user,uid,"group1,group2"); empty: none.
	TokenAuthFile string
	// OIDC, when set, authenticates the ID tokens of one issuer.
	OIDC *authn.OIDCOptions
}

// newAPIServer builds the API server with the security options applied to
// cfg: the token authenticators join cfg.Authenticator.
func newAPIServer(sec SecurityConfig, dataDir string, cfg apiserver.Config) (*apiserver.Server, error) {
	var auths []authn.Authenticator
	if cfg.Authenticator != nil {
		auths = append(auths, cfg.Authenticator)
	}
	if sec.TokenAuthFile != "" {
		tokens, err := authn.ReadTokenFile(sec.TokenAuthFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		auths = append(auths, tokens)
	}
	if sec.OIDC != nil {
		o, err := authn.NewOIDC(*sec.OIDC)
		if err != nil {
			return nil, err
		}
		auths = append(auths, o)
	}
	if len(auths) > 0 {
		cfg.Authenticator = authn.Union(auths...)
	}
	return apiserver.New(cfg)
}
