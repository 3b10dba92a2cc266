package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateAuthorization(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := write("webhook.kubeconfig", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n")
	good := write("good.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: Webhook
  name: remote
  webhook:
    timeout: 3s
    authorizedTTL: 1m
    unauthorizedTTL: 10s
    cacheAuthorizedRequests: true
    cacheUnauthorizedRequests: true
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: `+kubeconfig+`
    matchConditions:
    - expression: has(request.resourceAttributes)
- type: RBAC
  name: rbac
`)
	twice := write("twice.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- {type: RBAC, name: a}\n- {type: RBAC, name: b}\n")
	abacType := write("abac.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers:\n- {type: ABAC, name: a}\n")
	inCluster := write("incluster.yaml", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: w
  webhook: {timeout: 3s, subjectAccessReviewVersion: v1, matchConditionSubjectAccessReviewVersion: v1, failurePolicy: NoOpinion, connectionInfo: {type: InClusterConfig}}
`)
	badCEL := strings.Replace(mustRead(t, good), "has(request.resourceAttributes)", "request.nope(", 1)
	badCELFile := write("badcel.yaml", badCEL)

	tests := []struct {
		name    string
		modes   []string
		o       AuthorizationOptions
		wantErr string
	}{
		{name: "default", modes: DefaultAuthorizationModes},
		{name: "every mode", modes: []string{ModeNode, ModeRBAC, ModeABAC, ModeWebhook, ModeAlwaysAllow, ModeAlwaysDeny}, o: AuthorizationOptions{PolicyFile: "p", WebhookConfigFile: "k"}},
		{name: "none", wantErr: "at least one authorization mode"},
		{name: "unknown", modes: []string{"Magic"}, wantErr: `unknown authorization mode "Magic"`},
		{name: "twice", modes: []string{ModeRBAC, ModeRBAC}, wantErr: `authorization mode "RBAC" given twice`},
		{name: "ABAC without file", modes: []string{ModeABAC}, wantErr: "authorization-mode ABAC's authorization policy file not passed"},
		{name: "Webhook without file", modes: []string{ModeWebhook}, wantErr: "authorization-mode Webhook's authorization config file not passed"},
		{name: "policy file without ABAC", modes: []string{ModeRBAC}, o: AuthorizationOptions{PolicyFile: "p"}, wantErr: "cannot specify --authorization-policy-file without mode ABAC"},
		{name: "webhook file without Webhook", modes: []string{ModeRBAC}, o: AuthorizationOptions{WebhookConfigFile: "k"}, wantErr: "cannot specify --authorization-webhook-config-file without mode Webhook"},
		{name: "bad webhook version", modes: []string{ModeWebhook}, o: AuthorizationOptions{WebhookConfigFile: "k", WebhookVersion: "v2"}, wantErr: `--authorization-webhook-version "v2"`},
		{name: "config", o: AuthorizationOptions{ConfigFile: good}},
		{name: "config and modes", modes: []string{ModeRBAC}, o: AuthorizationOptions{ConfigFile: good}, wantErr: "--authorization-config can not be specified when --authorization-mode"},
		{name: "config repeats RBAC", o: AuthorizationOptions{ConfigFile: twice}, wantErr: `authorizers[1].type: Duplicate value: "RBAC"`},
		{name: "config with ABAC", o: AuthorizationOptions{ConfigFile: abacType}, wantErr: `Unsupported value: "ABAC"`},
		{name: "config in cluster", o: AuthorizationOptions{ConfigFile: inCluster}, wantErr: `connectionInfo type "InClusterConfig" is not supported`},
		{name: "config bad CEL", o: AuthorizationOptions{ConfigFile: badCELFile}, wantErr: "matchConditions[0].expression"},
		{name: "config missing", o: AuthorizationOptions{ConfigFile: filepath.Join(dir, "nope")}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		err := ValidateAuthorization(tt.modes, tt.o)
		if tt.wantErr == "" && err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
		}
	}

	// The structured file gives the authorizers in order, and the modes
	// their upstream names (the webhook "webhook", with the flags' TTLs).
	entries, err := authorizerEntries(Config{Authorization: AuthorizationOptions{ConfigFile: good}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, string(e.Type)+"/"+e.Name)
	}
	if diff := cmp.Diff([]string{"Node/node", "Webhook/remote", "RBAC/rbac"}, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	entries, err = authorizerEntries(Config{AuthorizationModes: []string{ModeNode, ModeWebhook}, Authorization: AuthorizationOptions{WebhookConfigFile: kubeconfig, WebhookCacheAuthorizedTTL: DefaultWebhookCacheAuthorizedTTL}})
	if err != nil {
		t.Fatal(err)
	}
	w := entries[1].Webhook
	if entries[0].Name != "node" || entries[1].Name != "webhook" || w == nil || w.SubjectAccessReviewVersion != "v1beta1" ||
		!w.CacheAuthorizedRequests || w.CacheUnauthorizedRequests || w.AuthorizedTTL.Duration != DefaultWebhookCacheAuthorizedTTL || w.FailurePolicy != "NoOpinion" {
		t.Errorf("entries from modes: %+v %+v", entries, w)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
