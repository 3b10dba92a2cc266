package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// deleteOptions reads DeleteOptions from the body or the query.
func (h *resourceHandler) deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := h.codecs.decodeOptions(r, body, opts); err != nil {
			return nil, err
		}
	}
	q := r.URL.Query()
	if s := q.Get("gracePeriodSeconds"); s != "" {
		var g int64
		if _, err := fmt.Sscan(s, &g); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", s))
		}
		opts.GracePeriodSeconds = &g
	}
	if s := q.Get("propagationPolicy"); s != "" {
		p := metav1.DeletionPropagation(s)
		opts.PropagationPolicy = &p
	}
	if s := q.Get("orphanDependents"); s != "" {
		b := boolParam(s)
		opts.OrphanDependents = &b
	}
	if vals := q["dryRun"]; len(vals) > 0 {
		opts.DryRun = vals
	}
	for _, v := range opts.DryRun {
		if v != "All" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Invalid dryRun value %q: supported values are \"All\"", v))
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
		default:
			return nil, h.invalid("", field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, []string{"Foreground", "Background", "Orphan"})})
		}
		if opts.OrphanDependents != nil {
			return nil, h.invalid("", field.ErrorList{field.Invalid(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, "orphanDependents and deletionPropagation cannot be both set")})
		}
	}
	return opts, nil
}

func (h *resourceHandler) delete(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, int, error) {
	opts, err := h.deleteOptions(r)
	if err != nil {
		return nil, 0, err
	}
	obj, deleted, err := h.deleteOne(ctx, info.Namespace, info.Name, opts)
	if err != nil {
		return nil, 0, err
	}
	if deleted && !h.res.ReturnDeletedObject {
		m, _ := meta.Accessor(obj)
		return &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: m.GetName(), Group: h.gr.Group, Kind: h.res.Resource, UID: m.GetUID()},
		}, http.StatusOK, nil
	}
	return obj, http.StatusOK, nil
}

// deleteOne deletes, or marks for deletion, one object, as
// decideDeletion decides. deleted says whether it is gone from the store.
func (h *resourceHandler) deleteOne(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return h.deleteAdmitted(ctx, ns, name, opts, true)
}

// deleteWithoutAdmission is deleteOne for a delete some other request's
// admission decided (pods/eviction, as upstream's eviction deletes the pod
// with no further admission).
func (h *resourceHandler) deleteWithoutAdmission(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return h.deleteAdmitted(ctx, ns, name, opts, false)
}

func (h *resourceHandler) deleteAdmitted(ctx context.Context, ns, name string, opts *metav1.DeleteOptions, admit bool) (runtime.Object, bool, error) {
	key := h.key(ns, name)
	dry := len(opts.DryRun) > 0
	for attempt := 0; attempt < 10; attempt++ {
		cur := h.res.New()
		if err := h.store.Get(ctx, key, cur); err != nil {
			return nil, false, h.apiErr(err, name)
		}
		if admit {
			if err := h.admit(ctx, admission.Delete, nil, cur, RequestInfo{Namespace: ns, Name: name}, dry); err != nil {
				return nil, false, err
			}
		}
		m, _ := meta.Accessor(cur)
		rv := m.GetResourceVersion()
		d := decideDeletion(ctx, h.res.Strategy, cur, opts, h.srv.clock.Now())
		switch d.action {
		case refuseDelete:
			return nil, false, apierrors.NewConflict(h.gr, name, d.err)
		case alreadyMarked:
			return cur, false, nil
		case markForDeletion:
			if dry {
				return d.object, false, nil
			}
			out := h.res.New()
			err := h.store.GuaranteedUpdate(ctx, key, out, &storage.Preconditions{ResourceVersion: &rv}, func(runtime.Object) (runtime.Object, error) { return d.object, nil })
			if storage.IsConflict(err) {
				continue
			}
			if err != nil {
				return nil, false, h.apiErr(err, name)
			}
			return out, false, nil
		}
		if dry {
			return cur, true, nil
		}
		out := h.res.New()
		err := h.store.Delete(ctx, key, out, &storage.Preconditions{ResourceVersion: &rv})
		if storage.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, false, h.apiErr(err, name)
		}
		if ad, ok := h.res.Strategy.(registry.AfterDeleter); ok {
			ad.AfterDelete(ctx, out)
		}
		return out, true, nil
	}
	return nil, false, apierrors.NewConflict(h.gr, name, fmt.Errorf("too many concurrent changes, try again"))
}

func (h *resourceHandler) deleteCollection(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	opts, err := h.deleteOptions(r)
	if err != nil {
		return nil, err
	}
	p, err := parseListParams(r.URL.Query(), h.fieldSet)
	if err != nil {
		return nil, err
	}
	p.Limit, p.Continue = 0, ""
	list, err := h.list(ctx, info.Namespace, p)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var deleted []runtime.Object
	for _, it := range items {
		m, _ := meta.Accessor(it)
		obj, _, err := h.deleteOne(ctx, m.GetNamespace(), m.GetName(), opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		deleted = append(deleted, obj)
	}
	out := h.res.NewList()
	if err := meta.SetList(out, deleted); err != nil {
		return nil, err
	}
	h.codecs.ensureKind(out)
	return out, nil
}
