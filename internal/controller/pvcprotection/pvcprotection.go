// Package pvcprotection removes the kubernetes.io/pvc-protection
// finalizer from a PersistentVolumeClaim being deleted once no pod uses
// it, as upstream's pvc-protection controller does: a claim is in use
// while a pod scheduled to a node names it (directly, or as the pod's
// generic ephemeral volume, unless that pod is shut down: deleted with a
// zero grace period). The informer's answer "unused" is checked against
// a live list of the namespace's pods before the finalizer goes. Claims
// without the finalizer (created before the StorageObjectInUseProtection
// admission plugin) get it.
package pvcprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "pvc-protection"

// Finalizer is the finalizer this controller removes.
const Finalizer = "kubernetes.io/pvc-protection"

// Controller is the pvc-protection controller.
type Controller struct {
	client kubernetes.Interface
	claims corelisters.PersistentVolumeClaimLister
	pods   corelisters.PodLister
	synced []cache.InformerSynced
	queue  *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	core := cc.Informers.Core().V1()
	c := &Controller{
		client: cc.Client,
		claims: core.PersistentVolumeClaims().Lister(),
		pods:   core.Pods().Lister(),
		synced: []cache.InformerSynced{core.PersistentVolumeClaims().Informer().HasSynced, core.Pods().Informer().HasSynced},
	}
	workers := cc.Options.ConcurrentSyncs[Name]
	if workers <= 0 {
		workers = 1
	}
	c.queue = worker.NewQueue("pvcprotection", c.Sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	if _, err := core.PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("pvc-protection: claims handler: %w", err)
	}
	if _, err := core.Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: c.podChanged,
	}); err != nil {
		return nil, fmt.Errorf("pvc-protection: pods handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) claimChanged(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if deletionCandidate(pvc) || needsFinalizer(pvc) {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// podChanged enqueues the claims a changed or deleted pod names.
func (c *Controller) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			c.queue.Add(pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			c.queue.Add(pod.Namespace + "/" + pod.Name + "-" + v.Name)
		}
	}
}

func deletionCandidate(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, Finalizer)
}

func needsFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp == nil && !slices.Contains(pvc.Finalizers, Finalizer)
}

// Sync removes the finalizer of an unused claim being deleted, or adds it
// to a claim that lacks it.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case deletionCandidate(pvc):
		used, err := c.inUse(ctx, pvc)
		if err != nil || used {
			if used {
				klog.FromContext(ctx).V(2).Info("Keeping PVC because it is being used", "PVC", klog.KObj(pvc))
			}
			return err
		}
		next := pvc.DeepCopy()
		next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == Finalizer })
		_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	case needsFinalizer(pvc):
		next := pvc.DeepCopy()
		next.Finalizers = append(next.Finalizers, Finalizer)
		_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}

// inUse asks the informer, and when it says unused, the API server.
func (c *Controller) inUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	pods, err := c.pods.Pods(pvc.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, p := range pods {
		if Uses(p, pvc) {
			return true, nil
		}
	}
	live, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods in %s: %w", pvc.Namespace, err)
	}
	for i := range live.Items {
		if Uses(&live.Items[i], pvc) {
			return true, nil
		}
	}
	return false, nil
}

// Uses says a pod keeps pvc from being deleted: it is scheduled and names
// the claim, or the claim is its (not shut down) ephemeral volume.
func Uses(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	shutDown := pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
		if v.Ephemeral != nil && !shutDown && pod.Name+"-"+v.Name == pvc.Name && ownedBy(pvc, pod) {
			return true
		}
	}
	return false
}

func ownedBy(pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pvc)
	return ref != nil && ref.UID == pod.UID
}
