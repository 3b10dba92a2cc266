package apiserver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
)

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
