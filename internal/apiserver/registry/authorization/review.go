// Package authorization holds the authorization.k8s.io/v1 reviews:
// selfsubjectaccessreviews ("can I do this?"), selfsubjectrulesreviews
// ("what may I do here?"), and subjectaccessreviews and
// localsubjectaccessreviews ("may this user do that?", asked by
// components such as a kubelet checking its API's callers). All are
// create-only virtual resources that are never stored: the handler decodes
// the request, the strategy asks the server's authorizer (the same one that
// decides requests) and answers the review with its status filled in.
package authorization

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the four reviews. They have no list kind and no storage
// prefix: their strategies answer the create (registry.VirtualCreater) and
// nothing is stored. deps.Authorizer answers them (nil: every authenticated
// user may do everything, authz.AlwaysAllowAuthenticated); the rules review
// lists its rules when it is an authz.RuleResolver.
func Resources(deps registry.Deps) []registry.Resource {
	gv := authorizationv1.SchemeGroupVersion
	authorizer := deps.Authorizer
	if authorizer == nil {
		authorizer = authz.AlwaysAllowAuthenticated
	}
	resolve := RulesResolver(noRules)
	if rr, ok := authorizer.(authz.RuleResolver); ok {
		resolve = ResolverFrom(rr)
	}
	return []registry.Resource{
		{
			GroupVersion: gv, Resource: "localsubjectaccessreviews", Kind: "LocalSubjectAccessReview",
			SingularName: "localsubjectaccessreview", Namespaced: true,
			New:      func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
			Strategy: LocalSubjectAccessReviewStrategy{authorize: authorizer.Authorize},
		},
		{
			GroupVersion: gv, Resource: "selfsubjectaccessreviews", Kind: "SelfSubjectAccessReview",
			SingularName: "selfsubjectaccessreview",
			New:          func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
			Strategy:     AccessReviewStrategy{authorize: authorizer.Authorize},
		},
		{
			GroupVersion: gv, Resource: "selfsubjectrulesreviews", Kind: "SelfSubjectRulesReview",
			SingularName: "selfsubjectrulesreview",
			New:          func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
			Strategy:     RulesReviewStrategy{resolve: resolve},
		},
		{
			GroupVersion: gv, Resource: "subjectaccessreviews", Kind: "SubjectAccessReview",
			SingularName: "subjectaccessreview",
			New:          func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
			Strategy:     SubjectAccessReviewStrategy{authorize: authorizer.Authorize},
		},
	}
}

func noRules(context.Context, *authn.User, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	return nil, nil, true, nil
}

// ResolverFrom lists the rules rr resolves as a rules review shows them:
// a rule naming resources is a resource rule, one naming URLs a
// non-resource rule.
func ResolverFrom(rr authz.RuleResolver) RulesResolver {
	return func(ctx context.Context, user *authn.User, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
		rules, incomplete, err := rr.RulesFor(ctx, user, namespace)
		var (
			res    []authorizationv1.ResourceRule
			nonRes []authorizationv1.NonResourceRule
		)
		for _, r := range rules {
			if len(r.Resources) > 0 {
				res = append(res, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
			}
			if len(r.NonResourceURLs) > 0 {
				nonRes = append(nonRes, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			}
		}
		return res, nonRes, incomplete, err
	}
}

// createOnly is the strategy shared by the self reviews.
type createOnly struct {
	registry.DefaultStrategy
}

// Verbs declares the only verb served, for discovery.
func (createOnly) Verbs() []string { return []string{"create"} }

// AccessReviewStrategy is the selfsubjectaccessreviews strategy: it asks
// the server's authorizer on behalf of the requesting user, so that
// `kubectl auth can-i` tells the truth.
type AccessReviewStrategy struct {
	createOnly
	authorize AuthorizeFunc
}

// RulesReviewStrategy is the selfsubjectrulesreviews strategy: it lists
// what the requesting user may do.
type RulesReviewStrategy struct {
	createOnly
	resolve RulesResolver
}

// SubjectAccessReviewStrategy is the subjectaccessreviews strategy: it
// asks the authorizer on behalf of the user the spec names.
type SubjectAccessReviewStrategy struct {
	createOnly
	authorize AuthorizeFunc
}

// LocalSubjectAccessReviewStrategy is the localsubjectaccessreviews
// strategy: a subject access review confined to one namespace.
type LocalSubjectAccessReviewStrategy struct {
	createOnly
	authorize AuthorizeFunc
}

var (
	_ registry.VirtualCreater = SubjectAccessReviewStrategy{}
	_ registry.VirtualCreater = LocalSubjectAccessReviewStrategy{}
	_ registry.Strategy       = AccessReviewStrategy{}
	_ registry.Strategy       = RulesReviewStrategy{}
	_ registry.VirtualCreater = AccessReviewStrategy{}
	_ registry.VirtualCreater = RulesReviewStrategy{}
)

// CreateVirtual answers a SelfSubjectAccessReview.
func (s AccessReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectAccessReview)
	if errs := s.Validate(ctx, review); len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "", errs)
	}
	user, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	review.Status = ReviewSelfAccess(ctx, user, review.Spec, s.authorize)
	return review, nil
}

// CreateVirtual answers a SelfSubjectRulesReview.
func (s RulesReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectRulesReview)
	user, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	status, err := ReviewSelfRules(ctx, user, review.Spec, s.resolve)
	if err != nil {
		return nil, err
	}
	review.Status = status
	return review, nil
}

// CreateVirtual answers a SubjectAccessReview.
func (s SubjectAccessReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.SubjectAccessReview)
	if errs := ValidateSubjectAccessReviewSpec(&review.Spec, field.NewPath("spec")); len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview").GroupKind(), "", errs)
	}
	review.Status = reviewAccess(ctx, review.Spec, s.authorize)
	return review, nil
}

// CreateVirtual answers a LocalSubjectAccessReview; its namespace is the
// request's (the handler fills metadata.namespace from the path).
func (s LocalSubjectAccessReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.LocalSubjectAccessReview)
	if review.Namespace == "" {
		return nil, apierrors.NewBadRequest("namespace is required on this type: ")
	}
	spec := field.NewPath("spec")
	errs := ValidateSubjectAccessReviewSpec(&review.Spec, spec)
	if ra := review.Spec.ResourceAttributes; ra != nil && ra.Namespace != review.Namespace {
		errs = append(errs, field.Invalid(spec.Child("resourceAttributes", "namespace"), ra.Namespace, "must match metadata.namespace"))
	}
	if review.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(spec.Child("nonResourceAttributes"), review.Spec.NonResourceAttributes, "disallowed on this kind of request"))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview").GroupKind(), "", errs)
	}
	review.Status = reviewAccess(ctx, review.Spec, s.authorize)
	return review, nil
}

// ValidateSubjectAccessReviewSpec requires exactly one of the attributes
// and a user or a group.
func ValidateSubjectAccessReviewSpec(spec *authorizationv1.SubjectAccessReviewSpec, path *field.Path) field.ErrorList {
	errs := ValidateSelfSubjectAccessReviewSpec(&authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: spec.ResourceAttributes, NonResourceAttributes: spec.NonResourceAttributes}, path)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(path.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

func reviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec, authorize AuthorizeFunc) authorizationv1.SubjectAccessReviewStatus {
	user := &authn.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		user.Extra = map[string][]string{}
		for k, v := range spec.Extra {
			user.Extra[k] = v
		}
	}
	return ReviewSelfAccess(ctx, user, authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: spec.ResourceAttributes, NonResourceAttributes: spec.NonResourceAttributes}, authorize)
}

// Validate checks the access review's spec.
func (AccessReviewStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSelfSubjectAccessReviewSpec(&obj.(*authorizationv1.SelfSubjectAccessReview).Spec, field.NewPath("spec"))
}

// ValidateSelfSubjectAccessReviewSpec requires exactly one of
// resourceAttributes and nonResourceAttributes.
func ValidateSelfSubjectAccessReviewSpec(spec *authorizationv1.SelfSubjectAccessReviewSpec, path *field.Path) field.ErrorList {
	switch {
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return field.ErrorList{field.Invalid(path.Child("nonResourceAttributes"), spec.NonResourceAttributes,
			"cannot be specified in combination with resourceAttributes")}
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		return field.ErrorList{field.Invalid(path.Child("resourceAttributes"), spec.NonResourceAttributes,
			"exactly one of nonResourceAttributes or resourceAttributes must be specified")}
	}
	return nil
}

// AuthorizeFunc is the authorizer a review asks, e.g.
// authz.AlwaysAllowAuthenticated.Authorize.
type AuthorizeFunc func(ctx context.Context, a authz.Attributes) (authz.Decision, string, error)

// ReviewSelfAccess asks authorize whether user may do what spec describes
// (the subject access reviews use it for the user their spec names).
// An evaluation error is reported in the status, as upstream does, and the
// request is then neither allowed nor denied unless the authorizer decided.
func ReviewSelfAccess(ctx context.Context, user *authn.User, spec authorizationv1.SelfSubjectAccessReviewSpec, authorize AuthorizeFunc) authorizationv1.SubjectAccessReviewStatus {
	decision, reason, err := authorize(ctx, AttributesFor(user, spec))
	status := authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authz.Allow,
		Denied:  decision == authz.Deny,
		Reason:  reason,
	}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return status
}

// AttributesFor turns a review's spec into the attributes of the request
// it describes.
func AttributesFor(user *authn.User, spec authorizationv1.SelfSubjectAccessReviewSpec) authz.Attributes {
	if ra := spec.ResourceAttributes; ra != nil {
		return authz.Attributes{
			User: user, Verb: ra.Verb, APIGroup: ra.Group, APIVersion: ra.Version,
			Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name,
			ResourceRequest: true,
		}
	}
	a := authz.Attributes{User: user}
	if nra := spec.NonResourceAttributes; nra != nil {
		a.Verb, a.Path = nra.Verb, nra.Path
	}
	return a
}

// RulesResolver lists what user may do in namespace. incomplete says the
// list may be missing rules (e.g. an authorizer that cannot enumerate).
type RulesResolver func(ctx context.Context, user *authn.User, namespace string) (resource []authorizationv1.ResourceRule, nonResource []authorizationv1.NonResourceRule, incomplete bool, err error)

// AlwaysAllowAuthenticatedRules is the resolver matching
// authz.AlwaysAllowAuthenticated: an authenticated user may do everything
// (one rule with "*" verbs, API groups and resources, and one for every
// non-resource URL); anyone else may do nothing.
func AlwaysAllowAuthenticatedRules(ctx context.Context, user *authn.User, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
	if user == nil || user.Name == "" || user.Name == authn.Anonymous {
		return nil, nil, false, nil
	}
	all := []string{"*"}
	return []authorizationv1.ResourceRule{{Verbs: all, APIGroups: all, Resources: all}},
		[]authorizationv1.NonResourceRule{{Verbs: all, NonResourceURLs: all}}, false, nil
}

// ReviewSelfRules lists what user may do in spec.namespace. A missing
// namespace is a 400 Bad Request, as upstream; a resolver error is reported
// in the status.
func ReviewSelfRules(ctx context.Context, user *authn.User, spec authorizationv1.SelfSubjectRulesReviewSpec, resolve RulesResolver) (authorizationv1.SubjectRulesReviewStatus, error) {
	if spec.Namespace == "" {
		return authorizationv1.SubjectRulesReviewStatus{}, apierrors.NewBadRequest("no namespace on request")
	}
	res, nonRes, incomplete, err := resolve(ctx, user, spec.Namespace)
	status := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    res,
		NonResourceRules: nonRes,
		Incomplete:       incomplete,
	}
	if status.ResourceRules == nil {
		status.ResourceRules = []authorizationv1.ResourceRule{}
	}
	if status.NonResourceRules == nil {
		status.NonResourceRules = []authorizationv1.NonResourceRule{}
	}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return status, nil
}
