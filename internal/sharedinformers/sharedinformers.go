// Package sharedinformers lets the components that run in one process
// (`skiff server`'s controller manager and scheduler) keep one informer
// cache of each type instead of one each: a decoded copy of every pod and
// node is the largest part of their memory.
//
// A Process owns a client-go SharedInformerFactory whose informers run
// for the life of the process. Each component asks it for a Scope: an
// informers.SharedInformerFactory over the same informers that remembers
// the event handlers the component adds and removes them when the
// component calls Shutdown (when it loses its leadership, say), without
// stopping the informers the other component still reads. Starting a
// scope starts the informers with the process's lifetime, not the
// component's.
package sharedinformers

import (
	"context"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Process is the informer factory of one process.
type Process struct {
	factory *inProcessFactory
	ctx     context.Context
	cancel  context.CancelFunc
}

// New returns the factory of a process whose informers list and watch
// the resources caches serves in process and the others with client,
// resync their handlers every resync (a scope may ask for none), and run
// until ctx is done or Shutdown. caches may be nil (everything through
// client). The informers that read through client drop managedFields
// (StripManagedFields); those fed in process keep the cache's objects as
// they are, since the memory is the cache's anyway and the API server
// serves them with their managedFields.
func New(ctx context.Context, client kubernetes.Interface, resync time.Duration, caches Caches) *Process {
	ctx, cancel := context.WithCancel(ctx)
	f := &inProcessFactory{client: client, caches: caches, served: map[reflect.Type]*servedType{}}
	transform := func(obj any) (any, error) {
		if f.servedOf(obj) != nil {
			return obj, nil
		}
		return StripManagedFields(obj)
	}
	f.SharedInformerFactory = informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(transform))
	return &Process{factory: f, ctx: ctx, cancel: cancel}
}

// IndexAll adds indexers to every informer that reads the API server's
// cache in process (the garbage collector's index of owners), so that
// whoever asks for an informer first, it has them. Call it before any
// informer is made.
func (p *Process) IndexAll(indexers cache.Indexers) {
	p.factory.mu.Lock()
	defer p.factory.mu.Unlock()
	p.factory.indexers = indexers
}

// Factory is a view of the process's informers for what must be set up
// before any informer starts (indexes); it adds no event handlers.
func (p *Process) Factory() informers.SharedInformerFactory { return p.Scope(false) }

// Shutdown stops the informers and waits for them. The components must
// have stopped.
func (p *Process) Shutdown() {
	p.cancel()
	p.factory.Shutdown()
}

// StripManagedFields is the informers' transform of the controller
// manager and the scheduler, shared or not: it drops an object's
// managedFields before the informer caches it (no controller or plugin
// reads them, and they are often the larger part of an object).
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Scope returns a new view of the process's informers for one component.
// noResync: the component's handlers get no periodic resyncs (the
// scheduler's, as its own factory's were).
func (p *Process) Scope(noResync bool) *Scope {
	return &Scope{process: p, noResync: noResync}
}

// Scope is one component's view of the shared informers. It implements
// informers.SharedInformerFactory.
type Scope struct {
	process  *Process
	noResync bool

	mu            sync.Mutex
	registrations []registration
	shutDown      bool
}

type registration struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
}

var _ informers.SharedInformerFactory = (*Scope)(nil)

// Start starts the informers asked for so far, for the process's life.
func (s *Scope) Start(<-chan struct{}) { s.process.factory.Start(s.process.ctx.Done()) }

// StartWithContext is Start.
func (s *Scope) StartWithContext(context.Context) {
	s.process.factory.StartWithContext(s.process.ctx)
}

// Shutdown removes the handlers the component added. The informers run on.
func (s *Scope) Shutdown() {
	s.mu.Lock()
	regs := s.registrations
	s.registrations, s.shutDown = nil, true
	s.mu.Unlock()
	for _, r := range regs {
		_ = r.informer.RemoveEventHandler(r.handle)
	}
}

// WaitForCacheSync waits for every started informer, or for stopCh.
func (s *Scope) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return s.process.factory.WaitForCacheSync(stopCh)
}

// WaitForCacheSyncWithContext waits for every started informer, or for ctx.
func (s *Scope) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	return s.process.factory.WaitForCacheSyncWithContext(ctx)
}

// InformerFor returns the process's informer of obj's type, wrapped so
// that the handlers added through it are the scope's.
func (s *Scope) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return &informer{SharedIndexInformer: s.process.factory.InformerFor(obj, newFunc), scope: s}
}

// InProcess is the process's informer of resource, its handlers the
// scope's, if it reads the API server's cache in process; false for a
// resource read through a client (and when the process has no caches).
func (s *Scope) InProcess(resource schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	inf, ok := s.process.factory.inProcess(resource)
	if !ok {
		return nil, false
	}
	return &informer{SharedIndexInformer: inf, scope: s}, true
}

// InformerName names the process's informers.
func (s *Scope) InformerName() *cache.InformerName { return s.process.factory.InformerName() }

// ForResource is the generic informer of resource, its handlers the scope's.
func (s *Scope) ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error) {
	g, err := s.process.factory.ForResource(resource)
	if err != nil {
		return nil, err
	}
	return genericInformer{GenericInformer: g, informer: &informer{SharedIndexInformer: g.Informer(), scope: s}}, nil
}

func (s *Scope) add(inf cache.SharedIndexInformer, handle cache.ResourceEventHandlerRegistration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutDown {
		// Added after Shutdown (a late goroutine): never keep it.
		_ = inf.RemoveEventHandler(handle)
		return
	}
	s.registrations = append(s.registrations, registration{inf, handle})
}

// informer records the handlers added to a shared informer.
type informer struct {
	cache.SharedIndexInformer
	scope *Scope
}

func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	if i.scope.noResync {
		opts.ResyncPeriod = ptr.To(time.Duration(0))
	}
	handle, err := i.SharedIndexInformer.AddEventHandlerWithOptions(h, opts)
	if err != nil {
		return nil, err
	}
	i.scope.add(i.SharedIndexInformer, handle)
	return handle, nil
}

type genericInformer struct {
	informers.GenericInformer
	informer cache.SharedIndexInformer
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.informer }

// The API groups, built over the scope so that their informers come
// through InformerFor.

func (s *Scope) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(s, "", nil)
}
func (s *Scope) Internal() apiserverinternal.Interface { return apiserverinternal.New(s, "", nil) }
func (s *Scope) Apps() apps.Interface                  { return apps.New(s, "", nil) }
func (s *Scope) Autoscaling() autoscaling.Interface    { return autoscaling.New(s, "", nil) }
func (s *Scope) Batch() batch.Interface                { return batch.New(s, "", nil) }
func (s *Scope) Certificates() certificates.Interface  { return certificates.New(s, "", nil) }
func (s *Scope) Coordination() coordination.Interface  { return coordination.New(s, "", nil) }
func (s *Scope) Core() core.Interface                  { return core.New(s, "", nil) }
func (s *Scope) Discovery() discovery.Interface        { return discovery.New(s, "", nil) }
func (s *Scope) Events() events.Interface              { return events.New(s, "", nil) }
func (s *Scope) Extensions() extensions.Interface      { return extensions.New(s, "", nil) }
func (s *Scope) Flowcontrol() flowcontrol.Interface    { return flowcontrol.New(s, "", nil) }
func (s *Scope) Lifecycle() lifecycle.Interface        { return lifecycle.New(s, "", nil) }
func (s *Scope) Networking() networking.Interface      { return networking.New(s, "", nil) }
func (s *Scope) Node() node.Interface                  { return node.New(s, "", nil) }
func (s *Scope) Policy() policy.Interface              { return policy.New(s, "", nil) }
func (s *Scope) Rbac() rbac.Interface                  { return rbac.New(s, "", nil) }
func (s *Scope) Resource() resource.Interface          { return resource.New(s, "", nil) }
func (s *Scope) Scheduling() scheduling.Interface      { return scheduling.New(s, "", nil) }
func (s *Scope) Storage() storage.Interface            { return storage.New(s, "", nil) }
func (s *Scope) Storagemigration() storagemigration.Interface {
	return storagemigration.New(s, "", nil)
}
