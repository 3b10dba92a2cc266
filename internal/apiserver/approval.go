package apiserver

import (
	"context"
	"fmt"
	"net/http"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/certificates"
)

// serveCSRApproval serves certificatesigningrequests/approval: only the
// Approved and Denied conditions change.
func serveCSRApproval(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	var obj runtime.Object
	var err error
	switch info.Verb {
	case "get":
		obj, err = h.get(ctx, r, info)
	case "update", "patch":
		// The new object is the body (update) or the patch applied to the
		// stored one (patch, any of upstream's patch types but apply).
		var body runtime.Object
		var pt types.PatchType
		var patch []byte
		if info.Verb == "update" {
			body, err = h.decodeUpdateBody(ctx, r, info)
		} else if pt, err = patchType(r); err == nil {
			patch, err = readBody(r)
		}
		if err != nil {
			break
		}
		obj, err = h.updateWith(ctx, r, "", info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
			old := cur.(*certificatesv1.CertificateSigningRequest)
			var next *certificatesv1.CertificateSigningRequest
			if body != nil {
				next = body.DeepCopyObject().(*certificatesv1.CertificateSigningRequest)
			} else {
				patched, warnings, err := h.patchObject(r, pt, patch, cur, h.res.New, h.gvk)
				if err != nil {
					return nil, err
				}
				setWarnings(ctx, warnings)
				if err := h.checkIdentity(patched, info); err != nil {
					return nil, err
				}
				next = patched.(*certificatesv1.CertificateSigningRequest)
			}
			if next.ResourceVersion != "" && next.ResourceVersion != old.ResourceVersion {
				return nil, apierrors.NewConflict(h.gr, old.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
			}
			certificates.PrepareForApprovalUpdate(next, old)
			if errs := certificates.ValidateApprovalUpdate(next, old); len(errs) > 0 {
				return nil, h.invalid(old.Name, errs)
			}
			dry, _ := dryRun(r)
			if err := h.admit(ctx, admission.Update, next, old, info, dry); err != nil {
				return nil, err // CertificateApproval: may the user approve for this signer?
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
