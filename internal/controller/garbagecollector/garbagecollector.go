// Package garbagecollector is the garbage collector: it watches the
// metadata of every resource discovery lists as listable, watchable and
// deletable (rediscovering periodically so that custom resources join),
// indexes objects by the UIDs of their owners, and
//
//   - deletes dependents whose owners are all gone (background deletion),
//   - for an owner deleted in the foreground (the foregroundDeletion
//     finalizer) deletes its dependents first and removes the finalizer
//     once no dependent with blockOwnerDeletion remains,
//   - for an owner deleted with the orphan finalizer removes the
//     ownerReferences to it from its dependents, then the finalizer.
//
// Every decision starts from a live read of the object, so a stale cache
// can delay the collector but never makes it delete a live object's
// dependents.
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "garbagecollector"

// ResyncPeriod is how often discovery is read again so that new
// resources (custom resources) get monitors.
const ResyncPeriod = 30 * time.Second

// ownerIndex indexes objects by the UIDs in their ownerReferences.
const ownerIndex = "skiff.garbagecollector/ownerUID"

// ignored resources are never monitored (upstream ignores events too).
var ignored = sets.New(
	schema.GroupResource{Resource: "events"},
	schema.GroupResource{Group: "events.k8s.io", Resource: "events"},
)

// objectRef names one object incarnation.
type objectRef struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
	UID       types.UID
}

func (r objectRef) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", r.Resource.GroupResource(), r.Namespace, r.Name, r.UID)
}

// monitor is the informer of one resource.
type monitor struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
	indexed    bool
}

// inProcessInformers gives the informer of a resource that reads the API
// server's cache in process (sharedinformers.Scope, in `skiff server`).
type inProcessInformers interface {
	InProcess(schema.GroupVersionResource) (cache.SharedIndexInformer, bool)
}

// OwnerIndexers is the collector's index of objects by owner, for informers
// made before it asks for them (sharedinformers.Process.IndexAll).
func OwnerIndexers() cache.Indexers { return cache.Indexers{ownerIndex: indexByOwner} }

// Controller is the garbage collector.
type Controller struct {
	metadata  metadata.Interface
	discovery discovery.DiscoveryInterface
	factory   metadatainformer.SharedInformerFactory
	// inProcess, when the typed informers read the API server's cache in
	// process, serves the monitors of those resources: the cache's
	// objects instead of a metadata copy of each read through HTTP.
	inProcess inProcessInformers
	typed     informers.SharedInformerFactory
	clock     clock.WithTicker

	mu       sync.RWMutex
	monitors map[schema.GroupResource]*monitor
	mapper   meta.RESTMapper

	deleteQueue *worker.Queue[objectRef]
	orphanQueue *worker.Queue[objectRef]
}

// New builds the collector and its initial monitors from discovery.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Metadata == nil || cc.MetadataInformers == nil {
		return nil, errors.New("garbagecollector: metadata client and informers are required")
	}
	c := &Controller{
		metadata:  cc.Metadata,
		discovery: cc.Client.Discovery(),
		factory:   cc.MetadataInformers,
		typed:     cc.Informers,
		clock:     cc.Clock,
		monitors:  map[schema.GroupResource]*monitor{},
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if ip, ok := cc.Informers.(inProcessInformers); ok {
		c.inProcess = ip
	}
	workers := 20
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	opts := worker.Options[objectRef]{Workers: workers, Clock: c.clock}
	c.deleteQueue = worker.NewQueue("garbage_collector_attempt_to_delete", c.attemptToDelete, opts)
	c.orphanQueue = worker.NewQueue("garbage_collector_attempt_to_orphan", c.attemptToOrphan, opts)
	if err := c.resync(ctx); err != nil {
		// Partial discovery is fine: the periodic resync fills the gaps.
		klog.FromContext(ctx).Info("garbage collector: discovery incomplete", "err", err)
	}
	return c, nil
}

// Start waits for the monitors, runs the workers and rediscovers every
// ResyncPeriod until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	c.startInformers(ctx)
	return worker.Run(ctx, Name, c.synced(), c.deleteQueue, c.orphanQueue, worker.LoopFunc(c.rediscover))
}

// rediscover adds monitors for resources that appeared, every ResyncPeriod.
func (c *Controller) rediscover(ctx context.Context) {
	t := c.clock.NewTicker(ResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := c.resync(ctx); err != nil {
				klog.FromContext(ctx).V(2).Info("garbage collector: discovery incomplete", "err", err)
			}
			c.startInformers(ctx)
		}
	}
}

func (c *Controller) startInformers(ctx context.Context) {
	c.factory.Start(ctx.Done())
	if c.inProcess != nil {
		c.typed.Start(ctx.Done())
	}
}

// informerOf is the informer of a monitored resource: the in-process one
// when there is one, else a metadata informer.
func (c *Controller) informerOf(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if c.inProcess != nil {
		if inf, ok := c.inProcess.InProcess(gvr); ok {
			return inf
		}
	}
	return c.factory.ForResource(gvr).Informer()
}

func (c *Controller) synced() []cache.InformerSynced {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []cache.InformerSynced
	for _, m := range c.monitors {
		out = append(out, m.informer.HasSynced)
	}
	return out
}

// resync reads discovery, refreshes the REST mapper and adds a monitor
// for every new deletable resource. New informers start at the next
// factory Start.
func (c *Controller) resync(ctx context.Context) error {
	groups, derr := restmapper.GetAPIGroupResources(c.discovery)
	if len(groups) == 0 && derr != nil {
		return fmt.Errorf("discovery: %w", derr)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	var add []schema.GroupVersionResource
	namespaced := map[schema.GroupVersionResource]bool{}
	for _, g := range groups {
		version := g.Group.PreferredVersion.Version
		for _, r := range g.VersionedResources[version] {
			gvr := schema.GroupVersionResource{Group: g.Group.Name, Version: version, Resource: r.Name}
			v := sets.New(r.Verbs...)
			if !v.HasAll("list", "watch", "delete") || ignored.Has(gvr.GroupResource()) || containsSlash(r.Name) {
				continue
			}
			add = append(add, gvr)
			namespaced[gvr] = r.Namespaced
		}
	}
	c.mu.Lock()
	c.mapper = mapper
	var fresh []schema.GroupVersionResource
	for _, gvr := range add {
		if _, ok := c.monitors[gvr.GroupResource()]; !ok {
			fresh = append(fresh, gvr)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, gvr := range fresh {
		if err := c.addMonitor(gvr, namespaced[gvr]); err != nil {
			errs = append(errs, err)
		}
	}
	if derr != nil {
		errs = append(errs, derr)
	}
	return errors.Join(errs...)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

func (c *Controller) addMonitor(gvr schema.GroupVersionResource, namespaced bool) error {
	inf := c.informerOf(gvr)
	m := &monitor{gvr: gvr, namespaced: namespaced, informer: inf}
	// The index is only possible before the informer starts; without it
	// dependents are found by a scan.
	if _, ok := inf.GetIndexer().GetIndexers()[ownerIndex]; ok {
		m.indexed = true
	} else if err := inf.AddIndexers(cache.Indexers{ownerIndex: indexByOwner}); err == nil {
		m.indexed = true
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onAdd(gvr, obj) },
		UpdateFunc: func(old, obj any) { c.onUpdate(gvr, old, obj) },
		DeleteFunc: func(obj any) { c.onDelete(gvr, obj) },
	}); err != nil {
		return fmt.Errorf("monitor %s: %w", gvr, err)
	}
	c.mu.Lock()
	c.monitors[gvr.GroupResource()] = m
	c.mu.Unlock()
	return nil
}

func indexByOwner(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, r := range m.GetOwnerReferences() {
		out = append(out, string(r.UID))
	}
	return out, nil
}

func accessor(obj any) metav1.Object {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m
}

func refOf(gvr schema.GroupVersionResource, m metav1.Object) objectRef {
	return objectRef{Resource: gvr, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
}

// onAdd queues what the new object may need: an owner check, the
// processing of a foreground or orphan deletion.
func (c *Controller) onAdd(gvr schema.GroupVersionResource, obj any) {
	m := accessor(obj)
	if m == nil {
		return
	}
	ref := refOf(gvr, m)
	if len(m.GetOwnerReferences()) > 0 {
		c.deleteQueue.Add(ref)
	}
	if m.GetDeletionTimestamp() != nil {
		if hasFinalizer(m, metav1.FinalizerDeleteDependents) {
			c.deleteQueue.Add(ref)
		}
		if hasFinalizer(m, metav1.FinalizerOrphanDependents) {
			c.orphanQueue.Add(ref)
		}
	}
}

func (c *Controller) onUpdate(gvr schema.GroupVersionResource, oldObj, obj any) {
	old, m := accessor(oldObj), accessor(obj)
	if old == nil || m == nil {
		return
	}
	oldRefs, refs := old.GetOwnerReferences(), m.GetOwnerReferences()
	changed := !sameOwners(oldRefs, refs) ||
		(old.GetDeletionTimestamp() == nil) != (m.GetDeletionTimestamp() == nil) ||
		!sets.New(old.GetFinalizers()...).Equal(sets.New(m.GetFinalizers()...))
	if !changed {
		return
	}
	c.onAdd(gvr, obj)
	// An owner waiting in the foreground for this dependent may be free
	// now: its reference is gone or no longer blocks.
	blocking := map[types.UID]bool{}
	for _, r := range refs {
		blocking[r.UID] = r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
	}
	for _, r := range oldRefs {
		stillBlocks, kept := blocking[r.UID]
		if !kept || (r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion && !stillBlocks) {
			c.enqueueOwner(m.GetNamespace(), r)
		}
	}
}

// onDelete queues the dependents of the deleted object (their owner is
// gone) and its owners (one may be waiting for it in the foreground).
func (c *Controller) onDelete(gvr schema.GroupVersionResource, obj any) {
	m := accessor(obj)
	if m == nil {
		return
	}
	for _, d := range c.dependents(m.GetUID()) {
		c.deleteQueue.Add(d.ref)
	}
	for _, r := range m.GetOwnerReferences() {
		c.enqueueOwner(m.GetNamespace(), r)
	}
}

func (c *Controller) enqueueOwner(dependentNS string, r metav1.OwnerReference) {
	gvr, namespaced, err := c.resourceFor(r.APIVersion, r.Kind)
	if err != nil {
		return
	}
	ns := ""
	if namespaced {
		ns = dependentNS
	}
	c.deleteQueue.Add(objectRef{Resource: gvr, Namespace: ns, Name: r.Name, UID: r.UID})
}

func sameOwners(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID || !boolEq(a[i].BlockOwnerDeletion, b[i].BlockOwnerDeletion) {
			return false
		}
	}
	return true
}

func boolEq(a, b *bool) bool {
	return (a != nil && *a) == (b != nil && *b)
}

// dependent is one cached object that names an owner.
type dependent struct {
	ref  objectRef
	meta metav1.Object
}

// dependents lists the cached objects whose ownerReferences name uid.
func (c *Controller) dependents(uid types.UID) []dependent {
	c.mu.RLock()
	monitors := make([]*monitor, 0, len(c.monitors))
	for _, m := range c.monitors {
		monitors = append(monitors, m)
	}
	c.mu.RUnlock()
	var out []dependent
	for _, mon := range monitors {
		var objs []any
		if mon.indexed {
			objs, _ = mon.informer.GetIndexer().ByIndex(ownerIndex, string(uid))
		} else {
			objs = mon.informer.GetStore().List()
		}
		for _, o := range objs {
			m := accessor(o)
			if m == nil || ownerRefTo(m, uid) == nil {
				continue
			}
			out = append(out, dependent{ref: refOf(mon.gvr, m), meta: m})
		}
	}
	return out
}

// UnwatchedOwnerRecheck is how often an object is looked at again while an
// owner of it is of a resource no synced monitor watches yet.
const UnwatchedOwnerRecheck = 5 * time.Second

// watching reports whether a synced monitor would see owner r deleted.
// Owners of ignored or unknown resources count as watched: nothing would
// ever watch them.
func (c *Controller) watching(r metav1.OwnerReference) bool {
	gvr, _, err := c.resourceFor(r.APIVersion, r.Kind)
	if err != nil || ignored.Has(gvr.GroupResource()) {
		return true
	}
	c.mu.RLock()
	mon := c.monitors[gvr.GroupResource()]
	c.mu.RUnlock()
	return mon != nil && mon.informer.HasSynced()
}

// cached returns the cached object of resource gr named ns/name.
func (c *Controller) cached(gr schema.GroupResource, ns, name string) (metav1.Object, bool) {
	c.mu.RLock()
	mon := c.monitors[gr]
	c.mu.RUnlock()
	if mon == nil {
		return nil, false
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := mon.informer.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	m := accessor(obj)
	return m, m != nil
}

// resourceFor maps an ownerReference's apiVersion and kind to a
// resource, refreshing discovery once if the kind is unknown.
func (c *Controller) resourceFor(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("owner apiVersion %q: %w", apiVersion, err)
	}
	c.mu.RLock()
	mapper := c.mapper
	c.mu.RUnlock()
	if mapper == nil {
		return schema.GroupVersionResource{}, false, errors.New("no REST mapping yet")
	}
	mapping, err := mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("map %s %s: %w", apiVersion, kind, err)
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func hasFinalizer(m metav1.Object, f string) bool {
	for _, x := range m.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func ownerRefTo(m metav1.Object, uid types.UID) *metav1.OwnerReference {
	refs := m.GetOwnerReferences()
	for i := range refs {
		if refs[i].UID == uid {
			return &refs[i]
		}
	}
	return nil
}
