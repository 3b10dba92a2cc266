// Package deployment is the Deployment controller. It owns one ReplicaSet a
// pod template (named <deployment>-<pod-template-hash>, the hash computed as
// upstream does), rolls from the old ones to the new one with the
// RollingUpdate (maxSurge/maxUnavailable) or Recreate strategy, scales
// proportionally during a rollout, keeps revisionHistoryLimit old
// ReplicaSets, and reports status and the Progressing and Available
// conditions as upstream does, so that `kubectl rollout status`, `rollout
// history` and `rollout undo` (which copies an old ReplicaSet's template
// into the Deployment, client-side) work unchanged.
package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/controllerref"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name (queue, --controllers, user agent).
const Name = "deployment"

// DefaultWorkers is upstream's --concurrent-deployment-syncs.
const DefaultWorkers = 5

var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Controller is the Deployment controller.
type Controller struct {
	client    kubernetes.Interface
	dLister   appslisters.DeploymentLister
	rsLister  appslisters.ReplicaSetLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	recorder  record.EventRecorder
	clock     clock.Clock
	queue     *worker.Queue[string]
}

// New builds the Deployment controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	return NewController(cc)
}

// NewController builds the controller; exported for tests.
func NewController(cc controllercontext.Context) (*Controller, error) {
	var clk clock.Clock = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs[Name]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	ds := cc.Informers.Apps().V1().Deployments()
	rss := cc.Informers.Apps().V1().ReplicaSets()
	pods := cc.Informers.Core().V1().Pods()
	c := &Controller{
		client:    cc.Client,
		dLister:   ds.Lister(),
		rsLister:  rss.Lister(),
		podLister: pods.Lister(),
		synced:    []cache.InformerSynced{ds.Informer().HasSynced, rss.Informer().HasSynced, pods.Informer().HasSynced},
		recorder:  recorder,
		clock:     clk,
	}
	c.queue = worker.NewQueue(Name, c.Sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	if _, err := ds.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("deployment: deployment handler: %w", err)
	}
	if _, err := rss.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addReplicaSet,
		UpdateFunc: c.updateReplicaSet,
		DeleteFunc: c.deleteReplicaSet,
	}); err != nil {
		return nil, fmt.Errorf("deployment: replicaset handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("deployment: pod handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// --- event handlers

func (c *Controller) enqueue(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsForReplicaSet are the Deployments whose selector matches rs.
func (c *Controller) deploymentsForReplicaSet(rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	list, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.Deployment
	for _, d := range list {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (c *Controller) addReplicaSet(obj any) {
	rs := obj.(*appsv1.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		c.deleteReplicaSet(rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := c.resolve(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsForReplicaSet(rs) {
		c.enqueue(d)
	}
}

func (c *Controller) updateReplicaSet(oldObj, newObj any) {
	oldRS, rs := oldObj.(*appsv1.ReplicaSet), newObj.(*appsv1.ReplicaSet)
	if oldRS.ResourceVersion == rs.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(oldRS), metav1.GetControllerOf(rs)
	if oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		if d := c.resolve(oldRS.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if ref != nil {
		if d := c.resolve(rs.Namespace, ref); d != nil {
			c.enqueue(d)
		}
		return
	}
	if !labels.Equals(oldRS.Labels, rs.Labels) || oldRef != nil {
		for _, d := range c.deploymentsForReplicaSet(rs) {
			c.enqueue(d)
		}
	}
}

func (c *Controller) deleteReplicaSet(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if d := c.resolve(rs.Namespace, metav1.GetControllerOf(rs)); d != nil {
		c.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment once its old pods are gone.
func (c *Controller) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	d := c.resolve(rs.Namespace, metav1.GetControllerOf(rs))
	if d != nil && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.enqueue(d)
	}
}

// --- sync

// Sync reconciles the Deployment named by key ("namespace/name").
func (c *Controller) Sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() { logger.V(4).Info("Finished syncing deployment", "key", key, "duration", c.clock.Since(start)) }()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	cached, err := c.dLister.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy()

	if d.Spec.Selector == nil || (len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		c.recorder.Eventf(d, corev1.EventTypeWarning, ReasonSelectingAll, "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
			return err
		}
		return nil
	}

	claimed, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return err
	}
	// The sync scales ReplicaSets and goes on with their new state
	// (scaleReplicaSet): it works on copies, never on the informer's
	// objects, which other readers share.
	rsList := make([]*appsv1.ReplicaSet, len(claimed))
	for i, rs := range claimed {
		rsList[i] = rs.DeepCopy()
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.sync(ctx, d, rsList)
	}
	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.sync(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rsList)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// claimReplicaSets returns the ReplicaSets d owns, adopting matching
// orphans and releasing owned ones that no longer match.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has an invalid selector: %w", d.Namespace, d.Name, err)
	}
	return controllerref.Claimer[*appsv1.ReplicaSet]{
		Owner: d,
		GVK:   appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Match: func(rs *appsv1.ReplicaSet) bool { return selector.Matches(labels.Set(rs.Labels)) },
		CanAdopt: controllerref.LiveCheck(d, "deployment", func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		}),
		Patch: func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) (*appsv1.ReplicaSet, error) {
			return c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		},
		Kind: "replica set",
	}.Claim(ctx, all)
}

// podsByReplicaSet groups the pods of d's ReplicaSets by their UID.
func (c *Controller) podsByReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := c.podLister.Pods(d.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	out := map[types.UID][]*corev1.Pod{}
	for _, rs := range rsList {
		out[rs.UID] = nil
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			continue
		}
		if _, ok := out[ref.UID]; ok {
			out[ref.UID] = append(out[ref.UID], p)
		}
	}
	return out, nil
}

// checkPausedConditions records pausing and resuming in Progressing.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == ReasonTimedOut {
		return nil // a timed-out rollout stays timed out
	}
	pausedExists := cond != nil && cond.Reason == ReasonPaused
	now := c.clock.Now()
	switch {
	case d.Spec.Paused && !pausedExists:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonPaused, "Deployment is paused", now))
	case !d.Spec.Paused && pausedExists:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, ReasonResumed, "Deployment is resumed", now))
	default:
		return nil
	}
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	*d = *updated
	return nil
}
