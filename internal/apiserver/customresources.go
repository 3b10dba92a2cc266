package apiserver

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/crd"
	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiextensions"
	"github.com/skiff-sh/skiff/internal/apiserver/servicerouting"
	"github.com/skiff-sh/skiff/internal/controller/worker"
	"github.com/skiff-sh/skiff/internal/storage"
)

// customResources serves the resources CustomResourceDefinitions declare.
// It is the API server's CRD controller: it watches the CRDs, accepts their
// names, builds and swaps in the handlers of their served versions (new
// ones are served as soon as the CRD is Established, with no restart),
// and on a CRD's deletion deletes its objects before letting it go. The
// decisions (names, conditions) are crd.Status's; this file does the I/O.
type customResources struct {
	srv   *Server
	crds  *resourceHandler
	queue *worker.Queue[string]

	// handlers is what the router reads, replaced whole on every change.
	handlers atomic.Pointer[map[schema.GroupVersionResource]*resourceHandler]

	mu     sync.Mutex
	served map[string]*servedCRD // by CRD name
	ctx    context.Context       // the cachers' lifetime, set by Start
	// synced is closed once the CRDs stored at start are served.
	synced chan struct{}
}

// servedCRD is what is served for one CRD.
type servedCRD struct {
	uid         types.UID
	generation  int64
	names       apiextensionsv1.CustomResourceDefinitionNames
	resources   []registry.Resource
	openapi     []openapi.Custom
	handlers    map[schema.GroupVersionResource]*resourceHandler
	cancel      context.CancelFunc
	terminating atomic.Bool
}

var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

func newCustomResources(srv *Server) *customResources {
	c := &customResources{
		srv: srv, crds: srv.handlers[crdGVR], served: map[string]*servedCRD{}, synced: make(chan struct{}),
	}
	c.queue = worker.NewQueue("customresourcedefinitions", c.syncKey, worker.Options[string]{})
	empty := map[schema.GroupVersionResource]*resourceHandler{}
	c.handlers.Store(&empty)
	return c
}

// handler is the handler of a custom resource, nil when none is served.
func (c *customResources) handler(gvr schema.GroupVersionResource) *resourceHandler {
	if c == nil {
		return nil
	}
	return (*c.handlers.Load())[gvr]
}

// handlerFor finds the handler of a built-in or custom resource.
func (s *Server) handlerFor(gvr schema.GroupVersionResource) *resourceHandler {
	if h := s.handlers[gvr]; h != nil {
		return h
	}
	return s.custom.handler(gvr)
}

// Start runs the CRD controller until ctx is done. The built-in caches
// must be ready.
func (c *customResources) Start(ctx context.Context) error {
	if c.crds == nil || c.crds.store == nil {
		return errors.New("customresourcedefinitions are not served")
	}
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	defer c.queue.ShutDown()
	c.initialSync(ctx)
	go c.watch(ctx)
	c.queue.Run(ctx)
	c.mu.Lock()
	for name, sc := range c.served {
		sc.cancel()
		delete(c.served, name)
	}
	c.mu.Unlock()
	return nil
}

// initialSync serves the CRDs stored at start before the server reports
// ready (upstream's crd-informer-synced), so clients find their resources
// at once after a restart. A CRD that fails here is retried by the loop.
func (c *customResources) initialSync(ctx context.Context) {
	defer close(c.synced)
	all := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.crds.store.List(ctx, c.crds.prefix(), storage.ListOptions{ResourceVersion: "0"}, all); err != nil {
		return
	}
	for _, crd := range all.Items {
		if _, err := c.sync(ctx, crd.Name); err != nil {
			klog.FromContext(ctx).Error(err, "sync CustomResourceDefinition at start", "name", crd.Name)
		}
	}
}

// checkSynced is the readiness check: the stored CRDs are served.
func (c *customResources) checkSynced(context.Context) error {
	select {
	case <-c.synced:
		return nil
	default:
		return errors.New("CustomResourceDefinitions not yet served")
	}
}

// watch queues the name of every CRD that changes, re-watching when the
// stream ends.
func (c *customResources) watch(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		w, err := c.crds.store.Watch(ctx, c.crds.prefix(), storage.ListOptions{ResourceVersion: "0", Recursive: true})
		if err != nil {
			logger.Error(err, "watch CustomResourceDefinitions")
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Bookmark || ev.Type == watch.Error {
				continue
			}
			if m, err := metaOf(ev.Object); err == nil {
				c.queue.Add(m.GetName())
			}
		}
		w.Stop()
	}
}

// syncKey is the queue's sync: a CRD whose objects are still being
// deleted is looked at again a second later.
func (c *customResources) syncKey(ctx context.Context, name string) error {
	requeue, err := c.sync(ctx, name)
	if err == nil && requeue {
		return worker.RequeueAfter(time.Second)
	}
	return err
}

// sync brings one CRD's serving and status in line with its spec.
// requeue asks to look again soon (its objects are being deleted).
func (c *customResources) sync(ctx context.Context, name string) (requeue bool, err error) {
	cur := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.crds.store.Get(ctx, c.crds.key("", name), cur); err != nil {
		if storage.IsNotFound(err) {
			c.unserve(name)
			return false, nil
		}
		return false, err
	}
	all := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.crds.store.List(ctx, c.crds.prefix(), storage.ListOptions{ResourceVersion: "0"}, all); err != nil {
		return false, err
	}
	var others []*apiextensionsv1.CustomResourceDefinition
	for i := range all.Items {
		others = append(others, &all.Items[i])
	}
	status := crd.Status(cur, others, metav1.NewTime(c.srv.clock.Now()))
	if status.AcceptedNames.Plural != "" {
		serving := cur.DeepCopy()
		serving.Spec.Names = status.AcceptedNames
		if err := c.serve(serving); err != nil {
			// A CRD that validation let through but that cannot be built is
			// left unserved and not Established.
			return false, err
		}
	}
	if !sameStatus(cur.Status, status) {
		if err := c.writeStatus(ctx, name, cur.UID, status); err != nil {
			return false, err
		}
	}
	if cur.DeletionTimestamp == nil {
		return false, nil
	}
	return c.cleanup(ctx, cur)
}

// sameStatus ignores transition times.
func sameStatus(a, b apiextensionsv1.CustomResourceDefinitionStatus) bool {
	strip := func(s apiextensionsv1.CustomResourceDefinitionStatus) apiextensionsv1.CustomResourceDefinitionStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return s
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

func (c *customResources) writeStatus(ctx context.Context, name string, uid types.UID, status apiextensionsv1.CustomResourceDefinitionStatus) error {
	out := &apiextensionsv1.CustomResourceDefinition{}
	err := c.crds.store.GuaranteedUpdate(ctx, c.crds.key("", name), out, &storage.Preconditions{UID: &uid}, func(obj runtime.Object) (runtime.Object, error) {
		next := obj.(*apiextensionsv1.CustomResourceDefinition).DeepCopy()
		for _, cond := range status.Conditions {
			apiextensions.SetCondition(next, cond)
		}
		next.Status.AcceptedNames = status.AcceptedNames
		return next, nil
	})
	if storage.IsNotFound(err) || storage.IsConflict(err) {
		return nil // gone or replaced: its own event follows
	}
	return err
}

// serve builds the handlers of crd's served versions and swaps them in,
// unless what is served already matches it.
func (c *customResources) serve(def *apiextensionsv1.CustomResourceDefinition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return errors.New("not started")
	}
	old := c.served[def.Name]
	if old != nil && old.uid == def.UID && old.generation == def.Generation && apiequality.Semantic.DeepEqual(old.names, def.Spec.Names) {
		old.terminating.Store(def.DeletionTimestamp != nil)
		return nil
	}
	sc := &servedCRD{uid: def.UID, generation: def.Generation, names: def.Spec.Names, handlers: map[schema.GroupVersionResource]*resourceHandler{}}
	sc.terminating.Store(def.DeletionTimestamp != nil)
	rs, err := crd.Resources(def, crd.Options{Terminating: sc.terminating.Load, Services: servicerouting.New(reader{srv: c.srv})})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	sc.cancel = cancel
	var cachers []*storage.Cacher
	for _, res := range rs {
		h, cacher, err := c.newHandler(res)
		if err != nil {
			cancel()
			return err
		}
		cachers = append(cachers, cacher)
		sc.handlers[res.GroupVersion.WithResource(res.Resource)] = h
		sc.resources = append(sc.resources, res)
	}
	for _, cacher := range cachers {
		go func() { _ = cacher.Start(ctx) }()
	}
	for _, cacher := range cachers {
		select {
		case <-cacher.Ready():
		case <-time.After(30 * time.Second):
			cancel()
			return fmt.Errorf("cache of %s not ready", def.Name)
		}
	}
	c.served[def.Name] = sc
	c.publish()
	if old != nil {
		old.cancel()
	}
	// The OpenAPI documents follow a moment later, as upstream's OpenAPI
	// controller publishes them apart from establishing (the builder takes
	// ~0.1 s a CRD).
	go c.publishOpenAPI(sc, def.DeepCopy())
	return nil
}

// publishOpenAPI builds the documents of a served CRD and publishes them,
// unless it was replaced meanwhile.
func (c *customResources) publishOpenAPI(sc *servedCRD, def *apiextensionsv1.CustomResourceDefinition) {
	docs, err := crd.OpenAPI(def)
	if err != nil {
		klog.Background().Error(err, "build the OpenAPI of a CustomResourceDefinition", "name", def.Name)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.served[def.Name] != sc {
		return
	}
	sc.openapi = docs
	c.publish()
}

// newHandler builds the store, cache, handler and managedFields tracking
// of one custom resource version.
func (c *customResources) newHandler(res registry.Resource) (*resourceHandler, *storage.Cacher, error) {
	s := c.srv
	gvk := res.GroupVersion.WithKind(res.Kind)
	codec := crd.StorageCodec{Storage: res.Custom.StorageVersion, Served: gvk, Convert: res.Custom.Convert}
	if f := res.Custom.FromStorage; f != nil {
		codec.FromStorage = func(u *unstructured.Unstructured) { f(u) }
	}
	name := res.Resource + groupSuffix(res.GroupVersion.Group)
	store := storage.NewStore(s.cfg.Etcd, codec, res.New, name, storage.StoreOptions{Observer: s.metrics})
	h := &resourceHandler{}
	cacher := storage.NewCacher(store, "/registry/"+res.StoragePrefix+"/",
		func(o runtime.Object) (labels.Set, fields.Set, error) { return h.attrs(o) },
		storage.CacherOptions{BookmarkInterval: s.cfg.WatchBookmarkInterval, Uncached: s.cfg.WatchCache.Disabled})
	*h = *newResourceHandler(res, cacher, s.codecs, s)
	if fm := res.Custom.FieldManager; fm != nil {
		main, err := fm("")
		if err != nil {
			return nil, nil, fmt.Errorf("field manager for %s: %w", name, err)
		}
		h.fields = &fieldManagers{main: main, subs: map[string]*managedfields.FieldManager{}}
		if h.hasStatus() {
			if h.fields.subs["status"], err = fm("status"); err != nil {
				return nil, nil, fmt.Errorf("field manager for %s/status: %w", name, err)
			}
		}
	}
	return h, cacher, nil
}

// unserve stops serving a CRD that is gone.
func (c *customResources) unserve(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.served[name]
	if sc == nil {
		return
	}
	delete(c.served, name)
	c.publish()
	sc.cancel()
}

// publish swaps in the router's map and discovery's documents. c.mu held.
func (c *customResources) publish() {
	handlers := map[schema.GroupVersionResource]*resourceHandler{}
	names := make([]string, 0, len(c.served))
	for name, sc := range c.served {
		names = append(names, name)
		for gvr, h := range sc.handlers {
			if c.srv.handlers[gvr] == nil { // built-ins win
				handlers[gvr] = h
			}
		}
	}
	sort.Strings(names)
	c.handlers.Store(&handlers)
	resources := append([]registry.Resource(nil), c.srv.resources...)
	var docs []openapi.Custom
	for _, name := range names {
		for _, res := range c.served[name].resources {
			if c.srv.handlers[res.GroupVersion.WithResource(res.Resource)] == nil {
				resources = append(resources, res)
			}
		}
		docs = append(docs, c.served[name].openapi...)
	}
	c.srv.aggregation.publishLocal(resources) // discovery, with the remote group versions
	if err := c.srv.openapi.SetCustom(docs); err != nil {
		klog.Background().Error(err, "publish the OpenAPI of custom resources")
	}
}

// cleanup deletes the objects of a CRD being deleted, then removes its
// finalizer, which lets the CRD go. requeue: objects are still there.
func (c *customResources) cleanup(ctx context.Context, def *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	c.mu.Lock()
	sc := c.served[def.Name]
	c.mu.Unlock()
	if sc != nil {
		sc.terminating.Store(true)
		var h *resourceHandler
		for _, x := range sc.handlers {
			h = x
			break
		}
		if h != nil {
			list := &unstructured.UnstructuredList{}
			if err := h.store.List(ctx, h.prefix(), storage.ListOptions{}, list); err != nil {
				return false, err
			}
			for i := range list.Items {
				item := &list.Items[i]
				_, _, err := h.deleteOne(ctx, item.GetNamespace(), item.GetName(), &metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			if err := h.store.List(ctx, h.prefix(), storage.ListOptions{}, list); err != nil {
				return false, err
			}
			if len(list.Items) > 0 {
				return true, nil
			}
		}
	}
	uid := def.UID
	out := &apiextensionsv1.CustomResourceDefinition{}
	err := c.crds.store.GuaranteedUpdate(ctx, c.crds.key("", def.Name), out, &storage.Preconditions{UID: &uid}, func(obj runtime.Object) (runtime.Object, error) {
		next := obj.(*apiextensionsv1.CustomResourceDefinition).DeepCopy()
		var keep []string
		for _, f := range next.Finalizers {
			if f != apiextensions.CleanupFinalizer {
				keep = append(keep, f)
			}
		}
		next.Finalizers = keep
		apiextensions.SetCondition(next, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionCompleted",
			Message: fmt.Sprintf("removed all instances"), LastTransitionTime: metav1.NewTime(c.srv.clock.Now()),
		})
		return next, nil
	})
	if storage.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := c.crds.finishDeletionIfDone(ctx, out); err != nil {
		return false, err
	}
	return false, nil
}

// pruneUnknown drops the fields a custom resource's schema does not declare
// (registry.FieldPruner): fieldValidation Strict refuses them with 400,
// Ignore drops them silently, Warn (the default) adds a warning each.
func (h *resourceHandler) pruneUnknown(r *http.Request, obj runtime.Object, warnings []string) ([]string, error) {
	p, ok := h.res.Strategy.(registry.FieldPruner)
	if !ok {
		return warnings, nil
	}
	unknown := p.Prune(obj)
	if len(unknown) == 0 {
		return warnings, nil
	}
	sort.Strings(unknown)
	switch r.URL.Query().Get("fieldValidation") {
	case "Strict":
		msgs := make([]string, len(unknown))
		for i, u := range unknown {
			msgs[i] = fmt.Sprintf("unknown field %q", u)
		}
		return nil, apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
	case "Ignore":
		return warnings, nil
	}
	for _, u := range unknown {
		warnings = append(warnings, fmt.Sprintf("unknown field %q", u))
	}
	return warnings, nil
}

// negotiateCustomOutput picks the first of JSON and YAML the Accept header
// allows: custom resources have no protobuf form (upstream serves them as
// JSON, YAML and CBOR).
func negotiateCustomOutput(r *http.Request) (output, error) {
	var kept []string
	for _, entry := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(entry)); err == nil && mt != mediaProtobuf {
			kept = append(kept, entry)
		}
	}
	if len(kept) == 0 {
		return output{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
			fmt.Sprintf("only the following media types are accepted: %s, %s", mediaJSON, mediaYAML), 0, false)
	}
	rr := r.Clone(r.Context())
	rr.Header.Set("Accept", strings.Join(kept, ","))
	return negotiateOutput(rr)
}
