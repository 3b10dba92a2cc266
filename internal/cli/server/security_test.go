package server

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
)

func TestSecurityFlags(t *testing.T) {
	ok, err := SecurityFlags{TLSMinVersion: "VersionTLS13", TLSCipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
		OIDCIssuerURL: "https://issuer.example", OIDCClientID: "skiff", OIDCUsernamePrefix: "-"}.config()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, ok.TLSCipherSuites); diff != "" || ok.TLSMinVersion != tls.VersionTLS13 {
		t.Errorf("tls: min %x, suites diff %s", ok.TLSMinVersion, diff)
	}
	if ok.OIDC == nil || ok.OIDC.UsernamePrefix == nil || *ok.OIDC.UsernamePrefix != "-" {
		t.Errorf("oidc options = %+v", ok.OIDC)
	}
	for _, tc := range []struct {
		name  string
		flags SecurityFlags
		want  string
	}{
		{"unknown TLS version", SecurityFlags{TLSMinVersion: "VersionTLS99"}, `--tls-min-version: unknown tls version "VersionTLS99"`},
		{"unknown suite", SecurityFlags{TLSCipherSuites: []string{"TLS_NOPE"}}, "--tls-cipher-suites: Cipher suite TLS_NOPE not supported or doesn't exist"},
		{"http issuer", SecurityFlags{OIDCIssuerURL: "http://issuer", OIDCClientID: "c"}, "must use https scheme"},
		{"client id alone", SecurityFlags{OIDCClientID: "c"}, "--oidc-issuer-url"},
		{"negative audit size", SecurityFlags{AuditLog: auditLogSize(-1)}, "--audit-log-maxsize must not be negative"},
		{"missing encryption config", SecurityFlags{EncryptionProviderConfig: "/nonexistent/enc.yaml"}, "--encryption-provider-config: open /nonexistent/enc.yaml"},
		{"missing audit policy", SecurityFlags{AuditPolicyFile: "/nonexistent/policy.yaml"}, "--audit-policy-file: open /nonexistent/policy.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.flags.config()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func auditLogSize(mb int) (o audit.LogOptions) {
	o.MaxSize = mb
	return o
}
