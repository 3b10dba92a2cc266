package sharedinformers

import (
	"context"
	"maps"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// Cache serves one resource's lists and watches in process, from the API
// server's watch cache (apiserver.InProcessCache): what a watch delivers
// are the cache's own objects, shared with the API server and every
// informer that reads them. Never mutate them.
type Cache interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// Caches finds the API server's in-process caches.
type Caches interface {
	// ForResource is resource's cache and the kind of its objects; false:
	// its informers list and watch through the client.
	ForResource(schema.GroupVersionResource) (Cache, schema.GroupVersionKind, bool)
	// ResourceFor is the resource of kind that ForResource serves.
	ResourceFor(schema.GroupVersionKind) (schema.GroupVersionResource, bool)
}

// inProcessFactory is the process's informer factory. The informers of
// every kind the API server caches list and watch that cache in process
// (the typed ones through InformerFor, the generic ones through
// ForResource), so each object is held once in the process, by the cache;
// the informers of anything else go through the client.
type inProcessFactory struct {
	informers.SharedInformerFactory // the client's factory, which holds the informers
	client                          kubernetes.Interface
	caches                          Caches

	mu       sync.Mutex
	served   map[reflect.Type]*servedType // nil: not served in process
	indexers cache.Indexers               // on every in-process informer, besides the namespace's (Process.IndexAll)
}

type servedType struct {
	gvr   schema.GroupVersionResource
	cache Cache
}

var _ informers.SharedInformerFactory = (*inProcessFactory)(nil)

// servedOf is how obj's type is served in process; nil: through the client.
func (f *inProcessFactory) servedOf(obj any) *servedType {
	o, ok := obj.(runtime.Object)
	if !ok || f.caches == nil {
		return nil
	}
	t := reflect.TypeOf(o)
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.served[t]; ok {
		return s
	}
	var s *servedType
	if kinds, _, err := scheme.Scheme.ObjectKinds(o); err == nil && len(kinds) == 1 {
		if gvr, ok := f.caches.ResourceFor(kinds[0]); ok {
			if c, _, ok := f.caches.ForResource(gvr); ok {
				s = &servedType{gvr: gvr, cache: c}
			}
		}
	}
	f.served[t] = s
	return s
}

// InformerFor is the process's informer of obj's type: made by newFunc,
// or, for a type served in process, reading the API server's cache.
func (f *inProcessFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	if s := f.servedOf(obj); s != nil {
		newFunc = func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return f.inProcessInformer(s, obj, resync)
		}
	}
	return f.SharedInformerFactory.InformerFor(obj, newFunc)
}

// inProcessInformer is what client-go's typed informer of obj's type is
// (all namespaces, indexed by namespace, watch-list on), with its lists and
// watches served by the cache.
func (f *inProcessFactory) inProcessInformer(s *servedType, obj runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return s.cache.List(ctx, metav1.NamespaceAll, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return s.cache.Watch(ctx, metav1.NamespaceAll, opts)
		},
	}
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	f.mu.Lock()
	maps.Copy(indexers, f.indexers)
	f.mu.Unlock()
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, f.client), obj,
		cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     indexers,
			Identifier:   f.InformerName().WithResource(s.gvr),
		})
}

// ForResource is the generic informer of resource: for one served in
// process, over the same informer as the typed one of its kind.
func (f *inProcessFactory) ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error) {
	if inf, ok := f.inProcess(resource); ok {
		return inProcessGeneric{informer: inf, lister: cache.NewGenericLister(inf.GetIndexer(), resource.GroupResource())}, nil
	}
	return f.SharedInformerFactory.ForResource(resource)
}

// inProcess is the informer of resource if it is served in process.
func (f *inProcessFactory) inProcess(resource schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	if f.caches == nil {
		return nil, false
	}
	_, gvk, ok := f.caches.ForResource(resource)
	if !ok {
		return nil, false
	}
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, false
	}
	if s := f.servedOf(obj); s == nil || s.gvr != resource {
		return nil, false
	}
	return f.InformerFor(obj, nil), true
}

// inProcessGeneric is a GenericInformer over an informer.
type inProcessGeneric struct {
	informer cache.SharedIndexInformer
	lister   cache.GenericLister
}

func (g inProcessGeneric) Informer() cache.SharedIndexInformer { return g.informer }
func (g inProcessGeneric) Lister() cache.GenericLister         { return g.lister }
