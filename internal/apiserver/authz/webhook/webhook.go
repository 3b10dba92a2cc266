// Package webhook is the Webhook authorization mode: each request is sent
// as a SubjectAccessReview (v1, or v1beta1) to a remote service named by a
// kubeconfig file, and its answer (allowed, denied, or neither) decides.
// Answers are cached (authorized and unauthorized TTLs), failed calls are
// retried with upstream's backoff and then decide as the failurePolicy
// says (NoOpinion or Deny), and CEL matchConditions may leave requests
// out. The work is k8s.io/apiserver's webhook authorizer; this package
// builds it from an apiserver.config.k8s.io WebhookConfiguration and puts
// it behind Skiff's authz.Authorizer.
package webhook

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/pkg/util/webhook"
	upstream "k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// DefaultRetryBackoff is upstream's (--authorization-webhook-* have no
// flag for it): 500 ms, times 1.5, five tries.
var DefaultRetryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Authorizer asks a webhook.
type Authorizer struct {
	name string
	w    *upstream.WebhookAuthorizer
}

// New builds the authorizer named name from a validated webhook
// configuration (connectionInfo KubeConfigFile; InClusterConfig is
// refused: the API server is not in a pod). backoff nil is
// DefaultRetryBackoff.
func New(name string, c *apiserverapi.WebhookConfiguration, compiler authorizationcel.Compiler, backoff *wait.Backoff) (*Authorizer, error) {
	if c.ConnectionInfo.Type != apiserverapi.AuthorizationWebhookConnectionInfoTypeKubeConfigFile || c.ConnectionInfo.KubeConfigFile == nil {
		return nil, fmt.Errorf("authorization webhook %q: only connectionInfo type KubeConfigFile is supported", name)
	}
	cfg, err := webhook.LoadKubeconfig(*c.ConnectionInfo.KubeConfigFile, nil)
	if err != nil {
		return nil, fmt.Errorf("authorization webhook %q: %w", name, err)
	}
	return NewForConfig(name, cfg, c, compiler, backoff)
}

// NewForConfig is New with the connection already loaded.
func NewForConfig(name string, cfg *rest.Config, c *apiserverapi.WebhookConfiguration, compiler authorizationcel.Compiler, backoff *wait.Backoff) (*Authorizer, error) {
	if c.Timeout.Duration != 0 {
		cfg = rest.CopyConfig(cfg)
		cfg.Timeout = c.Timeout.Duration
	}
	var onError authorizer.Decision
	switch c.FailurePolicy {
	case apiserverapi.FailurePolicyNoOpinion, "":
		onError = authorizer.DecisionNoOpinion
	case apiserverapi.FailurePolicyDeny:
		onError = authorizer.DecisionDeny
	default:
		return nil, fmt.Errorf("authorization webhook %q: unknown failurePolicy %q", name, c.FailurePolicy)
	}
	allowTTL, denyTTL := c.AuthorizedTTL.Duration, c.UnauthorizedTTL.Duration
	if !c.CacheAuthorizedRequests {
		allowTTL = 0
	}
	if !c.CacheUnauthorizedRequests {
		denyTTL = 0
	}
	if backoff == nil {
		b := DefaultRetryBackoff
		backoff = &b
	}
	if compiler == nil {
		compiler = authorizationcel.NewDefaultCompiler()
	}
	version := c.SubjectAccessReviewVersion
	if version == "" {
		version = "v1"
	}
	w, err := upstream.New(cfg, version, allowTTL, denyTTL, *backoff, onError, c.MatchConditions, name,
		webhookmetrics.NoopAuthorizerMetrics{}, compiler)
	if err != nil {
		return nil, fmt.Errorf("authorization webhook %q: %w", name, err)
	}
	return &Authorizer{name: name, w: w}, nil
}

// Authorize sends the request's attributes to the webhook.
func (a *Authorizer) Authorize(ctx context.Context, at authz.Attributes) (authz.Decision, string, error) {
	d, reason, err := a.w.Authorize(ctx, Attributes(at))
	switch d {
	case authorizer.DecisionAllow:
		return authz.Allow, reason, err
	case authorizer.DecisionDeny:
		return authz.Deny, reason, err
	}
	return authz.NoOpinion, reason, err
}

// RulesFor: a webhook cannot list rules (incomplete, as upstream).
func (a *Authorizer) RulesFor(context.Context, *authn.User, string) ([]rbacv1.PolicyRule, bool, error) {
	return nil, true, nil
}

// Attributes converts Skiff's attributes to k8s.io/apiserver's.
func Attributes(a authz.Attributes) authorizer.AttributesRecord {
	r := authorizer.AttributesRecord{
		Verb: a.Verb, Namespace: a.Namespace, APIGroup: a.APIGroup, APIVersion: a.APIVersion,
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name, ResourceRequest: a.ResourceRequest, Path: a.Path,
	}
	r.User = &user.DefaultInfo{}
	if a.User != nil {
		r.User = &user.DefaultInfo{Name: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: a.User.Extra}
	}
	return r
}
