// Package persistentvolume is the PersistentVolume binder, upstream's
// persistentvolume-binder controller (pkg/controller/volume/persistentvolume,
// v1.37) written again: it binds claims to volumes (size, access modes,
// volume mode, storageClassName, label selector, pre-binding through
// spec.volumeName or a volume's claimRef), keeps both objects' phases
// (claims Pending, Bound, Lost; volumes Available, Bound, Released,
// Failed), reclaims released volumes (Retain keeps them, Delete hands them
// to their provisioner) and asks for dynamic provisioning.
//
// Skiff has no in-tree volume plugins, so every StorageClass provisioner is
// external, as CSI drivers are upstream: for a claim of a class the binder
// cannot satisfy from existing volumes it sets the
// volume.kubernetes.io/storage-provisioner annotations (event
// ExternalProvisioning) and the provisioner (Skiff's local-path one runs in
// every node agent, internal/localpath) creates a volume pre-bound to the
// claim, which the next sync binds. Released volumes of reclaim policy
// Delete that an external provisioner made are left to it; any other
// volume of policy Delete has no deleter and goes Failed
// (VolumeFailedDelete), as upstream without a matching plugin. Claims
// without a class get the default class (retroactive default StorageClass
// assignment, GA upstream). WaitForFirstConsumer claims are left to the
// scheduler's VolumeBinding plugin until it sets
// volume.kubernetes.io/selected-node.
//
// Deviations: upstream keeps its own copy of the caches updated after each
// write; this controller reads the shared listers and relies on
// resourceVersion conflicts to retry from a stale cache. The Recycle policy
// (deprecated upstream) has no recycler here: such a volume goes Failed
// with VolumeFailedRecycle, as upstream when no plugin can recycle it.
package persistentvolume

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in the manager's registry (upstream's).
const Name = "persistentvolume-binder"

// ComponentName is the source of its events, upstream's.
const ComponentName = "persistentvolume-controller"

// SyncPeriod is upstream's --pvclaimbinder-sync-period: every claim and
// volume is synced again this often.
const SyncPeriod = 15 * time.Second

// Event reasons, upstream's (pkg/controller/volume/events).
const (
	reasonFailedBinding         = "FailedBinding"
	reasonVolumeMismatch        = "VolumeMismatch"
	reasonVolumeFailedRecycle   = "VolumeFailedRecycle"
	reasonVolumeFailedDelete    = "VolumeFailedDelete"
	reasonProvisioningFailed    = "ProvisioningFailed"
	reasonExternalProvisioning  = "ExternalProvisioning"
	reasonWaitForFirstConsumer  = "WaitForFirstConsumer"
	reasonWaitForPodScheduled   = "WaitForPodScheduled"
	reasonClaimLost             = "ClaimLost"
	reasonClaimMisbound         = "ClaimMisbound"
	reasonUnknownReclaimPolicy  = "VolumeUnknownReclaimPolicy"
	inTreeProvisionerNamePrefix = "kubernetes.io/"
)

// Controller is the PersistentVolume binder.
type Controller struct {
	client      kubernetes.Interface
	recorder    record.EventRecorder
	clock       clock.WithTicker
	volumes     corelisters.PersistentVolumeLister
	claims      corelisters.PersistentVolumeClaimLister
	classes     storagelisters.StorageClassLister
	pods        corelisters.PodLister
	synced      []cache.InformerSynced
	volumeQueue *worker.Queue[string]
	claimQueue  *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	pvs := cc.Informers.Core().V1().PersistentVolumes()
	pvcs := cc.Informers.Core().V1().PersistentVolumeClaims()
	classes := cc.Informers.Storage().V1().StorageClasses()
	pods := cc.Informers.Core().V1().Pods()
	c := &Controller{
		client:   cc.Client,
		recorder: cc.Recorder,
		clock:    clk,
		volumes:  pvs.Lister(),
		claims:   pvcs.Lister(),
		classes:  classes.Lister(),
		pods:     pods.Lister(),
		synced: []cache.InformerSynced{pvs.Informer().HasSynced, pvcs.Informer().HasSynced,
			classes.Informer().HasSynced, pods.Informer().HasSynced},
	}
	// Upstream runs one worker on each queue: a volume and its claim are
	// never changed by two syncs at once.
	c.volumeQueue = worker.NewQueue("volumes", c.syncVolumeKey, worker.Options[string]{Clock: clk})
	c.claimQueue = worker.NewQueue("claims", c.syncClaimKey, worker.Options[string]{Clock: clk})

	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueVolume,
		UpdateFunc: func(oldObj, obj any) {
			c.enqueueVolume(obj)
			// Upstream leaves the claims waiting for a volume to the next
			// resync (15 s); looking at them once one becomes Available
			// binds it at once.
			o, ok1 := oldObj.(*corev1.PersistentVolume)
			n, ok2 := obj.(*corev1.PersistentVolume)
			if ok1 && ok2 && o.Status.Phase != corev1.VolumeAvailable && n.Status.Phase == corev1.VolumeAvailable {
				c.enqueueUnboundClaims()
			}
		},
		DeleteFunc: c.volumeDeleted,
	}); err != nil {
		return nil, fmt.Errorf("%s: volume handler: %w", Name, err)
	}
	if _, err := pvcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueClaim,
		UpdateFunc: func(_, obj any) { c.enqueueClaim(obj) },
		DeleteFunc: c.claimDeleted,
	}); err != nil {
		return nil, fmt.Errorf("%s: claim handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the workers and the periodic resync until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.volumeQueue, c.claimQueue, worker.LoopFunc(c.resyncLoop))
}

func (c *Controller) enqueueVolume(obj any) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok {
		c.volumeQueue.Add(pv.Name)
	}
}

func (c *Controller) enqueueClaim(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// volumeDeleted makes the claim bound to a deleted volume notice (it is
// Lost, unless it was re-bound).
func (c *Controller) volumeDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
}

// claimDeleted makes the claim's volume released at once.
func (c *Controller) claimDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
}

func (c *Controller) resyncLoop(ctx context.Context) {
	t := c.clock.NewTicker(SyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if pvcs, err := c.claims.List(labels.Everything()); err == nil {
			for _, pvc := range pvcs {
				c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
			}
		}
		if pvs, err := c.volumes.List(labels.Everything()); err == nil {
			for _, pv := range pvs {
				c.volumeQueue.Add(pv.Name)
			}
		}
	}
}

func (c *Controller) enqueueUnboundClaims() {
	pvcs, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pvc := range pvcs {
		if pvc.Spec.VolumeName == "" || pvc.Status.Phase == corev1.ClaimPending {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
}

func (c *Controller) syncClaimKey(ctx context.Context, key string) error {
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
	return c.syncClaim(ctx, pvc)
}

func (c *Controller) syncVolumeKey(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncVolume(ctx, pv)
}

// syncClaim decides what to do with one claim.
func (c *Controller) syncClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) {
		return c.syncUnboundClaim(ctx, claim)
	}
	return c.syncBoundClaim(ctx, claim)
}

func (c *Controller) syncUnboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName != "" {
		return c.syncPreboundClaim(ctx, claim)
	}
	delayBinding, err := storagehelpers.IsDelayBindingMode(claim, c.classes)
	if err != nil {
		return err
	}
	volume, err := c.findBestMatch(claim, delayBinding)
	if err != nil {
		return fmt.Errorf("error finding PV for claim %q: %w", key(claim), err)
	}
	if volume != nil {
		return c.bind(ctx, volume, claim)
	}
	// No volume: try the default class, then provisioning.
	if updated, err := c.assignDefaultStorageClass(ctx, claim); err != nil {
		return fmt.Errorf("can't update PersistentVolumeClaim[%q]: %w", key(claim), err)
	} else if updated {
		return nil // the update brings the claim back
	}
	switch {
	case delayBinding && !storagehelpers.IsDelayBindingProvisioning(claim):
		if err := c.eventForUnboundDelayBindingClaim(claim); err != nil {
			return err
		}
	case storagehelpers.GetPersistentVolumeClaimClass(claim) != "":
		return c.provisionClaim(ctx, claim)
	default:
		c.recorder.Event(claim, corev1.EventTypeNormal, reasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// syncPreboundClaim handles a claim that names its volume.
func (c *Controller) syncPreboundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		// The volume may come later: wait for it, Pending.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	if err != nil {
		return err
	}
	switch {
	case volume.Spec.ClaimRef == nil:
		if err := checkVolumeSatisfiesClaim(volume, claim); err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch, fmt.Sprintf("Cannot bind to requested volume %q: %s", volume.Name, err))
			_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
			return err
		}
		return c.bind(ctx, volume, claim)
	case storagehelpers.IsVolumeBoundToClaim(volume, claim):
		return c.bind(ctx, volume, claim)
	case !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBoundByController):
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", volume.Name))
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	default:
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", volume.Name))
		return fmt.Errorf("invalid binding of claim %q to volume %q: volume already claimed by %q", key(claim), claim.Spec.VolumeName,
			volume.Spec.ClaimRef.Namespace+"/"+volume.Spec.ClaimRef.Name)
	}
}

func (c *Controller) syncBoundClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		_, err := c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		return err
	}
	volume, err := c.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimLost,
			"Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		return err
	}
	if err != nil {
		return err
	}
	if volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID == claim.UID {
		// Unbound volume (or a cache behind our own write) or all well:
		// bind sets whatever is missing and writes nothing otherwise.
		return c.bind(ctx, volume, claim)
	}
	_, err = c.updateClaimStatusWithEvent(ctx, claim, corev1.ClaimLost, nil, corev1.EventTypeWarning, reasonClaimMisbound,
		"Two claims are bound to the same volume, this one is bound incorrectly")
	return err
}

// syncVolume decides what to do with one volume.
func (c *Controller) syncVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	if volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID == "" {
		// Unused, or pre-bound to a claim that the claim's sync binds.
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeAvailable, "")
		return err
	}
	ref := volume.Spec.ClaimRef
	claim, err := c.claims.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if apierrors.IsNotFound(err) {
		claim = nil
		// A provisioner or the scheduler may have written the binding
		// before our cache saw the claim: ask the API server before
		// releasing the volume.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			live, err := c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil {
				claim = live
			}
		}
	}
	if claim != nil && claim.UID != ref.UID {
		// Maybe a newer claim of the same name, maybe a stale cache.
		live, err := c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			claim = nil
		case err != nil:
			return err
		case live.UID != ref.UID:
			claim = nil
		default:
			claim = live
		}
	}

	switch {
	case claim == nil:
		// The claim is gone: release the volume and reclaim it. A Failed
		// volume stays Failed while the reclaim is retried.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			klog.FromContext(ctx).V(2).Info("Volume is released and reclaim policy will be executed", "volumeName", volume.Name,
				"reclaimPolicy", volume.Spec.PersistentVolumeReclaimPolicy)
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	case claim.Spec.VolumeName == "":
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			c.recorder.Event(volume, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name))
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", volume.Name))
			return nil
		}
		// Bound volume, pending claim: the claim's sync finishes it.
		c.claimQueue.Add(ref.Namespace + "/" + ref.Name)
		return nil
	case claim.Spec.VolumeName == volume.Name:
		_, err := c.updateVolumePhase(ctx, volume, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) &&
		volume.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that got bound elsewhere: not needed.
		if volume.Status.Phase != corev1.VolumeReleased && volume.Status.Phase != corev1.VolumeFailed {
			if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return c.reclaimVolume(ctx, volume)
	default:
		// Bound to a claim bound elsewhere: unbind (a user's pre-binding
		// keeps its name, loses the UID).
		return c.unbindVolume(ctx, volume)
	}
}

// findBestMatch is the smallest Available volume that satisfies the
// claim, or the one pre-bound to it. Upstream searches by access-mode
// sets from the narrowest up; FindMatchingVolume takes the smallest
// volume, so checking the access modes on every volume gives the same
// choice except between equally sized volumes.
func (c *Controller) findBestMatch(claim *corev1.PersistentVolumeClaim, delayBinding bool) (*corev1.PersistentVolume, error) {
	all, err := c.volumes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	candidates := make([]*corev1.PersistentVolume, 0, len(all))
	for _, pv := range all {
		if storagehelpers.CheckAccessModes(claim, pv) {
			candidates = append(candidates, pv)
		}
	}
	// Narrowest access modes first, then by name, so the choice between
	// equals is stable.
	slices.SortFunc(candidates, func(a, b *corev1.PersistentVolume) int {
		if d := len(a.Spec.AccessModes) - len(b.Spec.AccessModes); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return storagehelpers.FindMatchingVolume(claim, candidates, nil, nil, delayBinding, true)
}

// checkVolumeSatisfiesClaim is the check for a volume a claim names.
func checkVolumeSatisfiesClaim(volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if volume.DeletionTimestamp != nil {
		return fmt.Errorf("the volume is marked for deletion %q", volume.Name)
	}
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := volume.Spec.Capacity[corev1.ResourceStorage]
	if capacity.Value() < requested.Value() {
		return fmt.Errorf("requested PV is too small")
	}
	if storagehelpers.GetPersistentVolumeClass(volume) != storagehelpers.GetPersistentVolumeClaimClass(claim) {
		return fmt.Errorf("storageClassName does not match")
	}
	if deref(claim.Spec.VolumeAttributesClassName) != deref(volume.Spec.VolumeAttributesClassName) {
		return fmt.Errorf("volumeAttributesClassName does not match")
	}
	if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
		return fmt.Errorf("incompatible volumeMode")
	}
	if !storagehelpers.CheckAccessModes(claim, volume) {
		return fmt.Errorf("incompatible accessMode")
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func key(claim *corev1.PersistentVolumeClaim) string { return claim.Namespace + "/" + claim.Name }

// eventForUnboundDelayBindingClaim tells the user why a
// WaitForFirstConsumer claim is not bound yet.
func (c *Controller) eventForUnboundDelayBindingClaim(claim *corev1.PersistentVolumeClaim) error {
	pods, err := c.pods.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var waiting []string
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if ClaimName(pod, &v) == claim.Name {
				waiting = append(waiting, pod.Name)
				break
			}
		}
	}
	slices.Sort(waiting)
	reason, message := reasonWaitForFirstConsumer, "waiting for first consumer to be created before binding"
	switch len(waiting) {
	case 0:
	case 1:
		reason, message = reasonWaitForPodScheduled, fmt.Sprintf("waiting for pod %s to be scheduled", waiting[0])
	default:
		reason, message = reasonWaitForPodScheduled, fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(waiting, ","))
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reason, message)
	return nil
}

// ClaimName is the claim a pod volume uses: its persistentVolumeClaim's,
// or <pod>-<volume> for a generic ephemeral volume; "" for others.
func ClaimName(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name
	}
	return ""
}

// assignDefaultStorageClass gives a claim without storageClassName the
// default class, if there is one.
func (c *Controller) assignDefaultStorageClass(ctx context.Context, claim *corev1.PersistentVolumeClaim) (bool, error) {
	if storagehelpers.PersistentVolumeClaimHasClass(claim) {
		return false, nil
	}
	class, err := defaultClass(c.classes)
	if err != nil || class == nil {
		return false, err
	}
	clone := claim.DeepCopy()
	clone.Spec.StorageClassName = &class.Name
	if _, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		return false, err
	}
	return true, nil
}

// defaultClass is the newest class annotated as the default (upstream
// picks the newest when several are), or nil.
func defaultClass(lister storagelisters.StorageClassLister) (*storagev1.StorageClass, error) {
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var best *storagev1.StorageClass
	for _, sc := range all {
		if !IsDefaultClass(sc) {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	return best, nil
}

// IsDefaultClass reports the storageclass.kubernetes.io/is-default-class
// annotation (or its beta form) set to "true".
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" ||
		sc.Annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true"
}

// provisionClaim asks the class's provisioner for a volume. Every
// provisioner is external here: the claim gets the storage-provisioner
// annotations it watches for.
func (c *Controller) provisionClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	class, err := c.classes.Get(className)
	if err != nil {
		// Retried at the next sync, as upstream.
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, err.Error())
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	if class.Provisioner == storagehelpers.NotSupportedProvisioner {
		// Static volumes only (kubernetes.io/no-provisioner): nothing to ask.
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	if strings.HasPrefix(class.Provisioner, inTreeProvisionerNamePrefix) {
		c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed,
			fmt.Sprintf("storageclass %q: provisioner %q is an in-tree volume plugin, which Skiff does not have", class.Name, class.Provisioner))
		_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
		return err
	}
	if claim.Annotations[storagehelpers.AnnStorageProvisioner] != class.Provisioner ||
		claim.Annotations[storagehelpers.AnnBetaStorageProvisioner] != class.Provisioner {
		clone := claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnStorageProvisioner, class.Provisioner)
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, class.Provisioner)
		updated, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
		if err != nil {
			c.recorder.Event(claim, corev1.EventTypeWarning, reasonProvisioningFailed, fmt.Sprintf("Error saving claim: %v", err))
			return err
		}
		claim = updated
	}
	c.recorder.Event(claim, corev1.EventTypeNormal, reasonExternalProvisioning,
		fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. "+
			"If volume creation is delayed, please verify that the provisioner is running and correctly registered.", class.Provisioner))
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimPending, nil)
	return err
}

// reclaimVolume carries out a released volume's reclaim policy.
func (c *Controller) reclaimVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	if volume.Annotations[storagehelpers.AnnMigratedTo] != "" {
		return nil
	}
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedRecycle,
			"No recycler plugin found for the volume!")
		return err
	case corev1.PersistentVolumeReclaimDelete:
		if by := volume.Annotations[storagehelpers.AnnDynamicallyProvisioned]; by != "" && !strings.HasPrefix(by, inTreeProvisionerNamePrefix) {
			return nil // its external provisioner deletes it
		}
		if volume.Spec.CSI != nil {
			return nil
		}
		_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonVolumeFailedDelete,
			fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", volume.Name))
		return err
	}
	_, err := c.updateVolumePhaseWithEvent(ctx, volume, corev1.VolumeFailed, corev1.EventTypeWarning, reasonUnknownReclaimPolicy,
		"Volume has unrecognized PersistentVolumeReclaimPolicy")
	return err
}

// bind binds volume and claim to each other, writing only what is not
// yet so: the volume's claimRef, its phase, the claim's volumeName and
// annotations, the claim's status.
func (c *Controller) bind(ctx context.Context, volume *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	clone, dirty, err := storagehelpers.GetBindVolumeToClaim(volume, claim)
	if err != nil {
		return err
	}
	if dirty {
		if volume, err = c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if volume, err = c.updateVolumePhase(ctx, volume, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim, err = c.bindClaimToVolume(ctx, claim, volume); err != nil {
		return err
	}
	_, err = c.updateClaimStatus(ctx, claim, corev1.ClaimBound, volume)
	return err
}

func (c *Controller) bindClaimToVolume(ctx context.Context, claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	dirty := false
	if claim.Spec.VolumeName != volume.Name {
		clone.Spec.VolumeName = volume.Name
		if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
		dirty = true
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return claim, nil
	}
	return c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
}

func (c *Controller) unbindVolume(ctx context.Context, volume *corev1.PersistentVolume) error {
	clone := volume.DeepCopy()
	if metav1.HasAnnotation(volume.ObjectMeta, storagehelpers.AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, storagehelpers.AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	_, err = c.updateVolumePhase(ctx, updated, corev1.VolumeAvailable, "")
	return err
}

// updateClaimStatus sets the claim's phase, and its access modes and
// capacity from the volume (cleared without one).
func (c *Controller) updateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	dirty := false
	if claim.Status.Phase != phase {
		clone.Status.Phase = phase
		dirty = true
	}
	if volume == nil {
		if claim.Status.AccessModes != nil || claim.Status.Capacity != nil || claim.Status.CurrentVolumeAttributesClassName != nil {
			clone.Status.AccessModes, clone.Status.Capacity, clone.Status.CurrentVolumeAttributesClassName = nil, nil, nil
			dirty = true
		}
	} else {
		if !slices.Equal(claim.Status.AccessModes, volume.Spec.AccessModes) {
			clone.Status.AccessModes = volume.Spec.AccessModes
			dirty = true
		}
		if claim.Status.Phase != phase {
			volumeCap, ok := volume.Spec.Capacity[corev1.ResourceStorage]
			if !ok {
				return nil, fmt.Errorf("PersistentVolume %q is without a storage capacity", volume.Name)
			}
			if claimCap, ok := claim.Status.Capacity[corev1.ResourceStorage]; !ok || volumeCap.Cmp(claimCap) != 0 {
				clone.Status.Capacity = volume.Spec.Capacity
				dirty = true
			}
			if claim.Status.Phase == corev1.ClaimPending && phase == corev1.ClaimBound &&
				deref(claim.Status.CurrentVolumeAttributesClassName) != deref(volume.Spec.VolumeAttributesClassName) {
				clone.Status.CurrentVolumeAttributesClassName = volume.Spec.VolumeAttributesClassName
				dirty = true
			}
		}
	}
	if !dirty {
		return claim, nil
	}
	return c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
}

func (c *Controller) updateClaimStatusWithEvent(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, volume *corev1.PersistentVolume, eventType, reason, message string) (*corev1.PersistentVolumeClaim, error) {
	if claim.Status.Phase == phase {
		return claim, nil
	}
	updated, err := c.updateClaimStatus(ctx, claim, phase, volume)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}

func (c *Controller) updateVolumePhase(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	clone := volume.DeepCopy()
	clone.Status.Phase = phase
	clone.Status.Message = message
	return c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
}

func (c *Controller) updateVolumePhaseWithEvent(ctx context.Context, volume *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, eventType, reason, message string) (*corev1.PersistentVolume, error) {
	if volume.Status.Phase == phase {
		return volume, nil
	}
	updated, err := c.updateVolumePhase(ctx, volume, phase, message)
	if err != nil {
		return nil, err
	}
	c.recorder.Event(updated, eventType, reason, message)
	return updated, nil
}
