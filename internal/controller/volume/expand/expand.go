// Package expand is the persistentvolume-expander controller: upstream's
// expand controller for a cluster without in-tree volume plugins.
//
// Upstream expands a claim itself only through an in-tree plugin that can;
// for every other volume it records that an external resizer is expected
// (event ExternalExpanding) and leaves the claim to it. Skiff has no
// in-tree plugins, so that is all this controller does: a bound claim whose
// requested storage exceeds its status capacity gets the event once per
// requested size. The resizing itself is the resizer's: for local-path
// volumes the node agent's provisioner (internal/localpath) plays the part
// of CSI's external-resizer.
package expand

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in --controllers (upstream's).
const Name = "persistentvolume-expander"

// ComponentName is the source of its events (upstream's).
const ComponentName = "volume_expand"

// ExternalExpanding is the event reason upstream uses when a resizer
// outside the controller manager is to expand the claim.
const ExternalExpanding = "ExternalExpanding"

// Controller is the persistentvolume-expander controller.
type Controller struct {
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	recorder record.EventRecorder
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]

	mu sync.Mutex
	// told is the requested size each claim was last given the event for,
	// so that a resync does not repeat it.
	told map[types.UID]string
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	core := cc.Informers.Core().V1()
	c := &Controller{
		claims:   core.PersistentVolumeClaims().Lister(),
		volumes:  core.PersistentVolumes().Lister(),
		recorder: cc.Recorder,
		synced:   []cache.InformerSynced{core.PersistentVolumeClaims().Informer().HasSynced, core.PersistentVolumes().Informer().HasSynced},
		told:     map[types.UID]string{},
	}
	c.queue = worker.NewQueue("volume_expand", c.Sync, worker.Options[string]{Clock: cc.Clock})
	if _, err := core.PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, obj any) { c.claimChanged(obj) },
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return nil, fmt.Errorf("%s: claims handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) claimChanged(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && Expanding(pvc) {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

func (c *Controller) claimDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.mu.Lock()
		delete(c.told, pvc.UID)
		c.mu.Unlock()
	}
}

// Expanding reports whether a bound claim asks for more storage than its
// status holds: a resize is wanted or under way.
func Expanding(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return false
	}
	want, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return false
	}
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	return want.Cmp(have) > 0
}

// Sync records, once per requested size, that the claim waits for an
// external resizer.
func (c *Controller) Sync(_ context.Context, key string) error {
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
	if !Expanding(pvc) {
		return nil
	}
	pv, err := c.volumes.Get(pvc.Spec.VolumeName)
	if err != nil {
		return err // not in the cache yet: retried
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return fmt.Errorf("persistent volume %s is not bound to claim %s", pv.Name, key)
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	c.mu.Lock()
	seen := c.told[pvc.UID] == want.String()
	c.told[pvc.UID] = want.String()
	c.mu.Unlock()
	if !seen {
		c.recorder.Event(pvc, corev1.EventTypeNormal, ExternalExpanding, "waiting for an external controller to expand this PVC")
	}
	return nil
}
