// Package authz decides whether an authenticated user may perform a request.
// It is the seam between the handler chain and the authorization modes: the
// handler builds Attributes from the request, asks the configured
// Authorizer, and answers 403 unless the decision is Allow. Today the only
// mode is AlwaysAllowAuthenticated; RBAC and the Node authorizer plug in here.
package authz

import (
	"context"
	"errors"
	"fmt"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// Attributes describe one request to authorize.
type Attributes struct {
	User *authn.User
	// Verb is the API verb for resource requests (get, list, watch, create,
	// update, patch, delete, deletecollection) or the lower-case HTTP method
	// for other paths.
	Verb        string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Path is the request path, used for non-resource requests.
	Path            string
	ResourceRequest bool
}

// Decision is an authorizer's answer.
type Decision int

const (
	// Deny refuses the request outright.
	Deny Decision = iota
	// Allow permits the request.
	Allow
	// NoOpinion leaves the decision to the next authorizer; a request that
	// no authorizer allows is refused.
	NoOpinion
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	case NoOpinion:
		return "NoOpinion"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Authorizer decides on one request. The string is a reason, shown to the
// client on denial.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, a Attributes) (Decision, string, error)

// Authorize calls f(ctx, a).
func (f AuthorizerFunc) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	return f(ctx, a)
}

// AlwaysAllowAuthenticated allows any request whose user is authenticated
// (non-nil, named, and not the anonymous user) and has no opinion otherwise.
var AlwaysAllowAuthenticated Authorizer = AuthorizerFunc(alwaysAllowAuthenticated)

func alwaysAllowAuthenticated(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User == nil || a.User.Name == "" || a.User.Name == authn.Anonymous {
		return NoOpinion, "", nil
	}
	return Allow, "", nil
}

// Union asks each authorizer in order; the first Allow or Deny decides.
// Errors are collected and returned with NoOpinion if nobody decided.
func Union(auths ...Authorizer) Authorizer {
	return AuthorizerFunc(func(ctx context.Context, a Attributes) (Decision, string, error) {
		var errs []error
		for _, z := range auths {
			d, reason, err := z.Authorize(ctx, a)
			if err != nil {
				errs = append(errs, err)
			}
			if d == Allow || d == Deny {
				return d, reason, nil
			}
		}
		return NoOpinion, "", errors.Join(errs...)
	})
}
