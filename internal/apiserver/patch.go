package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// maxJSONPatchOperations bounds the work a single JSON patch may ask for.
const maxJSONPatchOperations = 10000

// maxJSONPatchCopyBytes bounds the bytes a JSON patch's copy operations
// may add in total (upstream's 3 MiB); over it the patch fails with 422.
const maxJSONPatchCopyBytes = 3 * 1024 * 1024

// applyPatch applies a patch document of the given type to the JSON of
// the current object.
func applyPatch(pt types.PatchType, current, patch []byte, schemaObj runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(p) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(p)))
		}
		// RFC 6902: a test carries a value ("value": null is one). The
		// library refuses add and replace without one as it decodes, but
		// dereferences a test's missing value (a test of the whole
		// document panicked in FuzzApplyPatch).
		for i, op := range p {
			if _, ok := op["value"]; !ok && op.Kind() == "test" {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid operation %d: test has no value field", i))
			}
		}
		opts := jsonpatch.NewApplyOptions()
		opts.AccumulatedCopySizeLimit = maxJSONPatchCopyBytes // a few nested copies must not exhaust memory
		out, err := p.ApplyWithOptions(current, opts)
		if err != nil {
			return nil, unprocessablePatch(err.Error())
		}
		return out, nil
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("error decoding patch: invalid JSON document")
		}
		out, err := jsonpatch.MergePatch(current, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case types.StrategicMergePatchType:
		var m map[string]interface{}
		if err := json.Unmarshal(patch, &m); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		out, err := strategicpatch.StrategicMergePatch(current, patch, schemaObj)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	}
	return nil, unsupportedPatch(string(pt))
}

func unsupportedPatch(ct string) error {
	se := unsupportedMediaType(ct).(*apierrors.StatusError)
	se.ErrStatus.Message = fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s", types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType)
	return se
}

func patchType(r *http.Request) (types.PatchType, error) {
	mt, err := requestMediaType(r)
	if err != nil {
		return "", err
	}
	switch pt := types.PatchType(mt); pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		return pt, nil
	}
	return "", unsupportedPatch(mt)
}

// patchObject applies the request's patch to cur and decodes the result.
func (h *resourceHandler) patchObject(r *http.Request, pt types.PatchType, patch []byte, cur runtime.Object, newObj func() runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, []string, error) {
	curJSON, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	patched, err := applyPatch(pt, curJSON, patch, newObj())
	if err != nil {
		return nil, nil, err
	}
	out := newObj()
	pr := r.Clone(r.Context())
	pr.Header.Set("Content-Type", mediaJSON)
	warnings, err := h.codecs.decodeBody(pr, patched, out, gvk)
	if err == nil {
		warnings, err = h.pruneUnknown(r, out, warnings)
	}
	if err != nil {
		return nil, nil, err
	}
	return out, warnings, nil
}

func (h *resourceHandler) patch(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	if sub := h.subresourceHandler(info.Subresource); sub != "" && sub != registry.HandleStatus {
		return nil, methodNotSupported(h.gr, info.Verb)
	}
	if mt, _ := requestMediaType(r); mt == string(applyPatchType) {
		obj, _, err := h.apply(ctx, r, info)
		return obj, err
	}
	pt, err := patchType(r)
	if err == nil && pt == types.StrategicMergePatchType && h.res.Custom != nil {
		err = unsupportedPatch(string(pt)) // custom resources have no patch strategies (upstream: 415)
	}
	if err != nil {
		return nil, err
	}
	patch, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		next, warnings, err := h.patchObject(r, pt, patch, cur, h.res.New, h.gvk)
		if err != nil {
			return nil, err
		}
		setWarnings(ctx, warnings)
		if err := h.checkIdentity(next, info); err != nil {
			return nil, err
		}
		return h.finishUpdate(ctx, r, info, next, cur)
	})
}

// checkIdentity refuses a patch that renames or moves the object.
func (h *resourceHandler) checkIdentity(obj runtime.Object, info RequestInfo) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	if m.GetName() != info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
	}
	if h.res.Namespaced && m.GetNamespace() != info.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

func typesPatch(s string) types.PatchType { return types.PatchType(s) }

// unprocessablePatch is a patch that decodes but cannot be applied: 422,
// as upstream answers.
func unprocessablePatch(msg string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", msg, 0, false)
}
