// Package resourcequota keeps each ResourceQuota's status exact, as
// upstream's resource-quota controller does: status.hard mirrors
// spec.hard, and status.used is recounted from the objects in the quota's
// namespace (internal/quota measures them) whenever the quota changes,
// when a pod, service or claim there changes what it charges or is
// deleted, and
// every ResyncPeriod (which also catches objects counted only by
// count/<resource>, read through the metadata client). The ResourceQuota
// admission plugin charges new objects to status.used as they are
// created; this controller releases what deleted objects held and
// corrects any charge whose write then failed.
package resourcequota

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
	"github.com/skiff-sh/skiff/internal/quota"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "resourcequota"

// DefaultWorkers is upstream's --concurrent-resource-quota-syncs.
const DefaultWorkers = 5

// DefaultResyncPeriod is upstream's --resource-quota-sync-period.
const DefaultResyncPeriod = 5 * time.Minute

// Controller is the resource-quota controller.
type Controller struct {
	client   kubernetes.Interface
	metadata metadata.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	clock    clock.WithTicker

	quotas   corelisters.ResourceQuotaLister
	pods     corelisters.PodLister
	services corelisters.ServiceLister
	claims   corelisters.PersistentVolumeClaimLister
	synced   []cache.InformerSynced

	queue *worker.Queue[string]
	// count is how many objects of a resource a namespace holds (the
	// metadata client; tests replace it).
	count func(ctx context.Context, gr schema.GroupResource, ns string) (int64, error)

	mapperMu sync.Mutex
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs[Name]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	resync := cc.Options.ResourceQuotaSyncPeriod
	if resync <= 0 {
		resync = DefaultResyncPeriod
	}
	core := cc.Informers.Core().V1()
	c := &Controller{
		client:   cc.Client,
		metadata: cc.Metadata,
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cc.Client.Discovery())),
		clock:    clk,
		quotas:   core.ResourceQuotas().Lister(),
		pods:     core.Pods().Lister(),
		services: core.Services().Lister(),
		claims:   core.PersistentVolumeClaims().Lister(),
		synced: []cache.InformerSynced{
			core.ResourceQuotas().Informer().HasSynced, core.Pods().Informer().HasSynced,
			core.Services().Informer().HasSynced, core.PersistentVolumeClaims().Informer().HasSynced,
		},
	}
	c.count = c.countByMetadata
	c.queue = worker.NewQueue("resourcequota_primary", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if _, err := core.ResourceQuotas().Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueQuota,
		UpdateFunc: c.quotaUpdated,
	}, resync); err != nil {
		return nil, fmt.Errorf("resourcequota: quotas handler: %w", err)
	}
	for name, inf := range map[string]cache.SharedIndexInformer{
		"pods": core.Pods().Informer(), "services": core.Services().Informer(), "persistentvolumeclaims": core.PersistentVolumeClaims().Informer(),
	} {
		// Not on add: admission charged the new object already, and a
		// recount from an informer that has not seen it yet would undo the
		// charge (upstream replenishes on updates and deletes only).
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: c.objectUpdated,
			DeleteFunc: c.enqueueNamespaceOf,
		}); err != nil {
			return nil, fmt.Errorf("resourcequota: %s handler: %w", name, err)
		}
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueueQuota(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// quotaUpdated enqueues a quota whose spec.hard changed, or on the
// periodic resync (old and new the same version), not on status writes:
// those are admission's charges and this controller's own, and a recount
// from informers that have not yet seen a just-charged object would undo
// its charge (upstream watches quotas the same way).
func (c *Controller) quotaUpdated(old, obj any) {
	o, ok1 := old.(*corev1.ResourceQuota)
	n, ok2 := obj.(*corev1.ResourceQuota)
	if !ok1 || !ok2 {
		return
	}
	if o.ResourceVersion == n.ResourceVersion || !quota.Equals(o.Spec.Hard, n.Spec.Hard) || !quota.Equals(n.Spec.Hard, n.Status.Hard) {
		c.enqueueQuota(obj)
	}
}

// enqueueNamespaceOf enqueues every quota in the namespace of obj.
func (c *Controller) enqueueNamespaceOf(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	quotas, err := c.quotas.ResourceQuotas(o.GetNamespace()).List(labels.Everything())
	if err != nil {
		return
	}
	for _, q := range quotas {
		c.queue.Add(q.Namespace + "/" + q.Name)
	}
}

// objectUpdated enqueues the namespace's quotas when what obj charges may
// have changed (a pod ended or is ending, a claim's request or class, a
// service's type or ports), not on every status write.
func (c *Controller) objectUpdated(old, obj any) {
	now := c.clock.Now()
	changed := true
	switch o := obj.(type) {
	case *corev1.Pod:
		if p, ok := old.(*corev1.Pod); ok {
			changed = quota.PodCharged(p, now) != quota.PodCharged(o, now) || quota.IsTerminating(p) != quota.IsTerminating(o) ||
				(p.DeletionTimestamp == nil) != (o.DeletionTimestamp == nil) || p.Generation != o.Generation
		}
	case *corev1.Service:
		if s, ok := old.(*corev1.Service); ok {
			changed = !equality.Semantic.DeepEqual(s.Spec, o.Spec)
		}
	case *corev1.PersistentVolumeClaim:
		if p, ok := old.(*corev1.PersistentVolumeClaim); ok {
			changed = !equality.Semantic.DeepEqual(p.Spec, o.Spec) || !equality.Semantic.DeepEqual(p.Status.AllocatedResources, o.Status.AllocatedResources)
		}
	}
	if changed {
		c.enqueueNamespaceOf(obj)
	}
}

// Sync recounts the quota named by key and writes its status if it
// changed.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	q, err := c.quotas.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	used, err := c.usage(ctx, q)
	if err != nil {
		return err
	}
	if quota.Equals(q.Status.Hard, q.Spec.Hard) && quota.Equals(q.Status.Used, used) {
		return nil
	}
	next := q.DeepCopy()
	next.Status.Hard = q.Spec.Hard.DeepCopy()
	next.Status.Used = used
	if _, err := c.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update status of resource quota %s: %w", key, err)
	}
	return nil
}

// usage counts, for every resource q limits, what the objects in its
// namespace charge (zero when nothing does).
func (c *Controller) usage(ctx context.Context, q *corev1.ResourceQuota) (corev1.ResourceList, error) {
	names := quota.ResourceNames(q.Spec.Hard)
	// Matches reads status.hard; measure against the spec.
	measure := q.DeepCopy()
	measure.Status.Hard = q.Spec.Hard
	total := corev1.ResourceList{}
	covered := map[corev1.ResourceName]bool{}
	now := c.clock.Now()
	for _, gr := range []schema.GroupResource{quota.Pods, quota.Services, quota.PersistentVolumeClaims} {
		matching := quota.MatchingResources(gr, names)
		if len(matching) == 0 {
			continue
		}
		objs, err := c.list(gr, q.Namespace)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if ok, err := quota.Matches(measure, gr, o); err != nil || !ok {
				continue
			}
			total = quota.Add(total, quota.Mask(quota.Usage(gr, o, now), matching))
		}
		for _, n := range matching {
			covered[n] = true
		}
	}
	for _, n := range names {
		if covered[n] {
			continue
		}
		gr, ok := quota.ParseObjectCountName(n)
		if !ok {
			gr, ok = quota.LegacyCountResource(n)
		}
		if !ok || len(quota.ScopeSelectors(q)) > 0 {
			continue // not counted, or scoped: only pods and claims have scopes
		}
		count, err := c.count(ctx, gr, q.Namespace)
		if err != nil {
			return nil, err
		}
		total[n] = *resource.NewQuantity(count, resource.DecimalSI)
	}
	used := corev1.ResourceList{}
	for _, n := range names {
		v, ok := total[n]
		if !ok {
			v = *resource.NewQuantity(0, resource.DecimalSI)
		}
		used[n] = v
	}
	return used, nil
}

func (c *Controller) list(gr schema.GroupResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	switch gr {
	case quota.Pods:
		l, err := c.pods.Pods(ns).List(labels.Everything())
		for _, o := range l {
			out = append(out, o)
		}
		return out, err
	case quota.Services:
		l, err := c.services.Services(ns).List(labels.Everything())
		for _, o := range l {
			out = append(out, o)
		}
		return out, err
	case quota.PersistentVolumeClaims:
		l, err := c.claims.PersistentVolumeClaims(ns).List(labels.Everything())
		for _, o := range l {
			out = append(out, o)
		}
		return out, err
	}
	return nil, nil
}

// countByMetadata is the number of gr's objects in ns, read through the
// metadata client (the resource's preferred version, from discovery).
func (c *Controller) countByMetadata(ctx context.Context, gr schema.GroupResource, ns string) (int64, error) {
	gvr, err := c.resolve(gr)
	if err != nil {
		return 0, nil // a resource the server does not serve counts nothing
	}
	list, err := c.metadata.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("count %s in %s: %w", gr, ns, err)
	}
	return int64(len(list.Items)), nil
}

func (c *Controller) resolve(gr schema.GroupResource) (schema.GroupVersionResource, error) {
	c.mapperMu.Lock()
	defer c.mapperMu.Unlock()
	gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		c.mapper.Reset()
		gvr, err = c.mapper.ResourceFor(gr.WithVersion(""))
	}
	return gvr, err
}
