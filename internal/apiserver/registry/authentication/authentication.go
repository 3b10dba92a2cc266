// Package authentication holds the authentication.k8s.io/v1 reviews:
// tokenreviews ("who is this token?", asked by components that check
// bearer tokens, such as a kubelet or a webhook) and selfsubjectreviews
// ("who am I?", kubectl auth whoami). Both are create-only virtual
// resources that are never stored.
package authentication

import (
	"context"
	"errors"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the two reviews. deps.ReviewToken answers TokenReviews
// (nil: no token is recognised).
func Resources(deps registry.Deps) []registry.Resource {
	gv := authenticationv1.SchemeGroupVersion
	return []registry.Resource{
		{
			GroupVersion: gv, Resource: "selfsubjectreviews", Kind: "SelfSubjectReview",
			SingularName: "selfsubjectreview",
			New:          func() runtime.Object { return &authenticationv1.SelfSubjectReview{} },
			Strategy:     SelfSubjectReviewStrategy{},
		},
		{
			GroupVersion: gv, Resource: "tokenreviews", Kind: "TokenReview",
			SingularName: "tokenreview",
			New:          func() runtime.Object { return &authenticationv1.TokenReview{} },
			Strategy:     TokenReviewStrategy{Review: deps.ReviewToken},
		},
	}
}

// TokenReviewStrategy answers TokenReviews with the server's token
// authenticators.
type TokenReviewStrategy struct {
	registry.DefaultStrategy
	Review registry.TokenReviewer
}

var _ registry.VirtualCreater = TokenReviewStrategy{}

// Verbs: create only.
func (TokenReviewStrategy) Verbs() []string { return []string{"create"} }

// CreateVirtual fills in the review's status, as upstream: authenticated,
// the user, the audiences the token is good for, or the error.
func (s TokenReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	tr := obj.(*authenticationv1.TokenReview)
	if tr.Namespace != "" {
		return nil, apierrors.NewBadRequest("namespace is not allowed on this type: " + tr.Namespace)
	}
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	tr.Status = authenticationv1.TokenReviewStatus{}
	if s.Review == nil {
		return tr, nil
	}
	u, auds, ok, err := s.Review(ctx, tr.Spec.Token, tr.Spec.Audiences)
	tr.Status.Authenticated = ok && u != nil
	if err != nil {
		tr.Status.Error = err.Error()
	}
	if tr.Status.Authenticated {
		tr.Status.User = userInfo(u)
		tr.Status.Audiences = auds
	}
	return tr, nil
}

// SelfSubjectReviewStrategy answers "who am I?" with the request's user.
type SelfSubjectReviewStrategy struct {
	registry.DefaultStrategy
}

var _ registry.VirtualCreater = SelfSubjectReviewStrategy{}

// Verbs: create only.
func (SelfSubjectReviewStrategy) Verbs() []string { return []string{"create"} }

// CreateVirtual answers with the caller's user info.
func (SelfSubjectReviewStrategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest(errors.New("no user present on request").Error())
	}
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(time.Now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(u)},
	}, nil
}

func userInfo(u *authn.User) authenticationv1.UserInfo {
	info := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: map[string]authenticationv1.ExtraValue{}}
	for k, v := range u.Extra {
		info.Extra[k] = v
	}
	return info
}
