package apiserver

import (
	"context"
	"fmt"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/authorization"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/certificates"
)

// selfAccessReview answers SelfSubjectAccessReviews with the server's own
// authorizer, so `kubectl auth can-i` tells the truth.
type selfAccessReview struct {
	registry.Strategy
	srv *Server
}

func (v selfAccessReview) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectAccessReview)
	if errs := v.Strategy.Validate(ctx, review); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "", errs)
	}
	user, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	review.Status = authorization.ReviewSelfAccess(ctx, user, review.Spec, v.srv.authz.Authorize)
	return review, nil
}

// selfRulesReview lists what the current user may do.
type selfRulesReview struct {
	registry.Strategy
}

func (v selfRulesReview) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	review := obj.(*authorizationv1.SelfSubjectRulesReview)
	user, ok := authn.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user")
	}
	status, err := authorization.ReviewSelfRules(ctx, user, review.Spec, authorization.AlwaysAllowAuthenticatedRules)
	if err != nil {
		return nil, err
	}
	review.Status = status
	return review, nil
}

// virtualize gives the never-stored resources their create behaviour.
func (s *Server) virtualize(rs []registry.Resource) []registry.Resource {
	for i := range rs {
		if rs[i].GroupVersion.Group == "" && rs[i].Resource == "componentstatuses" {
			rs[i].Strategy = componentStatuses{Strategy: rs[i].Strategy, srv: s}
			continue
		}
		if !authorization.IsVirtual(rs[i]) {
			continue
		}
		switch rs[i].Resource {
		case "selfsubjectaccessreviews":
			rs[i].Strategy = selfAccessReview{Strategy: rs[i].Strategy, srv: s}
		case "selfsubjectrulesreviews":
			rs[i].Strategy = selfRulesReview{Strategy: rs[i].Strategy}
		}
	}
	return rs
}

// serveCSRApproval serves certificatesigningrequests/approval: only the
// Approved and Denied conditions change.
func serveCSRApproval(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	var obj runtime.Object
	var err error
	switch info.Verb {
	case "get":
		obj, err = h.get(ctx, r, info)
	case "update":
		var body runtime.Object
		body, err = h.decodeUpdateBody(ctx, r, info)
		if err != nil {
			break
		}
		obj, err = h.updateWith(ctx, r, "", info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
			next := body.DeepCopyObject().(*certificatesv1.CertificateSigningRequest)
			old := cur.(*certificatesv1.CertificateSigningRequest)
			if next.ResourceVersion != "" && next.ResourceVersion != old.ResourceVersion {
				return nil, apierrors.NewConflict(h.gr, old.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
			}
			certificates.PrepareForApprovalUpdate(next, old)
			if errs := certificates.ValidateApprovalUpdate(next, old); len(errs) > 0 {
				return nil, h.invalid(old.Name, errs)
			}
			return next, nil
		})
	default:
		err = methodNotSupported(h.gr, info.Verb)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.writeObject(w, http.StatusOK, output{mediaType: out.mediaType}, obj)
}
