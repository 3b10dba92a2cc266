package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// The generic REST handler: one resourceHandler a served resource,
// dispatching each request by verb to get.go, create.go, update.go,
// patch.go and delete.go, and by declared subresource to subresources.go.

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
	// verbs the resource itself serves, and the handlers of its declared
	// subresources that are not served by the update path.
	verbs   map[string]bool
	subFunc map[string]subresourceFunc
	fields  *fieldManagers
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
	h.verbs = map[string]bool{}
	for _, v := range res.Verbs() {
		h.verbs[v] = true
	}
	h.subFunc = map[string]subresourceFunc{}
	handlers := subresourceHandlers()
	for name, sub := range res.Subresources {
		if fn := handlers[sub.Handler]; fn != nil {
			h.subFunc[name] = fn
		}
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
	if !h.res.Namespaced && info.Namespace != "" {
		h.codecs.writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: info.Resource}, ""))
		return
	}
	sub, hasSub := h.res.Subresources[info.Subresource]
	if info.Subresource != "" && !hasSub {
		h.codecs.writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: h.gr.Group, Resource: h.gr.Resource + "/" + info.Subresource}, info.Name))
		return
	}
	ctx := r.Context()
	if hasSub && sub.Handler == registry.HandleProxy {
		// The backend answers, in its own media type; OPTIONS, which has
		// no verb, is proxied too.
		if contains(sub.Verbs, info.Verb) || r.Method == http.MethodOptions {
			serveProxy(ctx, h, w, r, info, output{mediaType: mediaJSON})
		} else {
			h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		}
		return
	}
	out, err := negotiateOutputFor(r, info.Subresource != "" || h.verbs["list"])
	if err == nil && h.res.Custom != nil && out.mediaType == mediaProtobuf {
		out, err = negotiateCustomOutput(r) // custom resources: JSON or YAML only
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if (info.Subresource == "" && !h.verbs[info.Verb]) || (hasSub && !contains(sub.Verbs, info.Verb)) {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	if h.store == nil {
		h.serveVirtual(ctx, w, r, info, out)
		return
	}
	if fn := h.subFunc[info.Subresource]; fn != nil {
		fn(ctx, h, w, r, info, out)
		return
	}
	// The resource itself, its status and finalize subresources.
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
		if out.as == "" && !out.pretty && (out.mediaType == mediaJSON || out.mediaType == mediaProtobuf) && !h.store.UseEtcdForList(p.ListOptions) {
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
		obj, err = h.create(ctx, r, info)
		code = http.StatusCreated
	case "update":
		obj, err = h.update(ctx, r, info)
	case "patch":
		obj, err = h.patch(ctx, r, info)
	case "delete":
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

// contains says whether ss holds s.
func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// subresourceHandler is how the resource serves subresource sub ("" for
// none).
func (h *resourceHandler) subresourceHandler(sub string) registry.SubresourceHandler {
	if sub == "" {
		return ""
	}
	return h.res.Subresources[sub].Handler
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
		if m, aerr := meta.Accessor(in); aerr == nil && info.Namespace != "" && m.GetNamespace() == "" {
			m.SetNamespace(info.Namespace) // e.g. a LocalSubjectAccessReview's
		}
		obj, err = vc.CreateVirtual(ctx, in)
		code = http.StatusCreated
	case "get", "list":
		if sr, ok := h.res.Strategy.(registry.ScopedVirtualReader); ok {
			q := registry.VirtualQuery{Namespace: info.Namespace, Labels: labels.Everything()}
			if sel := r.URL.Query().Get("labelSelector"); sel != "" {
				if q.Labels, err = labels.Parse(sel); err != nil {
					err = apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
					break
				}
			}
			if info.Verb == "get" {
				obj, err = sr.GetScoped(ctx, q, info.Name)
			} else {
				obj, err = sr.ListScoped(ctx, q)
			}
			break
		}
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

// hasStatus says the resource has a status subresource (which owns the
// status fields for managedFields).
// writingSubresources are the subresources that write the object itself
// (sorted), each with its own field manager.
func (h *resourceHandler) writingSubresources() []string {
	var subs []string
	for name, sub := range h.res.Subresources {
		switch sub.Handler {
		case registry.HandleStatus, registry.HandleEphemeralContainers, registry.HandleResize:
			subs = append(subs, name)
		}
	}
	sort.Strings(subs)
	return subs
}

func (h *resourceHandler) hasStatus() bool {
	for _, sub := range h.res.Subresources {
		if sub.Handler == registry.HandleStatus {
			return true
		}
	}
	return false
}
