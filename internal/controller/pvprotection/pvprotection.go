// Package pvprotection removes the kubernetes.io/pv-protection finalizer
// from a PersistentVolume being deleted once no claim is bound to it
// (its phase is not Bound), as upstream's pv-protection controller does,
// and adds the finalizer to volumes that lack it.
package pvprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "pv-protection"

// Finalizer is the finalizer this controller removes.
const Finalizer = "kubernetes.io/pv-protection"

// Controller is the pv-protection controller.
type Controller struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	synced  cache.InformerSynced
	queue   *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	pvs := cc.Informers.Core().V1().PersistentVolumes()
	c := &Controller{client: cc.Client, volumes: pvs.Lister(), synced: pvs.Informer().HasSynced}
	c.queue = worker.NewQueue("pvprotection", c.Sync, worker.Options[string]{Clock: cc.Clock})
	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.volumeChanged,
		UpdateFunc: func(_, obj any) { c.volumeChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("pv-protection: volumes handler: %w", err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, []cache.InformerSynced{c.synced}, c.queue)
}

func (c *Controller) volumeChanged(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if ok && (deletionCandidate(pv) || needsFinalizer(pv)) {
		c.queue.Add(pv.Name)
	}
}

func deletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, Finalizer)
}

func needsFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !slices.Contains(pv.Finalizers, Finalizer)
}

// Sync removes the finalizer of an unbound volume being deleted, or adds
// it to a volume that lacks it.
func (c *Controller) Sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	next := pv.DeepCopy()
	switch {
	case deletionCandidate(pv):
		if pv.Status.Phase == corev1.VolumeBound {
			return nil // the update that unbinds it brings it back
		}
		next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == Finalizer })
	case needsFinalizer(pv):
		next.Finalizers = append(next.Finalizers, Finalizer)
	default:
		return nil
	}
	_, err = c.client.CoreV1().PersistentVolumes().Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
