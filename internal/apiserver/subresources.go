package apiserver

import (
	"context"
	"fmt"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// subresourceFunc serves one subresource.
type subresourceFunc func(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output)

// subresourceHandlers are the handlers of the declared subresources
// (registry.Subresource.Handler) beyond status and finalize, which the
// update path serves. HandleConnect is where streams to the node agent
// plug in (podsubresources.go), HandleProxy the proxy subresources
// (proxy.go).
func subresourceHandlers() map[registry.SubresourceHandler]subresourceFunc {
	return map[registry.SubresourceHandler]subresourceFunc{
		registry.HandleScale:               serveScale,
		registry.HandleBinding:             serveBinding,
		registry.HandleEviction:            servePodEviction,
		registry.HandleApproval:            serveCSRApproval,
		registry.HandleEphemeralContainers: serveEphemeralContainers,
		registry.HandleResize:              serveResize,
		registry.HandleConnect:             servePodStream,
		registry.HandleProxy:               serveProxy,
		registry.HandleTokenRequest:        serveTokenRequest,
	}
}

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

func (h *resourceHandler) scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	s, err := h.scaler.ScaleOf(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m, _ := metaOf(obj)
	s.TypeMeta = metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"}
	s.Name, s.Namespace, s.UID = m.GetName(), m.GetNamespace(), m.GetUID()
	s.ResourceVersion = m.GetResourceVersion()
	s.CreationTimestamp = m.GetCreationTimestamp()
	return s, nil
}

// scaleAdmission describes a write of the scale subresource to the
// admission chain: the object is the Scale (autoscaling/v1), as upstream's.
func (h *resourceHandler) scaleAdmission(ctx context.Context, info RequestInfo, want, cur *autoscalingv1.Scale, dry bool) *admission.Attributes {
	a := h.admissionAttributes(ctx, admission.Update, want, cur, info, dry)
	a.Subresource, a.Kind = "scale", scaleGVK
	return a
}

// serveScale serves the scale subresource through the strategy's Scaler.
func serveScale(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	if h.scaler == nil {
		h.codecs.writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: h.gr.Group, Resource: h.gr.Resource + "/scale"}, info.Name))
		return
	}
	var result runtime.Object
	var err error
	switch info.Verb {
	case "get":
		var obj runtime.Object
		obj, err = h.get(ctx, r, info)
		if err == nil {
			result, err = h.scaleOf(obj)
		}
	case "update", "patch":
		var desired *autoscalingv1.Scale
		var pt = ""
		var patch []byte
		if info.Verb == "update" {
			desired = &autoscalingv1.Scale{}
			body, rerr := readBody(r)
			if rerr != nil {
				err = rerr
				break
			}
			if _, err = h.codecs.decodeBody(r, body, desired, scaleGVK); err != nil {
				break
			}
			if desired.Name != info.Name {
				err = apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", desired.Name, info.Name))
				break
			}
		} else {
			t, perr := patchType(r)
			if perr != nil {
				err = perr
				break
			}
			pt = string(t)
			if patch, err = readBody(r); err != nil {
				break
			}
		}
		var dry bool
		if dry, err = dryRun(r); err != nil {
			break
		}
		var updated runtime.Object
		updated, err = h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
			curScale, err := h.scaleOf(cur)
			if err != nil {
				return nil, err
			}
			want := desired
			if pt != "" {
				p, _, err := h.patchObject(r, typesPatch(pt), patch, curScale, func() runtime.Object { return &autoscalingv1.Scale{} }, scaleGVK)
				if err != nil {
					return nil, err
				}
				want = p.(*autoscalingv1.Scale)
			}
			if want.ResourceVersion != "" && want.ResourceVersion != curScale.ResourceVersion {
				return nil, apierrors.NewConflict(schema.GroupResource{Group: h.gr.Group, Resource: h.gr.Resource + "/scale"}, info.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
			}
			// Admission sees the Scale, as upstream's: a webhook or policy
			// on <resource>/scale decides `kubectl scale`.
			want = want.DeepCopy()
			a := h.scaleAdmission(ctx, info, want, curScale, dry)
			if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
				return nil, err
			}
			if want.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, info.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
			}
			if err := h.runAdmission(ctx, a, h.srv.admission.Validate); err != nil {
				return nil, err
			}
			next := cur.DeepCopyObject()
			if err := h.scaler.ApplyScale(next, want); err != nil {
				return nil, err
			}
			if err := h.prepareUpdate(ctx, next, cur, modeMain); err != nil {
				return nil, err
			}
			return next, nil
		})
		if err == nil {
			result, err = h.scaleOf(updated)
		}
	default:
		err = methodNotSupported(h.gr, info.Verb)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.writeObject(w, http.StatusOK, output{mediaType: out.mediaType}, result)
}
