// Package rootcacert is the controller that publishes the cluster CA as
// the kube-root-ca.crt ConfigMap in every namespace (upstream's
// root-ca-cert-publisher), restoring it when it is changed or deleted.
package rootcacert

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
const Name = "root-ca-cert-publisher"

const (
	// ConfigMapName is the published ConfigMap.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey holds the PEM bundle.
	DataKey = "ca.crt"
	// DescriptionAnnotation explains the ConfigMap to people who find it.
	DescriptionAnnotation = "kubernetes.io/description"
	description           = "Contains a CA bundle that can be used to verify the API server when using " +
		"internal endpoints such as the internal service IP or kubernetes.default.svc."
)

// Controller keeps kube-root-ca.crt in every namespace.
type Controller struct {
	client   kubernetes.Interface
	rootCA   string
	nsLister corelisters.NamespaceLister
	cmLister corelisters.ConfigMapLister
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]
}

// New builds the controller. Without a CA (cc.Options.RootCAPEM empty)
// it is disabled: it returns nil and no error.
func New(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if len(cc.Options.RootCAPEM) == 0 {
		return nil, nil
	}
	nsInf := cc.Informers.Core().V1().Namespaces()
	cmInf := cc.Informers.Core().V1().ConfigMaps()
	c := &Controller{
		client:   cc.Client,
		rootCA:   string(cc.Options.RootCAPEM),
		nsLister: nsInf.Lister(),
		cmLister: cmInf.Lister(),
		synced:   []cache.InformerSynced{nsInf.Informer().HasSynced, cmInf.Informer().HasSynced},
	}
	c.queue = worker.NewQueue(Name, c.sync, worker.Options[string]{Workers: 1, Clock: cc.Clock})
	enqueueNS := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			c.queue.Add(ns.Name)
		}
	}
	if _, err := nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNS,
		UpdateFunc: func(_, obj any) { enqueueNS(obj) },
	}); err != nil {
		return nil, fmt.Errorf("rootcacert: namespace handler: %w", err)
	}
	enqueueCM := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ConfigMapName {
			c.queue.Add(cm.Namespace)
		}
	}
	if _, err := cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { enqueueCM(obj) },
		DeleteFunc: enqueueCM,
	}); err != nil {
		return nil, fmt.Errorf("rootcacert: configmap handler: %w", err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// sync creates or repairs the ConfigMap in namespace ns.
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
	cm, err := c.cmLister.ConfigMaps(ns).Get(ConfigMapName)
	if apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Annotations: map[string]string{DescriptionAnnotation: description}},
			Data:       map[string]string{DataKey: c.rootCA},
		}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) ||
			(apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)) {
			return nil
		}
		return fmt.Errorf("create configmap %s/%s: %w", ns, ConfigMapName, err)
	}
	if err != nil {
		return fmt.Errorf("get configmap %s/%s: %w", ns, ConfigMapName, err)
	}
	if len(cm.Data) == 1 && cm.Data[DataKey] == c.rootCA && len(cm.BinaryData) == 0 && cm.Annotations[DescriptionAnnotation] == description {
		return nil
	}
	next := cm.DeepCopy()
	next.Data = map[string]string{DataKey: c.rootCA}
	next.BinaryData = nil
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[DescriptionAnnotation] = description
	if _, err := c.client.CoreV1().ConfigMaps(ns).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the delete event brings us back
		}
		return fmt.Errorf("update configmap %s/%s: %w", ns, ConfigMapName, err)
	}
	return nil
}
