// Package endpointslice is the EndpointSlice controller: for every
// Service with a selector it keeps EndpointSlices (labelled with the
// service name and managed-by endpointslice-controller.k8s.io, owned by
// the Service) listing the selected pods with ready, serving and
// terminating conditions, ports resolved by name from the pods' container
// ports, node name and zone, and hostnames for pods in the service's
// subdomain; at most MaxEndpointsPerSlice endpoints a slice.
// Services without a selector are left alone.
package endpointslice

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

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "endpointslice"

// MaxEndpointsPerSlice is upstream's default --max-endpoints-per-slice.
const MaxEndpointsPerSlice = 100

// ZoneLabel is the node label that gives an endpoint its zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// Controller keeps the EndpointSlices of selector services.
type Controller struct {
	client      kubernetes.Interface
	svcLister   corelisters.ServiceLister
	podLister   corelisters.PodLister
	nodeLister  corelisters.NodeLister
	sliceLister discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	queue       *worker.Queue[string]
	max         int
}

// New builds the controller and registers its informers.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	svcInf := cc.Informers.Core().V1().Services()
	podInf := cc.Informers.Core().V1().Pods()
	nodeInf := cc.Informers.Core().V1().Nodes()
	sliceInf := cc.Informers.Discovery().V1().EndpointSlices()
	c := &Controller{
		client:      cc.Client,
		svcLister:   svcInf.Lister(),
		podLister:   podInf.Lister(),
		nodeLister:  nodeInf.Lister(),
		sliceLister: sliceInf.Lister(),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced,
			nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
		max: MaxEndpointsPerSlice,
	}
	workers := 5
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{svcInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueObject,
			UpdateFunc: func(_, obj any) { c.enqueueObject(obj) },
			DeleteFunc: c.enqueueObject,
		}},
		{podInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.enqueuePodServices(obj, nil) },
			UpdateFunc: func(old, obj any) { c.enqueuePodServices(obj, old) },
			DeleteFunc: func(obj any) { c.enqueuePodServices(obj, nil) },
		}},
		{sliceInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueSliceService,
			UpdateFunc: func(_, obj any) { c.enqueueSliceService(obj) },
			DeleteFunc: c.enqueueSliceService,
		}},
		{nodeInf.Informer(), cache.ResourceEventHandlerFuncs{
			UpdateFunc: c.nodeUpdated,
		}},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("endpointslice: handler: %w", err)
		}
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		c.queue.Add(key)
	}
}

// enqueuePodServices queues the services selecting the pod now or before.
func (c *Controller) enqueuePodServices(obj, old any) {
	for _, o := range []any{obj, old} {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		pod, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		svcs, err := c.svcLister.Services(pod.Namespace).List(labels.Everything())
		if err != nil {
			continue
		}
		for _, s := range svcs {
			if s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				c.queue.Add(pod.Namespace + "/" + s.Name)
			}
		}
	}
}

func (c *Controller) enqueueSliceService(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels[discoveryv1.LabelServiceName] == "" {
		return
	}
	c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
}

// nodeUpdated requeues every service with endpoints on a node whose zone
// changed.
func (c *Controller) nodeUpdated(old, obj any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := obj.(*corev1.Node)
	if !ok1 || !ok2 || o.Labels[ZoneLabel] == n.Labels[ZoneLabel] {
		return
	}
	slices, err := c.sliceLister.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return
	}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && *ep.NodeName == n.Name {
				c.queue.Add(s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName])
				break
			}
		}
	}
}

// sync brings the slices of one service in line with its pods.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	existing, err := c.sliceLister.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ManagedBy}))
	if err != nil {
		return fmt.Errorf("list endpointslices of %s: %w", key, err)
	}
	svc, err := c.svcLister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Gone: its slices go too (the garbage collector would also see to it).
		return c.apply(ctx, changes{delete: existing})
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	if svc.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.podLister.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", key, err)
	}
	groups := desiredGroups(svc, pods, c.zoneOf)
	return c.apply(ctx, plan(svc, existing, groups, c.max))
}

func (c *Controller) zoneOf(node string) string {
	n, err := c.nodeLister.Get(node)
	if err != nil {
		return ""
	}
	return n.Labels[ZoneLabel]
}

// apply writes the planned changes: creates and updates first, then
// deletes, so that an endpoint is never missing from every slice.
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
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete endpointslice %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}
