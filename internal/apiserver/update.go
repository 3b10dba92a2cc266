package apiserver

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// updateMode says which rules an update follows.
type updateMode int

const (
	modeMain updateMode = iota
	modeStatus
)

// prepareUpdate carries the system fields from cur into next, runs the
// strategy's update rules and validation (no admission: the scale
// subresource's path).
func (h *resourceHandler) prepareUpdate(ctx context.Context, next, cur runtime.Object, mode updateMode) error {
	if err := h.prepareUpdateFields(ctx, next, cur, mode); err != nil {
		return err
	}
	return h.validateUpdate(ctx, next, cur, mode)
}

// admitUpdate is an update's path from the transformed object to the one
// written, in upstream's order: the strategy's update rules (the
// defaults), managedFields (track), mutating admission, the rules again
// (idempotent: a spec changed by admission bumps the generation),
// validation, validating admission.
func (h *resourceHandler) admitUpdate(ctx context.Context, info RequestInfo, next, cur runtime.Object, mode updateMode, dry bool, track func(runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	if err := h.prepareUpdateFields(ctx, next, cur, mode); err != nil {
		return nil, err
	}
	if track != nil {
		var err error
		if next, err = track(next); err != nil {
			return nil, err
		}
	}
	a := h.admissionAttributes(ctx, admission.Update, next, cur, info, dry)
	if err := h.runAdmission(ctx, a, h.srv.admission.Admit); err != nil {
		return nil, err
	}
	if err := h.prepareUpdateFields(ctx, next, cur, mode); err != nil {
		return nil, err
	}
	if err := h.validateUpdate(ctx, next, cur, mode); err != nil {
		return nil, err
	}
	if err := h.runAdmission(ctx, a, h.srv.admission.Validate); err != nil {
		return nil, err
	}
	return next, nil
}

// prepareUpdateFields carries the system fields from cur into next and
// runs the strategy's update rules.
func (h *resourceHandler) prepareUpdateFields(ctx context.Context, next, cur runtime.Object, mode updateMode) error {
	nm, err := meta.Accessor(next)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	cm, _ := meta.Accessor(cur)
	if rv := nm.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return apierrors.NewConflict(h.gr, cm.GetName(), fmt.Errorf("%s", storage.OptimisticLockMessage))
	}
	nm.SetResourceVersion(cm.GetResourceVersion())
	if nm.GetUID() == "" {
		// A uid set to another (a patch's) fails validation: immutable.
		nm.SetUID(cm.GetUID())
	}
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	nm.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
	nm.SetGeneration(cm.GetGeneration())
	nm.SetSelfLink("")
	if !h.res.Namespaced {
		nm.SetNamespace("")
	}
	if mode == modeStatus {
		h.res.Strategy.PrepareForStatusUpdate(ctx, next, cur)
	} else {
		h.res.Strategy.PrepareForUpdate(ctx, next, cur)
	}
	return nil
}

// validateUpdate runs the metadata and the strategy's validation of an
// update.
func (h *resourceHandler) validateUpdate(ctx context.Context, next, cur runtime.Object, mode updateMode) error {
	nm, err := meta.Accessor(next)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	cm, _ := meta.Accessor(cur)
	var errs field.ErrorList
	switch mode {
	case modeStatus:
		errs = apivalidation.ValidateObjectMetaAccessorUpdate(nm, cm, field.NewPath("metadata"))
		errs = append(errs, h.res.Strategy.ValidateStatusUpdate(ctx, next, cur)...)
	default:
		errs = h.validateMeta(next)
		errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(nm, cm, field.NewPath("metadata"))...)
		errs = append(errs, h.res.Strategy.ValidateUpdate(ctx, next, cur)...)
	}
	if cm.GetDeletionTimestamp() != nil {
		errs = append(errs, apivalidation.ValidateNoNewFinalizers(nm.GetFinalizers(), cm.GetFinalizers(), field.NewPath("metadata", "finalizers"))...)
	}
	if len(errs) > 0 {
		return h.invalid(nm.GetName(), errs)
	}
	return nil
}

// transform computes the object an update writes from the current one.
type transform func(ctx context.Context, cur runtime.Object) (runtime.Object, error)

// updateWith runs a read-modify-write, honouring dryRun, the strategy's
// update hooks, and finishing the deletion of an object whose last
// finalizer the update removed.
func (h *resourceHandler) updateWith(ctx context.Context, r *http.Request, ns, name string, fn transform) (runtime.Object, error) {
	dry, err := dryRun(r)
	if err != nil {
		return nil, err
	}
	key := h.key(ns, name)
	var undo func()
	tryUpdate := func(cur runtime.Object) (runtime.Object, error) {
		if undo != nil {
			undo()
			undo = nil
		}
		next, err := fn(ctx, cur)
		if err != nil {
			return nil, err
		}
		if bu, ok := h.res.Strategy.(registry.BeforeUpdater); ok {
			undo, err = bu.BeforeUpdate(ctx, next, cur, dry)
			if err != nil {
				return nil, err
			}
		}
		return next, nil
	}
	if dry {
		cur := h.res.New()
		if err := h.store.Get(ctx, key, cur); err != nil {
			return nil, h.apiErr(err, name)
		}
		next, err := tryUpdate(cur)
		if undo != nil {
			undo()
		}
		if err != nil {
			return nil, h.apiErr(err, name)
		}
		return next, nil
	}
	out := h.res.New()
	if err := h.store.GuaranteedUpdate(ctx, key, out, nil, tryUpdate); err != nil {
		if undo != nil {
			undo()
		}
		return nil, h.apiErr(err, name)
	}
	return h.finishDeletionIfDone(ctx, out)
}

// finishDeletionIfDone deletes an object that is marked for deletion and
// has nothing left holding it (no finalizers, grace over).
func (h *resourceHandler) finishDeletionIfDone(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	if !deletionComplete(h.res.Strategy, obj) {
		return obj, nil
	}
	m, _ := meta.Accessor(obj)
	rv := m.GetResourceVersion()
	uid := m.GetUID()
	err := h.store.Delete(ctx, h.key(m.GetNamespace(), m.GetName()), nil, &storage.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !storage.IsNotFound(err) && !storage.IsConflict(err) {
		return nil, h.apiErr(err, m.GetName())
	}
	if err == nil {
		if ad, ok := h.res.Strategy.(registry.AfterDeleter); ok {
			ad.AfterDelete(ctx, obj)
		}
	}
	return obj, nil
}

func (h *resourceHandler) decodeUpdateBody(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	obj, err := h.readObject(ctx, r)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() != info.Name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
	}
	if h.res.Namespaced {
		if m.GetNamespace() == "" {
			m.SetNamespace(info.Namespace)
		} else if m.GetNamespace() != info.Namespace {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	}
	return obj, nil
}

func (h *resourceHandler) update(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	handler := h.subresourceHandler(info.Subresource)
	if handler != "" && handler != registry.HandleStatus && handler != registry.HandleFinalize {
		return nil, methodNotSupported(h.gr, info.Verb)
	}
	obj, err := h.decodeUpdateBody(ctx, r, info)
	if err != nil {
		return nil, err
	}
	return h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		next := obj.DeepCopyObject()
		// The body's uid is a precondition, as upstream: a writer holding
		// an object since deleted and created again under the same name
		// gets a conflict instead of writing over the new one.
		if uid, cm := uidOf(next), uidOf(cur); uid != "" && uid != cm {
			return nil, apierrors.NewConflict(h.gr, info.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cm))
		}
		if handler == registry.HandleFinalize {
			return h.finalize(next, cur)
		}
		return h.finishUpdate(ctx, r, info, next, cur)
	})
}

// uidOf is obj's uid, "" when it has none.
func uidOf(obj runtime.Object) types.UID {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetUID()
}

// modeFor is the update rules a subresource follows.
func (h *resourceHandler) modeFor(subresource string) updateMode {
	if h.subresourceHandler(subresource) == registry.HandleStatus {
		return modeStatus
	}
	return modeMain
}

// finalize applies an update of the finalize subresource through the
// strategy's SpecFinalizer: only the spec finalizers change.
func (h *resourceHandler) finalize(want, cur runtime.Object) (runtime.Object, error) {
	sf, ok := h.res.Strategy.(registry.SpecFinalizer)
	if !ok {
		return nil, methodNotSupported(h.gr, "update")
	}
	wm, err := meta.Accessor(want)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	cm, _ := meta.Accessor(cur)
	if rv := wm.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return nil, apierrors.NewConflict(h.gr, cm.GetName(), fmt.Errorf("%s", storage.OptimisticLockMessage))
	}
	next, errs := sf.Finalize(want, cur.DeepCopyObject())
	if len(errs) > 0 {
		return nil, h.invalid(cm.GetName(), errs)
	}
	return next, nil
}

// finishUpdate runs the last steps every PUT and PATCH shares: the
// strategy's update rules, managedFields, admission and validation
// (admitUpdate).
func (h *resourceHandler) finishUpdate(ctx context.Context, r *http.Request, info RequestInfo, next, cur runtime.Object) (runtime.Object, error) {
	dry, _ := dryRun(r)
	return h.admitUpdate(ctx, info, next, cur, h.modeFor(info.Subresource), dry, func(next runtime.Object) (runtime.Object, error) {
		return h.trackUpdate(r, info.Subresource, cur, next)
	})
}
