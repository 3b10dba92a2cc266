// Package endpoints is the legacy Endpoints controller: for every Service
// with a selector it keeps an Endpoints object of the same name whose
// subsets list the ready addresses and the notReadyAddresses of the
// selected pods, grouped by their resolved ports. At most MaxAddresses
// addresses are kept; beyond that the object is truncated and annotated
// endpoints.kubernetes.io/over-capacity: truncated, as upstream does.
// Services without a selector are left alone (their Endpoints are the
// user's).
package endpoints

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/podendpoint"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "endpoints"

const (
	// MaxAddresses is the most addresses one Endpoints object holds.
	MaxAddresses = 1000
	// OverCapacityAnnotation marks a truncated Endpoints object.
	OverCapacityAnnotation = "endpoints.kubernetes.io/over-capacity"
	// HeadlessLabel marks the Endpoints of headless services.
	HeadlessLabel = "service.kubernetes.io/headless"
)

// Controller keeps the Endpoints of selector services.
type Controller struct {
	client    kubernetes.Interface
	svcLister corelisters.ServiceLister
	podLister corelisters.PodLister
	epLister  corelisters.EndpointsLister
	synced    []cache.InformerSynced
	queue     *worker.Queue[string]
}

// New builds the controller and registers its informers.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	svcInf := cc.Informers.Core().V1().Services()
	podInf := cc.Informers.Core().V1().Pods()
	epInf := cc.Informers.Core().V1().Endpoints()
	c := &Controller{
		client:    cc.Client,
		svcLister: svcInf.Lister(),
		podLister: podInf.Lister(),
		epLister:  epInf.Lister(),
		synced:    []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, epInf.Informer().HasSynced},
	}
	workers := 5
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("endpoints: handler: %w", err)
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueuePodServices(obj, nil) },
		UpdateFunc: func(old, obj any) { c.enqueuePodServices(obj, old) },
		DeleteFunc: func(obj any) { c.enqueuePodServices(obj, nil) },
	}); err != nil {
		return nil, fmt.Errorf("endpoints: handler: %w", err)
	}
	// Only a deleted Endpoints brings its service back to the queue, as
	// upstream's: an Endpoints a user made without a Service (or changed)
	// is left alone until its Service comes or goes.
	if _, err := epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("endpoints: handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

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

// sync writes the Endpoints of one service.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.svcLister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete endpoints %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s: %w", key, err)
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName || svc.DeletionTimestamp != nil {
		return nil
	}
	pods, err := c.podLister.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", key, err)
	}
	subsets, truncated := Subsets(svc, pods)

	cur, err := c.epLister.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get endpoints %s: %w", key, err)
	}
	want := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if cur != nil {
		want = cur.DeepCopy()
	}
	want.Labels = map[string]string{}
	for k, v := range svc.Labels {
		want.Labels[k] = v
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		want.Labels[HeadlessLabel] = ""
	} else {
		delete(want.Labels, HeadlessLabel)
	}
	if truncated {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[OverCapacityAnnotation] = "truncated"
	} else {
		delete(want.Annotations, OverCapacityAnnotation)
	}
	want.Subsets = subsets
	if cur != nil && apiequality.Semantic.DeepEqual(normSubsets(cur.Subsets), normSubsets(want.Subsets)) &&
		apiequality.Semantic.DeepEqual(emptyNil(cur.Labels), emptyNil(want.Labels)) &&
		cur.Annotations[OverCapacityAnnotation] == want.Annotations[OverCapacityAnnotation] {
		return nil
	}
	if cur == nil {
		_, err = c.client.CoreV1().Endpoints(ns).Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
	} else {
		_, err = c.client.CoreV1().Endpoints(ns).Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write endpoints %s: %w", key, err)
	}
	return nil
}

func emptyNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func normSubsets(s []corev1.EndpointSubset) []corev1.EndpointSubset {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Subsets computes the subsets of svc from the pods it selects: one
// subset per distinct resolved port set, addresses sorted, at most
// MaxAddresses addresses in all (ready ones first); truncated says
// whether some were left out.
func Subsets(svc *corev1.Service, pods []*corev1.Pod) (subsets []corev1.EndpointSubset, truncated bool) {
	type bucket struct {
		ports           []corev1.EndpointPort
		ready, notReady []corev1.EndpointAddress
	}
	buckets := map[string]*bucket{}
	for _, pod := range pods {
		if !podendpoint.Include(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		ip := pod.Status.PodIP
		if ip == "" {
			ip = pod.Status.PodIPs[0].IP
		}
		addr := corev1.EndpointAddress{IP: ip,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pod.Spec.NodeName != "" {
			n := pod.Spec.NodeName
			addr.NodeName = &n
		}
		if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
			addr.Hostname = pod.Spec.Hostname
		}
		var ports []corev1.EndpointPort
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, err := podendpoint.FindPort(pod, sp)
			if err != nil {
				continue
			}
			proto := sp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			ports = append(ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: proto, AppProtocol: sp.AppProtocol})
		}
		if len(svc.Spec.Ports) > 0 && len(ports) == 0 {
			continue // a pod that serves none of the ports is not an endpoint
		}
		sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
		var kb strings.Builder
		for _, p := range ports {
			fmt.Fprintf(&kb, "%s/%s/%d;", p.Name, p.Protocol, p.Port)
		}
		b := buckets[kb.String()]
		if b == nil {
			b = &bucket{ports: ports}
			buckets[kb.String()] = b
		}
		if svc.Spec.PublishNotReadyAddresses || (podendpoint.Ready(pod) && pod.DeletionTimestamp == nil) {
			b.ready = append(b.ready, addr)
		} else {
			b.notReady = append(b.notReady, addr)
		}
	}
	keys := make([]string, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	byIP := func(a []corev1.EndpointAddress) {
		sort.Slice(a, func(i, j int) bool {
			if a[i].IP != a[j].IP {
				return a[i].IP < a[j].IP
			}
			return a[i].TargetRef.UID < a[j].TargetRef.UID
		})
	}
	// Ready addresses take the capacity first, across subsets.
	room := MaxAddresses
	for _, k := range keys {
		b := buckets[k]
		byIP(b.ready)
		byIP(b.notReady)
		if len(b.ready) > room {
			b.ready, truncated = b.ready[:room], true
		}
		room -= len(b.ready)
	}
	for _, k := range keys {
		b := buckets[k]
		if len(b.notReady) > room {
			b.notReady, truncated = b.notReady[:room], true
		}
		room -= len(b.notReady)
		if len(b.ready) == 0 && len(b.notReady) == 0 {
			continue
		}
		subsets = append(subsets, corev1.EndpointSubset{Addresses: b.ready, NotReadyAddresses: b.notReady, Ports: b.ports})
	}
	return subsets, truncated
}
