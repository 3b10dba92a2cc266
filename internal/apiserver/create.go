package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

func dryRun(r *http.Request) (bool, error) {
	vals := r.URL.Query()["dryRun"]
	for _, v := range vals {
		if v != "All" {
			return false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dryRun value %q: supported values are \"All\"", v))
		}
	}
	return len(vals) > 0, nil
}

func setWarnings(ctx context.Context, ws []string) {
	if rw := warningsFrom(ctx); rw != nil {
		for _, w := range ws {
			rw.add(w)
		}
	}
}

func (h *resourceHandler) validateMeta(obj runtime.Object) field.ErrorList {
	m, _ := meta.Accessor(obj)
	return apivalidation.ValidateObjectMetaAccessor(m, h.res.Namespaced, h.res.Strategy.ValidateName, field.NewPath("metadata"))
}

func (h *resourceHandler) create(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	if _, err := dryRun(r); err != nil {
		return nil, err
	}
	obj, err := h.readObject(ctx, r)
	if err != nil {
		return nil, err
	}
	return h.createObject(ctx, r, info, obj, false)
}

// readObject decodes the request body as the resource's type; unknown
// fields become Warning headers unless fieldValidation says otherwise.
func (h *resourceHandler) readObject(ctx context.Context, r *http.Request) (runtime.Object, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	obj := h.res.New()
	warnings, err := h.codecs.decodeBody(r, body, obj, h.gvk)
	if err == nil {
		warnings, err = h.pruneUnknown(r, obj, warnings)
	}
	if err != nil {
		return nil, err
	}
	setWarnings(ctx, warnings)
	return obj, nil
}

// createObject runs the create path for a decoded object. managed says
// managedFields are already set (server-side apply).
func (h *resourceHandler) createObject(ctx context.Context, r *http.Request, info RequestInfo, obj runtime.Object, managed bool) (runtime.Object, error) {
	dry, err := dryRun(r)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if h.res.Namespaced {
		if m.GetNamespace() == "" {
			m.SetNamespace(info.Namespace)
		} else if m.GetNamespace() != info.Namespace {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		m.SetNamespace("")
	}
	if m.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(0)
	m.SetSelfLink("")
	if !managed {
		if obj, err = h.trackUpdate(r, "", h.res.New(), obj); err != nil {
			return nil, err
		}
		m, _ = meta.Accessor(obj)
	}
	// Upstream's order: defaults, mutating admission, the strategy's
	// rules, validation, validating admission. PrepareForCreate is both
	// the defaults and the rules here, so it runs again (it is idempotent)
	// once admission has changed the object: a pod's QoS class follows the
	// resources LimitRanger set.
	h.res.Strategy.PrepareForCreate(ctx, obj)
	a := h.admissionAttributes(ctx, admission.Create, obj, nil, info, dry)
	if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
		return nil, err
	}
	h.res.Strategy.PrepareForCreate(ctx, obj)
	errs := h.validateMeta(obj)
	errs = append(errs, h.res.Strategy.Validate(ctx, obj)...)
	if len(errs) > 0 {
		return nil, h.invalid(m.GetName(), errs)
	}
	if err := h.runAdmission(ctx, a, h.srv.admission.Validate); err != nil {
		return nil, err
	}
	var undo func()
	if bc, ok := h.res.Strategy.(registry.BeforeCreater); ok {
		undo, err = bc.BeforeCreate(ctx, obj, dry)
		if err != nil {
			return nil, err
		}
	}
	if dry {
		if undo != nil {
			undo()
		}
		return obj, nil
	}
	out := h.res.New()
	if err := h.store.Create(ctx, h.key(m.GetNamespace(), m.GetName()), obj, out); err != nil {
		if undo != nil {
			undo()
		}
		if storage.IsExists(err) && m.GetGenerateName() != "" && info.Name == "" {
			return nil, apierrors.NewAlreadyExists(h.gr, m.GetName())
		}
		return nil, h.apiErr(err, m.GetName())
	}
	return out, nil
}
