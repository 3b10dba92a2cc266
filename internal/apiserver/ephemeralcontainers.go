package apiserver

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podregistry "github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
	"github.com/skiff-sh/skiff/internal/storage"
)

// serveEphemeralContainers serves pods/ephemeralcontainers as upstream:
// get returns the Pod; update and patch take only the new object's
// spec.ephemeralContainers (existing ones may be neither removed nor
// changed), then go through the pod's update rules, managedFields and
// admission like any update, and answer with the Pod.
func serveEphemeralContainers(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	servePodSpecPart(ctx, h, w, r, info, out, podregistry.UpdateEphemeralContainers, podregistry.WithEphemeralContainersUpdate)
}

// servePodSpecPart serves a subresource that writes part of a pod's spec
// (ephemeralcontainers, resize): get returns the Pod, update and patch go
// through updatePodSpecPart with take and mark, and answer with the Pod.
func servePodSpecPart(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output,
	take func(want, cur *corev1.Pod) (*corev1.Pod, field.ErrorList), mark func(context.Context) context.Context) {
	var result runtime.Object
	var err error
	switch info.Verb {
	case "get":
		result, err = h.get(ctx, r, info)
	case "update", "patch":
		result, err = h.updatePodSpecPart(ctx, r, info, take, mark)
	default:
		err = methodNotSupported(h.gr, info.Verb)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.ensureKind(result)
	h.codecs.writeObject(w, http.StatusOK, out, result)
}

// updatePodSpecPart is the update and patch of a subresource that writes
// part of a pod's spec (ephemeralcontainers, resize): the desired pod
// (the body, or the patch applied to the stored pod) goes through take,
// which picks the part and may refuse it, then through the pod's update
// rules with ctx marked by mark, managedFields and admission.
func (h *resourceHandler) updatePodSpecPart(ctx context.Context, r *http.Request, info RequestInfo, take func(want, cur *corev1.Pod) (*corev1.Pod, field.ErrorList), mark func(context.Context) context.Context) (runtime.Object, error) {
	var desired runtime.Object
	var patch []byte
	var pt string
	if info.Verb == "update" {
		obj, err := h.decodeUpdateBody(ctx, r, info)
		if err != nil {
			return nil, err
		}
		desired = obj
	} else {
		t, err := patchType(r)
		if err != nil {
			return nil, err
		}
		pt = string(t)
		if patch, err = readBody(r); err != nil {
			return nil, err
		}
	}
	return h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		want := desired
		if info.Verb == "patch" {
			p, warnings, err := h.patchObject(r, typesPatch(pt), patch, cur, h.res.New, h.gvk)
			if err != nil {
				return nil, err
			}
			setWarnings(ctx, warnings)
			want = p
		}
		wm, err := meta.Accessor(want)
		if err != nil {
			return nil, err
		}
		curPod := cur.(*corev1.Pod)
		if rv := wm.GetResourceVersion(); info.Verb == "update" && rv != "" && rv != curPod.ResourceVersion {
			return nil, apierrors.NewConflict(h.gr, curPod.Name, fmt.Errorf("%s", storage.OptimisticLockMessage))
		}
		next, errs := take(want.(*corev1.Pod), curPod)
		if len(errs) > 0 {
			return nil, h.invalid(curPod.Name, errs)
		}
		return h.finishUpdate(mark(ctx), r, info, next, cur)
	})
}
