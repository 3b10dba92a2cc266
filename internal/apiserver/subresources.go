package apiserver

import (
	"context"
	"fmt"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podregistry "github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

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

func (h *resourceHandler) serveScale(ctx context.Context, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
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
			if want.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, info.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
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

// serveBinding assigns a pod to a node (pods/binding), as the scheduler
// does.
func (h *resourceHandler) serveBinding(ctx context.Context, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	body, err := readBody(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	b := &corev1.Binding{}
	if _, err := h.codecs.decodeBody(r, body, b, corev1.SchemeGroupVersion.WithKind("Binding")); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if b.Name == "" {
		b.Name = info.Name
	}
	if b.Name != info.Name {
		h.codecs.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, info.Name)))
		return
	}
	if b.Target.Name == "" {
		h.codecs.writeError(w, apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")}))
		return
	}
	_, err = h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		pod := cur.DeepCopyObject().(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(h.gr, pod.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		if err := podregistry.ApplyBinding(pod, b); err != nil {
			return nil, apierrors.NewConflict(h.gr, pod.Name, err)
		}
		return pod, nil
	})
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.writeObject(w, http.StatusCreated, output{mediaType: out.mediaType}, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess, Code: http.StatusCreated,
	})
}

// finalize applies namespaces/finalize: only spec.finalizers change.
func (h *resourceHandler) finalize(ctx context.Context, next, cur runtime.Object) (runtime.Object, error) {
	want, ok := next.(*corev1.Namespace)
	if !ok {
		return nil, methodNotSupported(h.gr, "finalize")
	}
	ns := cur.DeepCopyObject().(*corev1.Namespace)
	if want.ResourceVersion != "" && want.ResourceVersion != ns.ResourceVersion {
		return nil, apierrors.NewConflict(h.gr, ns.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	var errs field.ErrorList
	for i, f := range want.Spec.Finalizers {
		if f == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "finalizers").Index(i), ""))
		}
	}
	if len(errs) > 0 {
		return nil, h.invalid(ns.Name, errs)
	}
	ns.Spec.Finalizers = want.Spec.Finalizers
	return ns, nil
}

func namespaceHasSpecFinalizers(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

func markNamespaceTerminating(obj runtime.Object) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
}
