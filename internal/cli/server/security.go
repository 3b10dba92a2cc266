package server

import (
	"fmt"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
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

	AuditPolicyFile string
	AuditLog        audit.LogOptions

	TLSMinVersion   string
	TLSCipherSuites []string
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
	fs.StringVar(&f.AuditPolicyFile, "audit-policy-file", f.AuditPolicyFile, "audit.k8s.io/v1 Policy file: which requests are audited, at which level (None, Metadata, Request, RequestResponse) and stages; empty: no audit log")
	fs.StringVar(&f.AuditLog.Path, "audit-log-path", f.AuditLog.Path, "file the audit events are written to as JSON lines ('-' for stdout); with --audit-policy-file")
	fs.IntVar(&f.AuditLog.MaxSize, "audit-log-maxsize", f.AuditLog.MaxSize, "size in megabytes at which the audit log is rotated (0: never)")
	fs.IntVar(&f.AuditLog.MaxBackups, "audit-log-maxbackup", f.AuditLog.MaxBackups, "rotated audit log files kept (0: all)")
	fs.IntVar(&f.AuditLog.MaxAge, "audit-log-maxage", f.AuditLog.MaxAge, "days rotated audit log files are kept (0: forever)")
	fs.BoolVar(&f.AuditLog.Compress, "audit-log-compress", f.AuditLog.Compress, "gzip rotated audit log files")
	fs.StringVar(&f.AuditLog.Webhook.ConfigFile, "audit-webhook-config-file", f.AuditLog.Webhook.ConfigFile, "kubeconfig naming a service the audit events are POSTed to (audit.k8s.io/v1 EventList); with --audit-policy-file, beside or instead of --audit-log-path")
	fs.StringVar(&f.AuditLog.Webhook.Mode, "audit-webhook-mode", "batch", "batch (buffered, sent from the background; a full buffer drops events) or blocking (each event sent before the request goes on)")
	fs.IntVar(&f.AuditLog.Webhook.BatchBufferSize, "audit-webhook-batch-buffer-size", audit.DefaultWebhookBatchBufferSize, "events buffered before they are dropped, in batch mode")
	fs.IntVar(&f.AuditLog.Webhook.BatchMaxSize, "audit-webhook-batch-max-size", audit.DefaultWebhookBatchMaxSize, "most events in one batch")
	fs.DurationVar(&f.AuditLog.Webhook.BatchMaxWait, "audit-webhook-batch-max-wait", audit.DefaultWebhookBatchMaxWait, "longest wait before a batch that is not full is sent")
	fs.DurationVar(&f.AuditLog.Webhook.InitialBackoff, "audit-webhook-initial-backoff", audit.DefaultWebhookInitialBackoff, "wait before a failed send is retried (then x1.5, five tries)")
	fs.StringVar(&f.TLSMinVersion, "tls-min-version", f.TLSMinVersion, "lowest TLS version the API server accepts: VersionTLS12 or VersionTLS13 (VersionTLS10/11 are accepted but insecure); empty: VersionTLS12")
	fs.StringSliceVar(&f.TLSCipherSuites, "tls-cipher-suites", nil, "cipher suites of the API server for TLS 1.2, upstream's names (e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256); empty: Go's defaults. TLS 1.3 suites are not configurable")
	fs.StringSliceVar(&f.OIDCSigningAlgs, "oidc-signing-algs", []string{"RS256"}, "JOSE signing algorithms accepted in OIDC tokens")
}

// config validates the flags.
func (f SecurityFlags) config() (server.SecurityConfig, error) {
	c := server.SecurityConfig{TokenAuthFile: f.TokenAuthFile, EncryptionProviderConfig: f.EncryptionProviderConfig,
		AuditPolicyFile: f.AuditPolicyFile, AuditLog: f.AuditLog}
	if c.AuditPolicyFile != "" {
		if _, err := audit.LoadPolicy(c.AuditPolicyFile); err != nil {
			return c, fmt.Errorf("--audit-policy-file: %w", err)
		}
	}
	if err := f.AuditLog.Webhook.Validate(); err != nil {
		return c, fmt.Errorf("--audit-webhook-config-file: %w", err)
	}
	var err error
	if f.TLSMinVersion != "" { // empty: the API server's default, TLS 1.2
		if c.TLSMinVersion, err = cliflag.TLSVersion(f.TLSMinVersion); err != nil {
			return c, fmt.Errorf("--tls-min-version: %w", err)
		}
	}
	if c.TLSCipherSuites, err = cliflag.TLSCipherSuites(f.TLSCipherSuites); err != nil {
		return c, fmt.Errorf("--tls-cipher-suites: %w", err)
	}
	for name, v := range map[string]int{"--audit-log-maxsize": f.AuditLog.MaxSize, "--audit-log-maxbackup": f.AuditLog.MaxBackups, "--audit-log-maxage": f.AuditLog.MaxAge} {
		if v < 0 {
			return c, fmt.Errorf("%s must not be negative", name)
		}
	}
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
