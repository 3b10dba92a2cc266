package server

import (
	"crypto"
	"fmt"
	"time"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/satoken"
)

// ServiceAccountsConfig configures service-account tokens, named as
// kube-apiserver's flags. The zero value signs with <data-dir>/pki/sa.key as
// https://kubernetes.default.svc.cluster.local for that audience.
type ServiceAccountsConfig struct {
	// KeyFiles verify tokens (--service-account-key-file); the signing
	// key's public half always does.
	KeyFiles []string
	// SigningKeyFile signs tokens (--service-account-signing-key-file;
	// default pki/sa.key, created at the first start).
	SigningKeyFile string
	// Issuers (--service-account-issuer): the first signs, all verify.
	Issuers []string
	// APIAudiences (--api-audiences; default the first issuer).
	APIAudiences []string
	// JWKSURI (--service-account-jwks-uri) for the discovery document.
	JWKSURI string
	// MaxExpiration (--service-account-max-token-expiration; 0: none).
	MaxExpiration time.Duration
	// NoExtendExpiration turns off upstream's
	// --service-account-extend-token-expiration (on by default).
	NoExtendExpiration bool
}

// apiServiceAccounts turns the flags into the API server's config.
func apiServiceAccounts(c ServiceAccountsConfig, bundle *pki.Bundle) (*apiserver.ServiceAccountConfig, error) {
	key := bundle.ServiceAccountKey
	if c.SigningKeyFile != "" {
		k, err := satoken.LoadPrivateKey(c.SigningKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--service-account-signing-key-file: %w", err)
		}
		key = k
	}
	var pubs []crypto.PublicKey
	if len(c.KeyFiles) > 0 {
		keys, err := satoken.LoadPublicKeys(c.KeyFiles...)
		if err != nil {
			return nil, fmt.Errorf("--service-account-key-file: %w", err)
		}
		pubs = keys
	}
	issuers := c.Issuers
	if len(issuers) == 0 {
		issuers = []string{satoken.DefaultIssuer}
	}
	return &apiserver.ServiceAccountConfig{
		SigningKey: key, PublicKeys: pubs, Issuers: issuers, Audiences: c.APIAudiences,
		JWKSURI: c.JWKSURI, MaxExpiration: c.MaxExpiration, ExtendExpiration: !c.NoExtendExpiration,
	}, nil
}
