package server

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// AuthorizationFlags are kube-apiserver's authorization flags beside
// --authorization-mode.
type AuthorizationFlags struct {
	PolicyFile                  string
	WebhookConfigFile           string
	WebhookVersion              string
	WebhookCacheAuthorizedTTL   time.Duration
	WebhookCacheUnauthorizedTTL time.Duration
	ConfigFile                  string
}

func defaultAuthorizationFlags() AuthorizationFlags {
	return AuthorizationFlags{
		WebhookVersion:              apiserver.DefaultWebhookVersion,
		WebhookCacheAuthorizedTTL:   apiserver.DefaultWebhookCacheAuthorizedTTL,
		WebhookCacheUnauthorizedTTL: apiserver.DefaultWebhookCacheUnauthorizedTTL,
	}
}

func (f *AuthorizationFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.PolicyFile, "authorization-policy-file", f.PolicyFile, "ABAC policy file (one JSON Policy a line, abac.authorization.kubernetes.io/v1beta1 or unversioned), with --authorization-mode=ABAC")
	fs.StringVar(&f.WebhookConfigFile, "authorization-webhook-config-file", f.WebhookConfigFile, "kubeconfig naming the remote authorizer that --authorization-mode=Webhook sends SubjectAccessReviews to")
	fs.StringVar(&f.WebhookVersion, "authorization-webhook-version", f.WebhookVersion, "SubjectAccessReview version the authorization webhook speaks: v1 or v1beta1")
	fs.DurationVar(&f.WebhookCacheAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", f.WebhookCacheAuthorizedTTL, "how long the authorization webhook's 'authorized' answers are cached (0: not cached)")
	fs.DurationVar(&f.WebhookCacheUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", f.WebhookCacheUnauthorizedTTL, "how long the authorization webhook's 'unauthorized' answers are cached (0: not cached)")
	fs.StringVar(&f.ConfigFile, "authorization-config", f.ConfigFile, "AuthorizationConfiguration file (apiserver.config.k8s.io/v1): the authorizers in order (Node, RBAC, Webhook with its kubeconfig, TTLs, timeout, failurePolicy and matchConditions, AlwaysAllow, AlwaysDeny); excludes --authorization-mode and the --authorization-webhook-* and --authorization-policy-file flags; read at start")
}

// options validates the flags with the modes (the comma-separated
// --authorization-mode): with --authorization-config the modes must be the
// default or empty, and are dropped.
func (f AuthorizationFlags) options(mode string) ([]string, apiserver.AuthorizationOptions, error) {
	o := apiserver.AuthorizationOptions{
		PolicyFile: f.PolicyFile, WebhookConfigFile: f.WebhookConfigFile, WebhookVersion: f.WebhookVersion,
		WebhookCacheAuthorizedTTL: f.WebhookCacheAuthorizedTTL, WebhookCacheUnauthorizedTTL: f.WebhookCacheUnauthorizedTTL,
		ConfigFile: f.ConfigFile,
	}
	var modes []string
	if f.ConfigFile == "" || (mode != "" && mode != strings.Join(apiserver.DefaultAuthorizationModes, ",")) {
		var err error
		if modes, err = apiserver.ParseAuthorizationModes(mode); err != nil {
			return nil, o, err
		}
	}
	return modes, o, apiserver.ValidateAuthorization(modes, o)
}
