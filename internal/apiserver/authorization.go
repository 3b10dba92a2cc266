package apiserver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	authzconfigload "k8s.io/apiserver/pkg/apis/apiserver/load"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/abac"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/bootstrappolicy"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/node"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/rbac"
	"github.com/skiff-sh/skiff/internal/apiserver/authz/webhook"
)

// Authorization modes (--authorization-mode), as upstream names them.
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeNode        = "Node"
	ModeRBAC        = "RBAC"
	ModeABAC        = "ABAC"
	ModeWebhook     = "Webhook"
)

var knownModes = []string{ModeAlwaysAllow, ModeAlwaysDeny, ModeABAC, ModeWebhook, ModeRBAC, ModeNode}

// DefaultAuthorizationModes is upstream's recommended (and Skiff's
// server) setting.
var DefaultAuthorizationModes = []string{ModeNode, ModeRBAC}

// Upstream's --authorization-webhook-* defaults.
const (
	DefaultWebhookVersion              = "v1beta1"
	DefaultWebhookCacheAuthorizedTTL   = 5 * time.Minute
	DefaultWebhookCacheUnauthorizedTTL = 30 * time.Second
	defaultWebhookName                 = "webhook"
	defaultWebhookTimeout              = 30 * time.Second
)

// AuthorizationOptions are kube-apiserver's authorization flags beside
// --authorization-mode (Config.AuthorizationModes).
type AuthorizationOptions struct {
	// PolicyFile is the ABAC mode's policy (--authorization-policy-file).
	PolicyFile string
	// WebhookConfigFile is the Webhook mode's kubeconfig
	// (--authorization-webhook-config-file); WebhookVersion the
	// SubjectAccessReview version it speaks (v1 or v1beta1; empty:
	// v1beta1, upstream's default); the TTLs cache its answers (0: not
	// cached; the flags default to 5 min and 30 s).
	WebhookConfigFile           string
	WebhookVersion              string
	WebhookCacheAuthorizedTTL   time.Duration
	WebhookCacheUnauthorizedTTL time.Duration
	// WebhookRetryBackoff retries failed webhook calls (nil: upstream's
	// 500 ms ×1.5, five tries; tests shorten it).
	WebhookRetryBackoff *wait.Backoff
	// ConfigFile is a structured AuthorizationConfiguration
	// (apiserver.config.k8s.io/v1, --authorization-config) used instead of
	// the modes: authorizers Node, RBAC, Webhook (several, each with its
	// connection, TTLs, timeout, failurePolicy and matchConditions),
	// AlwaysAllow, AlwaysDeny. It is read at start (upstream reloads it).
	ConfigFile string
}

// ValidateAuthorizationModes checks a mode list: known modes, each once,
// at least one.
func ValidateAuthorizationModes(modes []string) error {
	if len(modes) == 0 {
		return fmt.Errorf("at least one authorization mode must be given")
	}
	seen := map[string]bool{}
	for _, m := range modes {
		if !contains(knownModes, m) {
			return fmt.Errorf("unknown authorization mode %q (want one of %s)", m, strings.Join(knownModes, ", "))
		}
		if seen[m] {
			return fmt.Errorf("authorization mode %q given twice", m)
		}
		seen[m] = true
	}
	return nil
}

// ValidateAuthorization checks the modes and options together, as
// upstream: ABAC needs a policy file and Webhook a kubeconfig, neither
// file goes without its mode, and a structured configuration excludes
// both the modes and the files.
func ValidateAuthorization(modes []string, o AuthorizationOptions) error {
	if o.ConfigFile != "" {
		if len(modes) > 0 || o.PolicyFile != "" || o.WebhookConfigFile != "" {
			return errors.New("--authorization-config can not be specified when --authorization-mode, --authorization-policy-file or --authorization-webhook-* flags are defined")
		}
		_, err := LoadAuthorizationConfig(o.ConfigFile)
		return err
	}
	if err := ValidateAuthorizationModes(modes); err != nil {
		return err
	}
	var errs []error
	if contains(modes, ModeABAC) && o.PolicyFile == "" {
		errs = append(errs, errors.New("authorization-mode ABAC's authorization policy file not passed"))
	}
	if contains(modes, ModeWebhook) && o.WebhookConfigFile == "" {
		errs = append(errs, errors.New("authorization-mode Webhook's authorization config file not passed"))
	}
	if o.PolicyFile != "" && !contains(modes, ModeABAC) {
		errs = append(errs, errors.New("cannot specify --authorization-policy-file without mode ABAC"))
	}
	if o.WebhookConfigFile != "" && !contains(modes, ModeWebhook) {
		errs = append(errs, errors.New("cannot specify --authorization-webhook-config-file without mode Webhook"))
	}
	if v := o.WebhookVersion; v != "" && v != "v1" && v != "v1beta1" {
		errs = append(errs, fmt.Errorf("--authorization-webhook-version %q: want v1 or v1beta1", v))
	}
	return errors.Join(errs...)
}

// LoadAuthorizationConfig reads and validates an AuthorizationConfiguration
// file with upstream's loader and validation (types Node, RBAC, Webhook,
// AlwaysAllow, AlwaysDeny; only Webhook may repeat; names unique;
// matchConditions compiled).
func LoadAuthorizationConfig(path string) (*apiserverapi.AuthorizationConfiguration, error) {
	c, err := authzconfigload.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--authorization-config: %w", err)
	}
	known := sets.New(ModeNode, ModeRBAC, ModeWebhook, ModeAlwaysAllow, ModeAlwaysDeny)
	if errs := apiservervalidation.ValidateAuthorizationConfiguration(authorizationcel.NewDefaultCompiler(), field.NewPath("authorizers"), c, known, sets.New(ModeWebhook)); len(errs) > 0 {
		return nil, fmt.Errorf("--authorization-config %s: %w", path, errs.ToAggregate())
	}
	for _, a := range c.Authorizers {
		if a.Webhook != nil && a.Webhook.ConnectionInfo.Type != apiserverapi.AuthorizationWebhookConnectionInfoTypeKubeConfigFile {
			return nil, fmt.Errorf("--authorization-config %s: authorizer %q: connectionInfo type %q is not supported (the API server does not run in a pod); use KubeConfigFile", path, a.Name, a.Webhook.ConnectionInfo.Type)
		}
	}
	return c, nil
}

// authorizerEntries is the list of authorizers cfg asks for: the
// structured configuration's, or one per mode (the webhook from the
// --authorization-webhook-* options, as upstream converts them).
func authorizerEntries(cfg Config) ([]apiserverapi.AuthorizerConfiguration, error) {
	o := cfg.Authorization
	modes := cfg.AuthorizationModes
	if o.ConfigFile == "" && len(modes) == 0 {
		modes = []string{ModeAlwaysAllow}
	}
	if err := ValidateAuthorization(modes, o); err != nil {
		return nil, err
	}
	if o.ConfigFile != "" {
		c, err := LoadAuthorizationConfig(o.ConfigFile)
		if err != nil {
			return nil, err
		}
		return c.Authorizers, nil
	}
	var entries []apiserverapi.AuthorizerConfiguration
	for _, m := range modes {
		e := apiserverapi.AuthorizerConfiguration{Type: apiserverapi.AuthorizerType(m), Name: strings.ToLower(m)}
		if m == ModeWebhook {
			version := o.WebhookVersion
			if version == "" {
				version = DefaultWebhookVersion
			}
			file := o.WebhookConfigFile
			e.Name = defaultWebhookName
			e.Webhook = &apiserverapi.WebhookConfiguration{
				AuthorizedTTL: metav1.Duration{Duration: o.WebhookCacheAuthorizedTTL}, CacheAuthorizedRequests: o.WebhookCacheAuthorizedTTL != 0,
				UnauthorizedTTL: metav1.Duration{Duration: o.WebhookCacheUnauthorizedTTL}, CacheUnauthorizedRequests: o.WebhookCacheUnauthorizedTTL != 0,
				Timeout: metav1.Duration{Duration: defaultWebhookTimeout}, FailurePolicy: apiserverapi.FailurePolicyNoOpinion,
				SubjectAccessReviewVersion: version, MatchConditionSubjectAccessReviewVersion: "v1",
				ConnectionInfo: apiserverapi.WebhookConnectionInfo{Type: apiserverapi.AuthorizationWebhookConnectionInfoTypeKubeConfigFile, KubeConfigFile: &file},
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// newAuthorizer builds the authorizer of cfg: cfg.Authorizer when set,
// else the union of the configured authorizers (default AlwaysAllow)
// behind the system:masters superuser check, reading policy from r.
func newAuthorizer(cfg Config, r reader) (authz.Authorizer, error) {
	if cfg.Authorizer != nil {
		return cfg.Authorizer, nil
	}
	entries, err := authorizerEntries(cfg)
	if err != nil {
		return nil, err
	}
	auths := []authz.Authorizer{authz.Superuser(authn.SystemMasters)}
	var compiler authorizationcel.Compiler
	for _, e := range entries {
		switch string(e.Type) {
		case ModeAlwaysAllow:
			auths = append(auths, authz.AlwaysAllowAuthenticated)
		case ModeAlwaysDeny:
			auths = append(auths, authz.AlwaysDeny)
		case ModeNode:
			auths = append(auths, node.New(r, bootstrappolicy.NodeRules()))
		case ModeRBAC:
			auths = append(auths, rbac.New(rbac.ReaderSource(r)))
		case ModeABAC:
			a, err := abac.Load(cfg.Authorization.PolicyFile)
			if err != nil {
				return nil, fmt.Errorf("--authorization-policy-file: %w", err)
			}
			auths = append(auths, a)
		case ModeWebhook:
			if compiler == nil {
				compiler = authorizationcel.NewDefaultCompiler()
			}
			w, err := webhook.New(e.Name, e.Webhook, compiler, cfg.Authorization.WebhookRetryBackoff)
			if err != nil {
				return nil, err
			}
			auths = append(auths, w)
		default:
			return nil, fmt.Errorf("unknown authorization mode %q", e.Type)
		}
	}
	return authz.Union(auths...), nil
}

// ParseAuthorizationModes splits a comma-separated --authorization-mode.
func ParseAuthorizationModes(s string) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			modes = append(modes, m)
		}
	}
	return modes, ValidateAuthorizationModes(modes)
}
