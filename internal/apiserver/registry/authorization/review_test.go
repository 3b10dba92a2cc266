package authorization

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var ctx = context.Background()

var alice = &authn.User{Name: "alice", Groups: []string{authn.AllAuthenticated}}

func TestReviewSelfAccess(t *testing.T) {
	podGet := authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
		Namespace: "ns", Verb: "get", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale", Name: "web",
	}}
	healthz := authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}
	denyPaths := func(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
		if !a.ResourceRequest {
			return authz.Deny, "no paths for you", nil
		}
		return authz.NoOpinion, "", errors.New("rbac not ready")
	}
	tests := []struct {
		name      string
		user      *authn.User
		spec      authorizationv1.SelfSubjectAccessReviewSpec
		authorize AuthorizeFunc
		want      authorizationv1.SubjectAccessReviewStatus
	}{
		{name: "authenticated allowed", user: alice, spec: podGet, authorize: authz.AlwaysAllowAuthenticated.Authorize,
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}},
		{name: "anonymous no opinion", user: &authn.User{Name: authn.Anonymous}, spec: podGet, authorize: authz.AlwaysAllowAuthenticated.Authorize,
			want: authorizationv1.SubjectAccessReviewStatus{}},
		{name: "denied with reason", user: alice, spec: healthz, authorize: denyPaths,
			want: authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "no paths for you"}},
		{name: "evaluation error", user: alice, spec: podGet, authorize: denyPaths,
			want: authorizationv1.SubjectAccessReviewStatus{EvaluationError: "rbac not ready"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ReviewSelfAccess(ctx, tc.user, tc.spec, tc.authorize)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAttributesFor(t *testing.T) {
	tests := []struct {
		name string
		spec authorizationv1.SelfSubjectAccessReviewSpec
		want authz.Attributes
	}{
		{name: "resource", spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "ns", Verb: "update", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale", Name: "web"}},
			want: authz.Attributes{User: alice, Verb: "update", APIGroup: "apps", APIVersion: "v1", Resource: "deployments",
				Subresource: "scale", Namespace: "ns", Name: "web", ResourceRequest: true}},
		{name: "non-resource", spec: authorizationv1.SelfSubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}},
			want: authz.Attributes{User: alice, Verb: "get", Path: "/metrics"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AttributesFor(alice, tc.spec)); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		name string
		spec authorizationv1.SelfSubjectAccessReviewSpec
		want []string
	}{
		{name: "resource", spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get"}}},
		{name: "neither", want: []string{"spec.resourceAttributes"}},
		{name: "both", spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{}},
			want: []string{"spec.nonResourceAttributes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range (AccessReviewStrategy{}).Validate(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: tc.spec}) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReviewSelfRules(t *testing.T) {
	all := []string{"*"}
	tests := []struct {
		name    string
		user    *authn.User
		ns      string
		resolve RulesResolver
		want    authorizationv1.SubjectRulesReviewStatus
		badReq  bool
	}{
		{name: "authenticated may do everything", user: alice, ns: "default", resolve: AlwaysAllowAuthenticatedRules,
			want: authorizationv1.SubjectRulesReviewStatus{
				ResourceRules:    []authorizationv1.ResourceRule{{Verbs: all, APIGroups: all, Resources: all}},
				NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: all, NonResourceURLs: all}},
			}},
		{name: "anonymous may do nothing", user: &authn.User{Name: authn.Anonymous}, ns: "default", resolve: AlwaysAllowAuthenticatedRules,
			want: authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}},
		{name: "resolver error", user: alice, ns: "default",
			resolve: func(context.Context, *authn.User, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool, error) {
				return nil, nil, true, errors.New("partial")
			},
			want: authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{},
				NonResourceRules: []authorizationv1.NonResourceRule{}, Incomplete: true, EvaluationError: "partial"}},
		{name: "no namespace", user: alice, resolve: AlwaysAllowAuthenticatedRules, badReq: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReviewSelfRules(ctx, tc.user, authorizationv1.SelfSubjectRulesReviewSpec{Namespace: tc.ns}, tc.resolve)
			if tc.badReq {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err = %v, want BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResourcesAreCreateOnlyAndVirtual(t *testing.T) {
	var names []string
	for _, r := range Resources(registry.Deps{}) {
		names = append(names, r.Resource)
		vl, ok := r.Strategy.(registry.VerbLister)
		if !ok {
			t.Fatalf("%s: strategy does not list verbs", r.Resource)
		}
		if diff := cmp.Diff([]string{"create"}, vl.Verbs()); diff != "" {
			t.Errorf("%s verbs (-want +got):\n%s", r.Resource, diff)
		}
		if !registry.IsVirtual(r) || r.StoragePrefix != "" || r.Namespaced != (r.Resource == "localsubjectaccessreviews") {
			t.Errorf("%s: virtual=%v prefix=%q namespaced=%v", r.Resource, registry.IsVirtual(r), r.StoragePrefix, r.Namespaced)
		}
	}
	if diff := cmp.Diff([]string{"localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews"}, names); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if registry.IsVirtual(registry.Resource{Strategy: registry.DefaultStrategy{}}) {
		t.Errorf("a stored resource reported virtual")
	}
}
