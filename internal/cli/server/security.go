package server

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/storage"
)

// SecurityFlags are the API server's authentication flags beyond client
// certificates, named as kube-apiserver's.
type SecurityFlags struct {
	TokenAuthFile string

	OIDCIssuerURL      string
	OIDCClientID       string
	OIDCCAFile         string
	OIDCUsernameClaim  string
	OIDCUsernamePrefix string
	OIDCGroupsClaim    string
	OIDCGroupsPrefix   string
	OIDCRequiredClaims map[string]string
	OIDCSigningAlgs    []string

	EncryptionProviderConfig string
}

func (f *SecurityFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.TokenAuthFile, "token-auth-file", f.TokenAuthFile, `file of static bearer tokens, one a line in CSV: token,user,uid,"group1,group2" (read at start)`)
	fs.StringVar(&f.OIDCIssuerURL, "oidc-issuer-url", f.OIDCIssuerURL, "https URL of an OpenID Connect issuer whose ID tokens authenticate users (its discovery document names the JWKS); empty: no OIDC")
	fs.StringVar(&f.OIDCClientID, "oidc-client-id", f.OIDCClientID, "client ID that must be in every OIDC token's audience (required with --oidc-issuer-url)")
	fs.StringVar(&f.OIDCCAFile, "oidc-ca-file", f.OIDCCAFile, "PEM CA bundle that verifies the OIDC issuer's certificate (default: the host's roots)")
	fs.StringVar(&f.OIDCUsernameClaim, "oidc-username-claim", "sub", "OIDC claim used as the user name")
	fs.StringVar(&f.OIDCUsernamePrefix, "oidc-username-prefix", f.OIDCUsernamePrefix, "prefix of OIDC user names (default '<issuer-url>#' unless the claim is email; '-' for none)")
	fs.StringVar(&f.OIDCGroupsClaim, "oidc-groups-claim", f.OIDCGroupsClaim, "OIDC claim holding the user's groups (a string or a list of strings); empty: none")
	fs.StringVar(&f.OIDCGroupsPrefix, "oidc-groups-prefix", f.OIDCGroupsPrefix, "prefix of every OIDC group")
	fs.StringToStringVar(&f.OIDCRequiredClaims, "oidc-required-claim", f.OIDCRequiredClaims, "key=value claims every OIDC token must hold with that value; repeatable")
	fs.StringVar(&f.EncryptionProviderConfig, "encryption-provider-config", f.EncryptionProviderConfig, "EncryptionConfiguration file (apiserver.config.k8s.io/v1: aescbc, aesgcm, secretbox, identity) saying which resources are encrypted in etcd and with which keys, the first encrypting; empty: <data-dir>/encryption-config.yaml, created at the first start with a new aescbc key for Secrets")
	fs.StringSliceVar(&f.OIDCSigningAlgs, "oidc-signing-algs", []string{"RS256"}, "JOSE signing algorithms accepted in OIDC tokens")
}

// config validates the flags.
func (f SecurityFlags) config() (server.SecurityConfig, error) {
	c := server.SecurityConfig{TokenAuthFile: f.TokenAuthFile, EncryptionProviderConfig: f.EncryptionProviderConfig}
	if c.EncryptionProviderConfig != "" {
		if _, err := storage.LoadEncryptionConfig(c.EncryptionProviderConfig); err != nil {
			return c, fmt.Errorf("--encryption-provider-config: %w", err)
		}
	}
	if f.OIDCIssuerURL != "" || f.OIDCClientID != "" {
		o := &authn.OIDCOptions{
			IssuerURL: f.OIDCIssuerURL, ClientID: f.OIDCClientID, CAFile: f.OIDCCAFile,
			UsernameClaim: f.OIDCUsernameClaim, GroupsClaim: f.OIDCGroupsClaim, GroupsPrefix: f.OIDCGroupsPrefix,
			RequiredClaims: f.OIDCRequiredClaims, SigningAlgs: f.OIDCSigningAlgs,
		}
		if f.OIDCUsernamePrefix != "" {
			p := f.OIDCUsernamePrefix
			o.UsernamePrefix = &p
		}
		if err := o.Validate(); err != nil {
			return c, err
		}
		c.OIDC = o
	}
	return c, nil
}
