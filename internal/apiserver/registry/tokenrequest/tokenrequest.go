// Package tokenrequest serves core/v1 serviceaccounts/token: a
// TokenRequest (authentication.k8s.io/v1) for a service account is answered
// with a signed token, as upstream's TokenREST does. The handler in
// internal/apiserver decodes the body and writes the answer; this package
// decides everything in between: defaults, validation, the bound object
// and its UID, the lifetime and the claims (a node's limits are the
// NodeRestriction admission plugin's, run by the caller).
package tokenrequest

import (
	"context"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/satoken"
)

// Limits of spec.expirationSeconds, as upstream validates them.
const (
	MinExpirationSeconds     = 10 * 60
	MaxExpirationSeconds     = 1 << 32
	DefaultExpirationSeconds = 60 * 60
)

var gk = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

// Issuer answers TokenRequests.
type Issuer struct {
	Signer  *satoken.Signer
	Objects authn.ServiceAccountObjects
	// Audiences are the API server's (--api-audiences): the default
	// audience of a request that names none.
	Audiences []string
	// ExtendExpiration issues pod-bound tokens asked for with the kubelet's
	// default lifetime (3607 s) for a year, with warnafter at the hour
	// (upstream's --service-account-extend-token-expiration, default on).
	ExtendExpiration bool
	// MaxExpiration, when set, shortens longer requests (with a warning).
	MaxExpiration time.Duration
	Clock         clock.PassiveClock
	// NewID makes the jti (default: a random UUID).
	NewID func() string
}

// Create answers req for the service account namespace/name; it returns
// the answer and any warnings for the client. validate
// (nil: none) is the validating phase of admission, given a copy of the
// request once it is defaulted and valid, before the bound object is
// read, as upstream's TokenREST calls it.
func (i *Issuer) Create(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest, validate func(context.Context, *authenticationv1.TokenRequest) error) (*authenticationv1.TokenRequest, []string, error) {
	if req.Name != "" && req.Name != name {
		return nil, nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	sa, err := i.Objects.ServiceAccount(ctx, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	if req.UID != "" && req.UID != sa.UID {
		return nil, nil, apierrors.NewConflict(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	out := req.DeepCopy()
	if len(out.Spec.Audiences) == 0 {
		out.Spec.Audiences = slices.Clone(i.Audiences)
	}
	if out.Spec.ExpirationSeconds == nil {
		s := int64(DefaultExpirationSeconds)
		out.Spec.ExpirationSeconds = &s
	}
	out.Name, out.Namespace, out.UID = sa.Name, sa.Namespace, sa.UID
	now := i.now()
	out.CreationTimestamp = metav1.NewTime(now)
	out.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateRequest(out); len(errs) > 0 {
		return nil, nil, apierrors.NewInvalid(gk, "", errs)
	}
	if validate != nil {
		if err := validate(ctx, out.DeepCopy()); err != nil {
			return nil, nil, err
		}
	}

	var (
		binding satoken.Binding
		pod     *corev1.Pod
	)
	if ref := out.Spec.BoundObjectRef; ref != nil {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		var uid string
		switch {
		case gv.Group == "" && ref.Kind == "Pod":
			if pod, err = i.Objects.Pod(ctx, namespace, ref.Name); err != nil {
				return nil, nil, err
			}
			if pod.Spec.ServiceAccountName != name {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", name))
			}
			uid = string(pod.UID)
			binding.Pod = &satoken.Ref{Name: pod.Name, UID: uid}
			if n := pod.Spec.NodeName; n != "" {
				// The node is recorded for information; a missing node
				// leaves its UID out, as upstream.
				binding.Node = &satoken.Ref{Name: n}
				if node, err := i.Objects.Node(ctx, n); err == nil {
					binding.Node.UID = string(node.UID)
				} else if !apierrors.IsNotFound(err) {
					return nil, nil, apierrors.NewInternalError(err)
				}
			}
		case gv.Group == "" && ref.Kind == "Node":
			node, err := i.Objects.Node(ctx, ref.Name)
			if err != nil {
				return nil, nil, err
			}
			uid = string(node.UID)
			binding.Node = &satoken.Ref{Name: node.Name, UID: uid}
		case gv.Group == "" && ref.Kind == "Secret":
			s, err := i.Objects.Secret(ctx, namespace, ref.Name)
			if err != nil {
				return nil, nil, err
			}
			uid = string(s.UID)
			binding.Secret = &satoken.Ref{Name: s.Name, UID: uid}
		default:
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gv.WithKind(ref.Kind).String()))
		}
		if ref.UID != "" && string(ref.UID) != uid {
			return nil, nil, apierrors.NewConflict(schema.GroupResource{Group: gv.Group, Resource: ref.Kind}, ref.Name,
				fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
	}

	var warnings []string
	exp := *out.Spec.ExpirationSeconds
	if i.MaxExpiration > 0 && exp > int64(i.MaxExpiration/time.Second) {
		max := int64(i.MaxExpiration / time.Second)
		warnings = append(warnings, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", exp, max))
		exp = max
		out.Spec.ExpirationSeconds = &max
	}
	lifetime, warnAfter := time.Duration(exp)*time.Second, time.Duration(0)
	if i.ExtendExpiration && pod != nil && exp == satoken.WarnOnlyExpirationSeconds && i.onlyAPIAudiences(out.Spec.Audiences) {
		warnAfter = lifetime
		lifetime = satoken.ExtendedExpirationSeconds * time.Second
	}
	id := ""
	if i.NewID != nil {
		id = i.NewID()
	} else {
		id = string(uuid.NewUUID())
	}
	acct := satoken.Account{Namespace: sa.Namespace, Name: sa.Name, UID: string(sa.UID)}
	tok, err := i.Signer.Sign(satoken.BoundClaims(acct, binding, out.Spec.Audiences, now, lifetime, warnAfter, id))
	if err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	out.Status = authenticationv1.TokenRequestStatus{
		Token: tok,
		// The requested lifetime, even when the token lives longer.
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*out.Spec.ExpirationSeconds) * time.Second)),
	}
	return out, warnings, nil
}

func (i *Issuer) now() time.Time {
	if i.Clock == nil {
		return time.Now()
	}
	return i.Clock.Now()
}

// onlyAPIAudiences says every audience is one of the API server's.
func (i *Issuer) onlyAPIAudiences(auds []string) bool {
	for _, a := range auds {
		if !slices.Contains(i.Audiences, a) {
			return false
		}
	}
	return true
}

// validateRequest is upstream's ValidateTokenRequest.
func validateRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	switch e := *tr.Spec.ExpirationSeconds; {
	case e < MinExpirationSeconds:
		errs = append(errs, field.Invalid(p, e, "may not specify a duration less than 10 minutes"))
	case e > MaxExpirationSeconds:
		errs = append(errs, field.TooLong(p, e, MaxExpirationSeconds))
	}
	return errs
}
