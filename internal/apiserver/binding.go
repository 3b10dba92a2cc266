package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	podregistry "github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// serveBinding assigns a pod to a node (pods/binding), as the scheduler
// does. Admission sees the Binding (CREATE of pods/binding): mutating
// before the checks, validating just before the pod is bound, as
// upstream's BindingREST.
func serveBinding(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
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
	dry, err := dryRun(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if err := objectNamespace(b, info.Namespace); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if b.Name == "" {
		b.Name = info.Name
	}
	a := h.subresourceAdmission(ctx, admission.Create, b, info, dry)
	if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if b.Name != info.Name {
		h.codecs.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", b.Name, info.Name)))
		return
	}
	if err := h.bind(ctx, r, info.Namespace, b, a); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.writeObject(w, http.StatusCreated, output{mediaType: out.mediaType}, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess, Code: http.StatusCreated,
	})
}

// bindPod serves the core/v1 bindings resource (registry.Deps.BindPod):
// the same binding as pods/binding, without dryRun; admission sees a
// CREATE of bindings.
func (s *Server) bindPod(ctx context.Context, b *corev1.Binding) error {
	h := s.handlers[corev1.SchemeGroupVersion.WithResource("pods")]
	bh := s.handlers[corev1.SchemeGroupVersion.WithResource("bindings")]
	if h == nil || bh == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, b.Name)
	}
	a := bh.subresourceAdmission(ctx, admission.Create, b, RequestInfo{Namespace: b.Namespace, Name: b.Name}, false)
	if err := bh.runAdmission(ctx, a, s.admission.Admit); err != nil {
		return err
	}
	return h.bind(ctx, &http.Request{URL: &url.URL{}}, b.Namespace, b, a)
}

// bind assigns the pod b names to b.Target: 422 without a target node,
// 409 when the UID differs or the pod is already bound. The validating
// phase of admission (a) runs once the Binding is valid.
func (h *resourceHandler) bind(ctx context.Context, r *http.Request, ns string, b *corev1.Binding, a *admission.Attributes) error {
	if b.Target.Name == "" {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, b.Name, field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
	}
	if err := h.runAdmission(ctx, a, h.srv.admission.Validate); err != nil {
		return err
	}
	_, err := h.updateWith(ctx, r, ns, b.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		pod := cur.DeepCopyObject().(*corev1.Pod)
		if b.UID != "" && b.UID != pod.UID {
			return nil, apierrors.NewConflict(h.gr, pod.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		}
		if err := podregistry.ApplyBinding(pod, b); err != nil {
			return nil, apierrors.NewConflict(h.gr, pod.Name, err)
		}
		return pod, nil
	})
	return err
}
