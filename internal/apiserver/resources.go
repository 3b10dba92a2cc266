package apiserver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// storageCodec is how a resource's objects are kept in etcd.
func storageCodec(res registry.Resource, gvk schema.GroupVersionKind) storage.Codec {
	if st := res.Stored; st != nil {
		return storage.ConvertingCodec{
			Storage: storage.ProtobufCodec{GVK: st.GVK}, NewStored: st.New,
			ToStored: st.ToStored, FromStored: st.FromStored, GVK: gvk,
		}
	}
	return storage.ProtobufCodec{GVK: gvk}
}

// reader lets resources and admission plugins read the objects of other
// resources (registry.Reader).
type reader struct{ srv *Server }

var _ registry.Reader = reader{}

func (r reader) handler(gvr schema.GroupVersionResource) (*resourceHandler, error) {
	h := r.srv.handlerFor(gvr)
	if h == nil || h.store == nil {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	return h, nil
}

func (r reader) List(ctx context.Context, gvr schema.GroupVersionResource, ns string, latest bool, into runtime.Object) error {
	h, err := r.handler(gvr)
	if err != nil {
		return err
	}
	opts := storage.ListOptions{ResourceVersion: "0"}
	if latest {
		opts.ResourceVersion = ""
	}
	if err := h.store.List(ctx, h.listPrefix(ns), opts, into); err != nil {
		return h.apiErr(err, "")
	}
	return nil
}

func (r reader) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, live bool, into runtime.Object) error {
	h, err := r.handler(gvr)
	if err != nil {
		return err
	}
	key := h.key(ns, name)
	rv := "0"
	if live {
		rv = ""
	}
	err = h.store.GetRV(ctx, key, rv, into)
	if storage.IsNotFound(err) && !live {
		err = h.store.Get(ctx, key, into)
	}
	if err != nil {
		return h.apiErr(err, name)
	}
	return nil
}
