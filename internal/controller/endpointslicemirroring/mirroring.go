// Package endpointslicemirroring is the EndpointSlice mirroring
// controller: the Endpoints of a Service without a selector (written by
// a user or another controller) are mirrored into EndpointSlices labelled
// with the service name and managed-by
// endpointslicemirroring-controller.k8s.io and owned by the Endpoints, so
// that consumers of slices (the service proxy, DNS) see them too.
//
// As upstream's: Endpoints labelled endpointslice.kubernetes.io/skip-mirror
// "true" or carrying a leader-election annotation are not mirrored, nor
// those without a Service or whose Service has a selector (their mirrored
// slices are deleted); each subset contributes at most MaxEndpointsPerSubset
// addresses (ready ones first), one slice per address type and port list.
package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry (upstream's).
const Name = "endpointslicemirroring"

// ComponentName is the source of its events (upstream's).
const ComponentName = "endpoint-slice-mirroring-controller"

// ManagedBy is the value of the managed-by label on mirrored slices.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// MaxEndpointsPerSubset is upstream's default
// --mirroring-max-endpoints-per-subset.
const MaxEndpointsPerSubset = 1000

// Event reasons (upstream's).
const (
	InvalidIPAddress         = "InvalidIPAddress"
	TooManyAddressesToMirror = "TooManyAddressesToMirror"
)

// Controller mirrors custom Endpoints into EndpointSlices.
type Controller struct {
	client      kubernetes.Interface
	recorder    record.EventRecorder
	epLister    corelisters.EndpointsLister
	svcLister   corelisters.ServiceLister
	sliceLister discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	queue       *worker.Queue[string]
	max         int
}

// New builds the controller and registers its informers.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	epInf := cc.Informers.Core().V1().Endpoints()
	svcInf := cc.Informers.Core().V1().Services()
	sliceInf := cc.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:      cc.Client,
		recorder:    cc.Recorder,
		epLister:    epInf.Lister(),
		svcLister:   svcInf.Lister(),
		sliceLister: sliceInf.Lister(),
		synced:      []cache.InformerSynced{epInf.Informer().HasSynced, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		max:         MaxEndpointsPerSubset,
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	workers := 5 // upstream's --mirroring-concurrent-service-endpoint-syncs
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{epInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.endpointsChanged,
			UpdateFunc: func(old, obj any) {
				o, ok1 := old.(*corev1.Endpoints)
				n, ok2 := obj.(*corev1.Endpoints)
				if ok1 && ok2 && (shouldMirror(o) || shouldMirror(n)) {
					c.enqueue(obj)
				}
			},
			DeleteFunc: c.endpointsChanged,
		}},
		{svcInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.serviceChanged,
			UpdateFunc: func(old, obj any) {
				o, ok1 := old.(*corev1.Service)
				n, ok2 := obj.(*corev1.Service)
				if ok1 && ok2 && (o.Spec.Selector == nil) != (n.Spec.Selector == nil) {
					c.enqueue(obj)
				}
			},
			DeleteFunc: c.serviceChanged,
		}},
		{sliceInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.sliceChanged,
			UpdateFunc: func(old, obj any) {
				c.sliceChanged(old)
				c.sliceChanged(obj)
			},
			DeleteFunc: c.sliceChanged,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("endpointslicemirroring: handler: %w", err)
		}
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

func (c *Controller) endpointsChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if ep, ok := obj.(*corev1.Endpoints); ok && shouldMirror(ep) {
		c.enqueue(ep)
	}
}

// serviceChanged queues the Endpoints of a Service without a selector.
func (c *Controller) serviceChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok && svc.Spec.Selector == nil {
		c.enqueue(svc)
	}
}

// sliceChanged queues the Endpoints of a mirrored slice, so that a slice
// changed or deleted by someone else is put back.
func (c *Controller) sliceChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
}

// shouldMirror reports whether ep may be mirrored at all: not labelled
// skip-mirror "true" and not a leader-election record.
func shouldMirror(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !leader
}

// sync brings the mirrored slices of one Endpoints in line with it.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.sliceLister.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return fmt.Errorf("list mirrored endpointslices of %s: %w", key, err)
	}
	ep, err := c.epLister.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.apply(ctx, changes{delete: existing})
	}
	if err != nil {
		return fmt.Errorf("get endpoints %s: %w", key, err)
	}
	if !shouldMirror(ep) {
		return c.apply(ctx, changes{delete: existing})
	}
	svc, err := c.svcLister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return c.apply(ctx, changes{delete: existing})
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Selector != nil {
		// The EndpointSlice controller keeps this service's slices.
		return c.apply(ctx, changes{delete: existing})
	}
	groups, skip := desiredGroups(ep, c.max)
	if skip.invalid > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, InvalidIPAddress,
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", skip.invalid)
	}
	if skip.overflow > 0 {
		c.recorder.Eventf(ep, corev1.EventTypeWarning, TooManyAddressesToMirror,
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped",
			c.max, skip.invalid+skip.overflow)
	}
	return c.apply(ctx, plan(ep, existing, groups))
}

// apply writes the planned changes: creates and updates first, then
// deletes. Deletes carry the UID and resourceVersion the plan saw, so a
// stale cache never deletes a slice that changed since.
func (c *Controller) apply(ctx context.Context, ch changes) error {
	var errs []error
	for _, s := range ch.create {
		if _, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				continue
			}
			errs = append(errs, fmt.Errorf("create endpointslice %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	for _, s := range ch.update {
		if _, err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("update endpointslice %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	for _, s := range ch.delete {
		var pre metav1.Preconditions
		if s.UID != "" {
			pre.UID = &s.UID
		}
		if s.ResourceVersion != "" {
			pre.ResourceVersion = &s.ResourceVersion
		}
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &pre})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete endpointslice %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}
