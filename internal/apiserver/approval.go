package apiserver

import (
	"context"
	"fmt"
	"net/http"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

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
