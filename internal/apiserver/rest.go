package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// resourceHandler serves one resource's REST verbs over the store.
type resourceHandler struct {
	res      registry.Resource
	gvk      schema.GroupVersionKind
	gr       schema.GroupResource
	store    *storage.Cacher
	codecs   *codecs
	srv      *Server
	fieldSet map[string]bool
	scaler   registry.Scaler
	fields   *fieldManagers
}

func newResourceHandler(res registry.Resource, store *storage.Cacher, c *codecs, srv *Server) *resourceHandler {
	h := &resourceHandler{
		res: res, store: store, codecs: c, srv: srv,
		gvk: res.GroupVersion.WithKind(res.Kind),
		gr:  schema.GroupResource{Group: res.GroupVersion.Group, Resource: res.Resource},
	}
	h.fieldSet = map[string]bool{"metadata.name": true}
	if res.Namespaced {
		h.fieldSet["metadata.namespace"] = true
	}
	for k := range res.Strategy.FieldSet(res.New()) {
		h.fieldSet[k] = true
	}
	if s, ok := res.Strategy.(registry.Scaler); ok {
		h.scaler = s
	}
	return h
}

func (h *resourceHandler) prefix() string { return "/registry/" + h.res.StoragePrefix + "/" }

func (h *resourceHandler) key(ns, name string) string {
	if h.res.Namespaced {
		return h.prefix() + ns + "/" + name
	}
	return h.prefix() + name
}

func (h *resourceHandler) listPrefix(ns string) string {
	if h.res.Namespaced && ns != "" {
		return h.prefix() + ns + "/"
	}
	return h.prefix()
}

// attrs are the labels and fields selectors match against.
func (h *resourceHandler) attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	f := h.res.Strategy.FieldSet(obj)
	if f == nil {
		f = fields.Set{}
	}
	f["metadata.name"] = m.GetName()
	if h.res.Namespaced {
		f["metadata.namespace"] = m.GetNamespace()
	}
	return labels.Set(m.GetLabels()), f, nil
}

func (h *resourceHandler) apiErr(err error, name string) error {
	return storage.ToAPIError(err, h.gr, name)
}

func (h *resourceHandler) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(h.gvk.GroupKind(), name, errs)
}

// serve dispatches one request to the verb's method.
func (h *resourceHandler) serve(w http.ResponseWriter, r *http.Request, info RequestInfo) {
	if h.res.Namespaced && info.Namespace == "" && info.Name != "" {
		h.codecs.writeError(w, apierrors.NewNotFound(h.gr, info.Name))
		return
	}
	if !h.res.Namespaced && info.Namespace != "" && info.Resource != "namespaces" {
		h.codecs.writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: info.Resource}, ""))
		return
	}
	if info.Subresource != "" && !h.res.Subresources[info.Subresource] {
		h.codecs.writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: h.gr.Group, Resource: h.gr.Resource + "/" + info.Subresource}, info.Name))
		return
	}
	out, err := negotiateOutput(r)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	ctx := r.Context()
	if info.Subresource == "" && !h.allows(info.Verb) {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	if h.store == nil {
		h.serveVirtual(ctx, w, r, info, out)
		return
	}
	if info.Subresource != "" && h.srv.subresources != nil {
		if fn := h.srv.subresources[h.gr.String()+"/"+info.Subresource]; fn != nil {
			fn(ctx, h, w, r, info, out)
			return
		}
	}
	switch {
	case info.Subresource == "scale":
		h.serveScale(ctx, w, r, info, out)
		return
	case info.Subresource == "binding":
		if info.Verb != "create" {
			h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
			return
		}
		h.serveBinding(ctx, w, r, info, out)
		return
	}
	var obj runtime.Object
	code := http.StatusOK
	if wrongTarget(info) {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	switch info.Verb {
	case "get":
		obj, err = h.get(ctx, r, info)
	case "list":
		p, perr := parseListParams(r.URL.Query(), h.fieldSet)
		if perr != nil {
			err = perr
			break
		}
		if out.as == "" && !out.pretty && (out.mediaType == mediaJSON || out.mediaType == mediaProtobuf) && !storage.UseEtcdForList(p.ListOptions) {
			h.serveCachedList(ctx, w, info.Namespace, p, out)
			return
		}
		obj, err = h.list(ctx, info.Namespace, p)
		if err == nil && out.as != "" {
			obj, err = h.asList(obj, out, p)
		}
		if err == nil {
			h.codecs.writeObject(w, code, out, obj)
			return
		}
	case "watch":
		h.serveWatch(w, r, info, out)
		return
	case "create":
		if info.Subresource != "" {
			err = methodNotSupported(h.gr, info.Verb)
			break
		}
		obj, err = h.create(ctx, r, info)
		code = http.StatusCreated
	case "update":
		obj, err = h.update(ctx, r, info)
	case "patch":
		obj, err = h.patch(ctx, r, info)
	case "delete":
		if info.Subresource != "" {
			err = methodNotSupported(h.gr, info.Verb)
			break
		}
		obj, code, err = h.delete(ctx, r, info)
	case "deletecollection":
		obj, err = h.deleteCollection(ctx, r, info)
	default:
		err = methodNotSupported(h.gr, info.Verb)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if out.as != "" {
		obj, err = h.asObject(obj, out)
		if err != nil {
			h.codecs.writeError(w, err)
			return
		}
	}
	h.codecs.writeObject(w, code, out, obj)
}

func methodNotSupported(gr schema.GroupResource, verb string) error {
	return apierrors.NewMethodNotSupported(gr, verb)
}

func (h *resourceHandler) get(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, error) {
	obj := h.res.New()
	if err := h.store.GetRV(ctx, h.key(info.Namespace, info.Name), r.URL.Query().Get("resourceVersion"), obj); err != nil {
		return nil, h.apiErr(err, info.Name)
	}
	return obj, nil
}

func (h *resourceHandler) list(ctx context.Context, ns string, p listParams) (runtime.Object, error) {
	p.Predicate.GetAttrs = h.attrs
	list := h.res.NewList()
	if err := h.store.List(ctx, h.listPrefix(ns), p.ListOptions, list); err != nil {
		return nil, h.apiErr(err, "")
	}
	h.codecs.ensureKind(list)
	return list, nil
}

// namespaceCheck refuses creates in a namespace that does not exist or is
// being deleted, as upstream's NamespaceLifecycle admission does.
func (h *resourceHandler) namespaceCheck(ctx context.Context, ns string) error {
	if !h.res.Namespaced {
		return nil
	}
	nsObj, err := h.srv.getNamespace(ctx, ns)
	if err != nil {
		return err
	}
	if nsObj.DeletionTimestamp != nil || nsObj.Status.Phase == "Terminating" {
		return apierrors.NewForbidden(h.gr, "", fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}

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
	h.res.Strategy.PrepareForCreate(ctx, obj)
	errs := h.validateMeta(obj)
	errs = append(errs, h.res.Strategy.Validate(ctx, obj)...)
	if len(errs) > 0 {
		return nil, h.invalid(m.GetName(), errs)
	}
	if err := h.namespaceCheck(ctx, m.GetNamespace()); err != nil {
		return nil, err
	}
	if err := h.srv.admit(ctx, h, obj, nil, "create"); err != nil {
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

// updateMode says which rules an update follows.
type updateMode int

const (
	modeMain updateMode = iota
	modeStatus
)

// prepareUpdate carries the system fields from cur into next and runs the
// strategy's update rules and validation.
func (h *resourceHandler) prepareUpdate(ctx context.Context, next, cur runtime.Object, mode updateMode) error {
	nm, err := meta.Accessor(next)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	cm, _ := meta.Accessor(cur)
	if rv := nm.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return apierrors.NewConflict(h.gr, cm.GetName(), fmt.Errorf("%s", storage.OptimisticLockMessage))
	}
	nm.SetResourceVersion(cm.GetResourceVersion())
	nm.SetUID(cm.GetUID())
	nm.SetCreationTimestamp(cm.GetCreationTimestamp())
	nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	nm.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
	nm.SetGeneration(cm.GetGeneration())
	nm.SetSelfLink("")
	if !h.res.Namespaced {
		nm.SetNamespace("")
	}
	var errs field.ErrorList
	switch mode {
	case modeStatus:
		h.res.Strategy.PrepareForStatusUpdate(ctx, next, cur)
		errs = apivalidation.ValidateObjectMetaAccessorUpdate(nm, cm, field.NewPath("metadata"))
		errs = append(errs, h.res.Strategy.ValidateStatusUpdate(ctx, next, cur)...)
	default:
		h.res.Strategy.PrepareForUpdate(ctx, next, cur)
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
	m, _ := meta.Accessor(obj)
	if m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 || h.hasSpecFinalizers(obj) {
		return obj, nil
	}
	if g := m.GetDeletionGracePeriodSeconds(); g != nil && *g > 0 {
		return obj, nil
	}
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
	if info.Subresource != "" && info.Subresource != "status" && info.Subresource != "finalize" {
		return nil, methodNotSupported(h.gr, info.Verb)
	}
	obj, err := h.decodeUpdateBody(ctx, r, info)
	if err != nil {
		return nil, err
	}
	return h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		next := obj.DeepCopyObject()
		if info.Subresource == "finalize" {
			return h.finalize(ctx, next, cur)
		}
		return h.finishUpdate(ctx, r, info.Subresource, next, cur)
	})
}

// modeFor is the update rules a subresource follows.
func modeFor(subresource string) updateMode {
	if subresource == "status" {
		return modeStatus
	}
	return modeMain
}

// finishUpdate runs the last steps every PUT and PATCH shares: the
// strategy's update rules and validation, managedFields, admission.
func (h *resourceHandler) finishUpdate(ctx context.Context, r *http.Request, subresource string, next, cur runtime.Object) (runtime.Object, error) {
	if err := h.prepareUpdate(ctx, next, cur, modeFor(subresource)); err != nil {
		return nil, err
	}
	next, err := h.trackUpdate(r, subresource, cur, next)
	if err != nil {
		return nil, err
	}
	if err := h.srv.admit(ctx, h, next, cur, "update"); err != nil {
		return nil, err
	}
	return next, nil
}

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
	if deleted && h.res.Resource != "pods" {
		m, _ := meta.Accessor(obj)
		return &metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusSuccess,
			Details:  &metav1.StatusDetails{Name: m.GetName(), Group: h.gr.Group, Kind: h.res.Resource, UID: m.GetUID()},
		}, http.StatusOK, nil
	}
	return obj, http.StatusOK, nil
}

// hasSpecFinalizers: namespaces also wait for spec.finalizers.
func (h *resourceHandler) hasSpecFinalizers(obj runtime.Object) bool {
	if ns, ok := obj.(interface{ SpecFinalizers() []string }); ok {
		return len(ns.SpecFinalizers()) > 0
	}
	return namespaceHasSpecFinalizers(obj)
}

// deleteOne deletes, or marks for deletion, one object. deleted says
// whether it is gone from the store.
func (h *resourceHandler) deleteOne(ctx context.Context, ns, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key := h.key(ns, name)
	dry := len(opts.DryRun) > 0
	for attempt := 0; attempt < 10; attempt++ {
		cur := h.res.New()
		if err := h.store.Get(ctx, key, cur); err != nil {
			return nil, false, h.apiErr(err, name)
		}
		m, _ := meta.Accessor(cur)
		if pre := opts.Preconditions; pre != nil {
			if pre.UID != nil && *pre.UID != m.GetUID() {
				return nil, false, apierrors.NewConflict(h.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, m.GetUID()))
			}
			if pre.ResourceVersion != nil && *pre.ResourceVersion != m.GetResourceVersion() {
				return nil, false, apierrors.NewConflict(h.gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *pre.ResourceVersion, m.GetResourceVersion()))
			}
		}
		next, graceful := h.markForDeletion(ctx, cur, opts)
		if graceful {
			if dry {
				return next, false, nil
			}
			out := h.res.New()
			rv := m.GetResourceVersion()
			err := h.store.GuaranteedUpdate(ctx, key, out, &storage.Preconditions{ResourceVersion: &rv}, func(runtime.Object) (runtime.Object, error) { return next, nil })
			if storage.IsConflict(err) {
				continue
			}
			if err != nil {
				return nil, false, h.apiErr(err, name)
			}
			if h.gr == (schema.GroupResource{Resource: "namespaces"}) {
				h.srv.noteNamespaceDeleting(name)
			}
			return out, false, nil
		}
		if dry {
			return cur, true, nil
		}
		rv := m.GetResourceVersion()
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

// markForDeletion decides whether a delete only marks the object (grace
// period, finalizers) and returns the marked copy if so.
func (h *resourceHandler) markForDeletion(ctx context.Context, cur runtime.Object, opts *metav1.DeleteOptions) (runtime.Object, bool) {
	next := cur.DeepCopyObject()
	m, _ := meta.Accessor(next)
	now := time.Now()

	graceful := false
	var grace int64
	if gd, ok := h.res.Strategy.(registry.GracefulDeleter); ok {
		o := *opts
		if gd.CheckGracefulDelete(ctx, next, &o) && o.GracePeriodSeconds != nil && *o.GracePeriodSeconds > 0 {
			graceful = true
			grace = *o.GracePeriodSeconds
		}
	}
	// Finalizers the propagation policy asks for (processed by the garbage
	// collector).
	fins := m.GetFinalizers()
	policy := opts.PropagationPolicy
	if gc, ok := h.res.Strategy.(registry.GarbageCollectionPolicy); ok && policy == nil && opts.OrphanDependents == nil {
		p := gc.DefaultPropagation()
		policy = &p
	}
	if opts.OrphanDependents != nil && *opts.OrphanDependents {
		p := metav1.DeletePropagationOrphan
		policy = &p
	}
	if policy != nil && m.GetDeletionTimestamp() == nil {
		switch *policy {
		case metav1.DeletePropagationForeground:
			fins = addString(removeString(fins, metav1.FinalizerOrphanDependents), metav1.FinalizerDeleteDependents)
		case metav1.DeletePropagationOrphan:
			fins = addString(removeString(fins, metav1.FinalizerDeleteDependents), metav1.FinalizerOrphanDependents)
		}
		m.SetFinalizers(fins)
	}
	pending := len(fins) > 0 || h.hasSpecFinalizers(next)

	if graceful {
		if dt := m.GetDeletionTimestamp(); dt != nil {
			// Already terminating: a shorter grace moves the deadline in.
			if g := m.GetDeletionGracePeriodSeconds(); g != nil && *g <= grace {
				return cur, true
			}
		}
		t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		m.SetDeletionTimestamp(&t)
		m.SetDeletionGracePeriodSeconds(&grace)
		markNamespaceTerminating(next)
		return next, true
	}
	if pending {
		if m.GetDeletionTimestamp() == nil {
			t := metav1.NewTime(now)
			m.SetDeletionTimestamp(&t)
		}
		zero := int64(0)
		m.SetDeletionGracePeriodSeconds(&zero)
		markNamespaceTerminating(next)
		if apiequality.Semantic.DeepEqual(next, cur) {
			return cur, true
		}
		return next, true
	}
	return nil, false
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

func addString(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

func removeString(ss []string, s string) []string {
	var out []string
	for _, x := range ss {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// allows says whether the resource serves verb.
func (h *resourceHandler) allows(verb string) bool {
	vl, ok := h.res.Strategy.(registry.VerbLister)
	if !ok {
		return true
	}
	for _, v := range vl.Verbs() {
		if v == verb {
			return true
		}
	}
	return false
}

// serveVirtual serves resources that are computed or create-only.
func (h *resourceHandler) serveVirtual(ctx context.Context, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	var obj runtime.Object
	var err error
	code := http.StatusOK
	switch info.Verb {
	case "create":
		vc, ok := h.res.Strategy.(registry.VirtualCreater)
		if !ok {
			err = methodNotSupported(h.gr, info.Verb)
			break
		}
		var body []byte
		if body, err = readBody(r); err != nil {
			break
		}
		in := h.res.New()
		if _, err = h.codecs.decodeBody(r, body, in, h.gvk); err != nil {
			break
		}
		obj, err = vc.CreateVirtual(ctx, in)
		code = http.StatusCreated
	case "get", "list":
		vr, ok := h.res.Strategy.(registry.VirtualReader)
		if !ok {
			err = methodNotSupported(h.gr, info.Verb)
			break
		}
		if info.Verb == "get" {
			obj, err = vr.GetVirtual(ctx, info.Name)
		} else {
			obj, err = vr.ListVirtual(ctx)
		}
	default:
		err = methodNotSupported(h.gr, info.Verb)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	h.codecs.ensureKind(obj)
	if out.as != "" {
		if obj, err = h.asObject(obj, out); err != nil {
			h.codecs.writeError(w, err)
			return
		}
	}
	h.codecs.writeObject(w, code, out, obj)
}

// wrongTarget: POST goes to a collection, PUT and PATCH to an object, as
// upstream routes them (405 otherwise).
func wrongTarget(info RequestInfo) bool {
	switch info.Verb {
	case "create":
		return info.Name != "" && info.Subresource == ""
	case "update", "patch":
		return info.Name == ""
	}
	return false
}
