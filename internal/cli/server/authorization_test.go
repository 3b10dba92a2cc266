package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

func TestAuthorizationFlags(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "authz.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- {type: Node, name: node}\n- {type: RBAC, name: rbac}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		wantModes []string
		wantOpts  apiserver.AuthorizationOptions
		wantErr   string
	}{
		{name: "defaults", wantModes: []string{"Node", "RBAC"}, wantOpts: apiserver.AuthorizationOptions{WebhookVersion: "v1beta1", WebhookCacheAuthorizedTTL: 5 * time.Minute, WebhookCacheUnauthorizedTTL: 30 * time.Second}},
		{name: "abac and webhook", args: []string{"--authorization-mode=RBAC,ABAC,Webhook", "--authorization-policy-file=/p", "--authorization-webhook-config-file=/k", "--authorization-webhook-version=v1", "--authorization-webhook-cache-unauthorized-ttl=0"},
			wantModes: []string{"RBAC", "ABAC", "Webhook"}, wantOpts: apiserver.AuthorizationOptions{PolicyFile: "/p", WebhookConfigFile: "/k", WebhookVersion: "v1", WebhookCacheAuthorizedTTL: 5 * time.Minute}},
		{name: "structured config", args: []string{"--authorization-config=" + config},
			wantOpts: apiserver.AuthorizationOptions{ConfigFile: config, WebhookVersion: "v1beta1", WebhookCacheAuthorizedTTL: 5 * time.Minute, WebhookCacheUnauthorizedTTL: 30 * time.Second}},
		{name: "structured config and modes", args: []string{"--authorization-config=" + config, "--authorization-mode=RBAC"}, wantErr: "--authorization-config can not be specified"},
		{name: "ABAC without a file", args: []string{"--authorization-mode=ABAC"}, wantErr: "ABAC's authorization policy file not passed"},
		{name: "unknown mode", args: []string{"--authorization-mode=Magic"}, wantErr: `unknown authorization mode "Magic"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand()
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			mode, _ := cmd.Flags().GetString("authorization-mode")
			f := DefaultFlags().Authorization
			get := func(name string) string { v, _ := cmd.Flags().GetString(name); return v }
			dur := func(name string) time.Duration { v, _ := cmd.Flags().GetDuration(name); return v }
			f.PolicyFile, f.WebhookConfigFile, f.WebhookVersion, f.ConfigFile = get("authorization-policy-file"), get("authorization-webhook-config-file"), get("authorization-webhook-version"), get("authorization-config")
			f.WebhookCacheAuthorizedTTL, f.WebhookCacheUnauthorizedTTL = dur("authorization-webhook-cache-authorized-ttl"), dur("authorization-webhook-cache-unauthorized-ttl")
			modes, opts, err := f.options(mode)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantModes, modes); diff != "" {
				t.Errorf("modes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOpts, opts); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}
