// Package serviceaccount is the controller that keeps a "default"
// ServiceAccount in every active namespace, as upstream's
// serviceaccount-controller does: pods are refused admission in a
// namespace until it exists.
package serviceaccount

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry.
const Name = "serviceaccount"

// DefaultName is the account every namespace gets.
const DefaultName = "default"

// Controller creates the default ServiceAccount of each namespace.
type Controller struct {
	client   kubernetes.Interface
	nsLister corelisters.NamespaceLister
	saLister corelisters.ServiceAccountLister
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]
}

// New builds the controller; it registers informers on namespaces and
// serviceaccounts and starts nothing.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	nsInf := cc.Informers.Core().V1().Namespaces()
	saInf := cc.Informers.Core().V1().ServiceAccounts()
	c := &Controller{
		client:   cc.Client,
		nsLister: nsInf.Lister(),
		saLister: saInf.Lister(),
		synced:   []cache.InformerSynced{nsInf.Informer().HasSynced, saInf.Informer().HasSynced},
	}
	workers := 1
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	enqueueNS := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			c.queue.Add(ns.Name)
		}
	}
	if _, err := nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNS,
		UpdateFunc: func(_, obj any) { enqueueNS(obj) },
	}); err != nil {
		return nil, fmt.Errorf("serviceaccount: namespace handler: %w", err)
	}
	if _, err := saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if sa, ok := obj.(*corev1.ServiceAccount); ok && sa.Name == DefaultName {
				c.queue.Add(sa.Namespace)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("serviceaccount: serviceaccount handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// sync makes sure namespace ns has its default ServiceAccount.
func (c *Controller) sync(ctx context.Context, ns string) error {
	n, err := c.nsLister.Get(ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", ns, err)
	}
	if n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating {
		return nil
	}
	if _, err := c.saLister.ServiceAccounts(ns).Get(DefaultName); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get serviceaccount %s/%s: %w", ns, DefaultName, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName}}
	_, err = c.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace began terminating after our cache saw it.
		return nil
	default:
		return fmt.Errorf("create serviceaccount %s/%s: %w", ns, DefaultName, err)
	}
}
