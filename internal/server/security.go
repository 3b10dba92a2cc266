package server

import (
	"fmt"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/storage"
)

// SecurityConfig is the API server's authentication beyond client
// certificates and bootstrap tokens (static tokens, OIDC) and its
// encryption at rest.
type SecurityConfig struct {
	// TokenAuthFile is upstream's --token-auth-file (CSV:
	// token,user,uid,"group1,group2"); empty: none.
	TokenAuthFile string
	// OIDC, when set, authenticates the ID tokens of one issuer.
	OIDC *authn.OIDCOptions
	// EncryptionProviderConfig is upstream's --encryption-provider-config
	// (an EncryptionConfiguration file); empty: <data-dir>/encryption-config.yaml,
	// written at the first start (Secrets with aescbc and a new key).
	EncryptionProviderConfig string
	// AuditPolicyFile is upstream's --audit-policy-file (audit.k8s.io/v1
	// Policy); with AuditLog.Path set, requests are audited.
	AuditPolicyFile string
	AuditLog        audit.LogOptions
	// TLSMinVersion and TLSCipherSuites are the API server's
	// (--tls-min-version, --tls-cipher-suites; zero: TLS 1.2, Go's suites).
	TLSMinVersion   uint16
	TLSCipherSuites []uint16
}

// newAPIServer builds the API server with the security options applied to
// cfg: the token authenticators join cfg.Authenticator, and the
// encryption configuration is loaded (or written, the first time).
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
	encPath := sec.EncryptionProviderConfig
	if encPath == "" {
		p, err := storage.EnsureDefaultEncryptionConfig(dataDir)
		if err != nil {
			return nil, fmt.Errorf("encryption at rest: %w", err)
		}
		encPath = p
	}
	enc, err := storage.LoadEncryptionConfig(encPath)
	if err != nil {
		return nil, fmt.Errorf("--encryption-provider-config: %w", err)
	}
	cfg.Encryption = enc
	cfg.TLSMinVersion, cfg.TLSCipherSuites = sec.TLSMinVersion, sec.TLSCipherSuites
	if sec.AuditPolicyFile != "" && (sec.AuditLog.Path != "" || sec.AuditLog.Webhook.ConfigFile != "") {
		policy, err := audit.LoadPolicy(sec.AuditPolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--audit-policy-file: %w", err)
		}
		if cfg.Audit, err = audit.New(policy, sec.AuditLog, nil); err != nil {
			return nil, fmt.Errorf("--audit-log-path: %w", err)
		}
	}
	return apiserver.New(cfg)
}
