package apiserver

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// InProcessCache serves one resource's lists and watches to the server's
// own components (the in-process controller manager's and scheduler's
// informers) straight from the watch cache, without HTTP, encoding or
// decoding: the objects a watch delivers are the cache's own, so an
// informer fed by it holds the very objects the API server holds instead
// of a decoded copy of each. They are shared: never mutate them.
//
// The calls skip the request chain: no authentication, authorization,
// audit, priority and fairness or admission, as the in-process components
// are the server's own, privileged (docs/architecture.md).
type InProcessCache struct {
	h *resourceHandler
}

// InProcessCache returns the in-process cache of a built-in resource kept
// in etcd; false for the others (virtual resources, custom resources,
// unknown ones), which are read through a client.
func (s *Server) InProcessCache(gvr schema.GroupVersionResource) (*InProcessCache, bool) {
	h := s.handlers[gvr]
	if h == nil || h.store == nil || !h.verbs["watch"] {
		return nil, false
	}
	return &InProcessCache{h: h}, true
}

// InProcessResource is the resource of kind gvk whose cache InProcessCache
// serves; false when there is none, or more than one.
func (s *Server) InProcessResource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	s.inProcessOnce.Do(func() {
		s.inProcessKinds = map[schema.GroupVersionKind]schema.GroupVersionResource{}
		seen := map[schema.GroupVersionKind]int{}
		for gvr := range s.handlers {
			if _, ok := s.InProcessCache(gvr); ok {
				gvk := s.handlers[gvr].gvk
				seen[gvk]++
				s.inProcessKinds[gvk] = gvr
			}
		}
		for gvk, n := range seen {
			if n > 1 {
				delete(s.inProcessKinds, gvk)
			}
		}
	})
	gvr, ok := s.inProcessKinds[gvk]
	return gvr, ok
}

// Kind is the kind of the objects the cache holds.
func (c *InProcessCache) Kind() schema.GroupVersionKind { return c.h.gvk }

// params reads opts as the HTTP path reads the same query parameters, with
// its validation and defaults.
func (c *InProcessCache) params(opts metav1.ListOptions) (listParams, error) {
	q, err := metav1.ParameterCodec.EncodeParameters(&opts, metav1.SchemeGroupVersion)
	if err != nil {
		return listParams{}, err
	}
	return parseListParams(q, c.h.fieldSet)
}

// List is a list as GET on the collection answers it (from the cache
// unless opts ask for an exact revision or a page of etcd's snapshot).
// Its items are copies of the cached objects' top-level structs that
// share everything beneath: never mutate them either. Informers list
// only when a watch-list fails.
func (c *InProcessCache) List(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error) {
	opts.Watch = false
	p, err := c.params(opts)
	if err != nil {
		return nil, err
	}
	return c.h.list(ctx, namespace, p)
}

// Watch is a watch as the HTTP path serves it: from resourceVersion, or
// with the initial state first (sendInitialEvents, ending with the
// bookmark upstream's informers wait for), bookmarks on request, 410 Gone
// for a revision the cache no longer holds. It ends at timeoutSeconds (or
// the server's watch timeout), when ctx is done, when the server stops,
// or when the cache ends it.
func (c *InProcessCache) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	h := c.h
	opts.Watch = true
	p, err := c.params(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, watchTimeout(p.TimeoutSeconds, h.srv.cfg.MinRequestTimeout))
	cw, err := h.store.WatchCached(ctx, h.listPrefix(namespace), p.ListOptions)
	if err != nil {
		cancel()
		return nil, h.apiErr(err, "")
	}
	w := &inProcessWatch{cw: cw, cancel: cancel, out: make(chan watch.Event)}
	go w.run(ctx, h)
	return w, nil
}

type inProcessWatch struct {
	cw     *storage.CacheWatch
	cancel context.CancelFunc
	out    chan watch.Event
	once   sync.Once
}

func (w *inProcessWatch) Stop() {
	w.once.Do(func() {
		w.cancel()
		w.cw.Stop()
	})
}

func (w *inProcessWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *inProcessWatch) run(ctx context.Context, h *resourceHandler) {
	defer close(w.out)
	defer w.Stop()
	for {
		var ev storage.WatchEvent
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-h.srv.stopping:
			return
		case ev, ok = <-w.cw.ResultChan():
			if !ok {
				return
			}
		}
		out := watch.Event{Type: ev.Type}
		if ev.Type == watch.Bookmark {
			obj := h.res.New()
			m, _ := metaOf(obj)
			m.SetResourceVersion(formatRV(ev.RV))
			if ev.InitialEventsEnd {
				m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			}
			obj.GetObjectKind().SetGroupVersionKind(h.gvk)
			out.Object = obj
		} else if obj, err := ev.Object.Object(); err != nil {
			out = watch.Event{Type: watch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: err.Error()}}
		} else {
			out.Object = obj
		}
		select {
		case w.out <- out:
		case <-ctx.Done():
			return
		case <-h.srv.stopping:
			return
		}
	}
}
