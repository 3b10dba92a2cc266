// Package ephemeral is upstream's ephemeral-volume-controller: for every
// generic ephemeral volume of a pod it creates the PersistentVolumeClaim
// <pod>-<volume> from the volume's claim template, controlled by the pod
// (so the garbage collector deletes it with the pod). A claim of that name
// not controlled by the pod is an error (event FailedBinding on the pod,
// "ephemeral volume v: PVC ns/x was not created for pod ns/p (pod is not
// owner)"), and the pod cannot start, as upstream. A deleted claim whose
// pod still exists is created again.
package ephemeral

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	ephemeralhelpers "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry (upstream's).
const Name = "ephemeral-volume-controller"

// ComponentName is the source of its events, upstream's.
const ComponentName = "ephemeral_volume"

// DefaultWorkers is upstream's --concurrent-ephemeralvolume-syncs.
const DefaultWorkers = 5

// Controller creates the claims of generic ephemeral volumes.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	pods     corelisters.PodLister
	claims   corelisters.PersistentVolumeClaimLister
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	pods := cc.Informers.Core().V1().Pods()
	pvcs := cc.Informers.Core().V1().PersistentVolumeClaims()
	c := &Controller{
		client:   cc.Client,
		recorder: cc.Recorder,
		pods:     pods.Lister(),
		claims:   pvcs.Lister(),
		synced:   []cache.InformerSynced{pods.Informer().HasSynced, pvcs.Informer().HasSynced},
	}
	workers := DefaultWorkers
	if n := cc.Options.ConcurrentSyncs[Name]; n > 0 {
		workers = n
	}
	c.queue = worker.NewQueue("ephemeral_volume", c.sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePod,
		UpdateFunc: func(_, obj any) { c.enqueuePod(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", Name, err)
	}
	if _, err := pvcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return nil, fmt.Errorf("%s: claim handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.Ephemeral != nil {
			c.queue.Add(pod.Namespace + "/" + pod.Name)
			return
		}
	}
}

// claimDeleted brings back the claim of a pod that still uses it: its
// controller reference names the pod.
func (c *Controller) claimDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pvc); ref != nil && ref.Kind == "Pod" && ref.APIVersion == "v1" {
		if pod, err := c.pods.Pods(pvc.Namespace).Get(ref.Name); err == nil {
			c.enqueuePod(pod)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Ephemeral == nil {
			continue
		}
		if err := c.ensureClaim(ctx, pod, v); err != nil {
			c.recorder.Event(pod, corev1.EventTypeWarning, "FailedBinding", fmt.Sprintf("ephemeral volume %s: %v", v.Name, err))
			return fmt.Errorf("pod %s, ephemeral volume %s: %w", key, v.Name, err)
		}
	}
	return nil
}

func (c *Controller) ensureClaim(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	name := ephemeralhelpers.VolumeClaimName(pod, v)
	existing, err := c.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
	if err == nil {
		return ephemeralhelpers.VolumeIsForPod(pod, existing)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	tmpl := v.Ephemeral.VolumeClaimTemplate
	if tmpl == nil {
		return fmt.Errorf("no volumeClaimTemplate")
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			Annotations: tmpl.Annotations,
			Labels:      tmpl.Labels,
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	_, err = c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PVC %s: %w (retrying once the cache has it)", name, err)
	}
	if err != nil {
		return fmt.Errorf("create PVC %s: %w", name, err)
	}
	return nil
}
