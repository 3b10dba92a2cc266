// Package statefulset is the StatefulSet controller: pods with stable
// names <set>-<ordinal> (ordinals from .spec.ordinals.start), hostname and
// subdomain from serviceName, the labels statefulset.kubernetes.io/pod-name
// and apps.kubernetes.io/pod-index; PVCs <template>-<set>-<ordinal> from the
// volumeClaimTemplates, created before the pod, owned as the
// persistentVolumeClaimRetentionPolicy says; OrderedReady (one at a time,
// each Running and Ready, and available after minReadySeconds, before the
// next; scale down in reverse) or Parallel pod management; RollingUpdate
// from the highest ordinal down to the partition within maxUnavailable, or
// OnDelete; ControllerRevisions (internal/controller/revision) with
// currentRevision and updateRevision, so `kubectl rollout` works; and
// upstream's status and events.
//
// It follows upstream's defaultStatefulSetControl; the decisions are made
// from the listers' snapshot and the writes go through the client. A PVC
// that cannot be created is a FailedCreate event and a retried sync; the
// pod is then not created (upstream's order), a pod whose claims exist but
// are not bound stays Pending with the scheduler's reason.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

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
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/controllerref"
	"github.com/skiff-sh/skiff/internal/controller/podowner"
	"github.com/skiff-sh/skiff/internal/controller/revision"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

const (
	// Name is the controller's name in the manager and its queue's.
	Name = "statefulset"
	// DefaultWorkers is upstream's --concurrent-statefulset-syncs.
	DefaultWorkers = 5
	// maxBatch caps a slow-start batch (Parallel management).
	maxBatch = 500
)

// Controller is the StatefulSet controller.
type Controller struct {
	client     kubernetes.Interface
	setLister  appslisters.StatefulSetLister
	podIndexer cache.Indexer
	podLister  corelisters.PodLister
	pvcLister  corelisters.PersistentVolumeClaimLister
	history    revision.History
	synced     []cache.InformerSynced
	recorder   record.EventRecorder
	clock      clock.PassiveClock
	queue      *worker.Queue[string]
}

// New builds the StatefulSet controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
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
	sets := cc.Informers.Apps().V1().StatefulSets()
	pods := cc.Informers.Core().V1().Pods()
	pvcs := cc.Informers.Core().V1().PersistentVolumeClaims()
	revs := cc.Informers.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:     cc.Client,
		setLister:  sets.Lister(),
		podIndexer: pods.Informer().GetIndexer(),
		podLister:  pods.Lister(),
		pvcLister:  pvcs.Lister(),
		history:    revision.History{Client: cc.Client, Lister: revs.Lister()},
		synced:     []cache.InformerSynced{sets.Informer().HasSynced, pods.Informer().HasSynced, pvcs.Informer().HasSynced, revs.Informer().HasSynced},
		recorder:   recorder,
		clock:      clk,
	}
	c.queue = worker.NewQueue(Name, c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if err := podowner.AddIndex(pods.Informer()); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if _, err := sets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("%s: statefulset handler: %w", Name, err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.podChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", Name, err)
	}
	if _, err := revs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.revisionChanged,
		DeleteFunc: c.revisionChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: controllerrevision handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, c.synced, c.queue)
}

// --- event handlers

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (c *Controller) enqueue(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		c.queue.Add(tomb.Key)
		return
	}
	k, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(k)
}

func (c *Controller) resolve(namespace string, ref *metav1.OwnerReference) *appsv1.StatefulSet {
	if ref == nil || ref.Kind != controllerKind.Kind {
		return nil
	}
	set, err := c.setLister.StatefulSets(namespace).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return nil
	}
	return set
}

func (c *Controller) setsForOrphan(pod *corev1.Pod) []*appsv1.StatefulSet {
	list, err := c.setLister.StatefulSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.StatefulSet
	for _, s := range list {
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, s)
		}
	}
	return out
}

func (c *Controller) podChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if set := c.resolve(pod.Namespace, ref); set != nil {
			c.queue.Add(key(set))
		}
		return
	}
	for _, s := range c.setsForOrphan(pod) {
		c.queue.Add(key(s))
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	oldPod, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if oldPod.ResourceVersion == pod.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(oldPod), metav1.GetControllerOf(pod)
	if oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		if set := c.resolve(oldPod.Namespace, oldRef); set != nil {
			c.queue.Add(key(set))
		}
	}
	if ref != nil {
		set := c.resolve(pod.Namespace, ref)
		if set == nil {
			return
		}
		c.queue.Add(key(set))
		if !podutils.IsPodReady(oldPod) && podutils.IsPodReady(pod) && set.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(key(set), time.Duration(set.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if !labels.Equals(oldPod.Labels, pod.Labels) || oldRef != nil {
		for _, s := range c.setsForOrphan(pod) {
			c.queue.Add(key(s))
		}
	}
}

func (c *Controller) revisionChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if r, ok := obj.(*appsv1.ControllerRevision); ok {
		if set := c.resolve(r.Namespace, metav1.GetControllerOf(r)); set != nil {
			c.queue.Add(key(set))
		}
	}
}

// --- sync

// Sync reconciles the StatefulSet named by key ("namespace/name").
func (c *Controller) Sync(ctx context.Context, setKey string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing statefulset", "key", setKey, "duration", c.clock.Since(start))
	}()
	namespace, name, err := cache.SplitMetaNamespaceKey(setKey)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", setKey, err)
	}
	cached, err := c.setLister.StatefulSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	set := cached.DeepCopy()
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil // an invalid selector cannot be fixed by retrying
	}
	revisions, err := c.history.Claim(ctx, revision.Owner{Object: set, GVK: controllerKind, Selector: selector, CanAdopt: func(ctx context.Context) error { return c.canAdopt(ctx, set) }})
	if err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	status, err := c.update(ctx, set, pods, revisions, now)
	if err != nil {
		return err
	}
	if set.Spec.MinReadySeconds > 0 && status != nil && status.ReadyReplicas != status.AvailableReplicas {
		c.queue.AddAfter(setKey, time.Duration(set.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

// canAdopt re-reads the set live: adoption is only for a set that still
// exists with this UID and is not being deleted.
func (c *Controller) canAdopt(ctx context.Context, set *appsv1.StatefulSet) error {
	return controllerref.LiveCheck(set, "statefulset", func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	})(ctx)
}

// claimPods returns the set's pods (named <set>-<n>): controlled ones that
// match the selector and matching orphans it adopts; it releases
// controlled pods that no longer match or are not named as its members.
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	candidates, err := podowner.Candidates(c.podIndexer, set.Namespace, set.UID)
	if err != nil {
		return nil, err
	}
	out, err := controllerref.Claimer[*corev1.Pod]{
		Owner: set,
		GVK:   controllerKind,
		Match: func(pod *corev1.Pod) bool {
			return selector.Matches(labels.Set(pod.Labels)) && isMemberOf(set, pod)
		},
		CanAdopt: func(ctx context.Context) error { return c.canAdopt(ctx, set) },
		Patch: func(ctx context.Context, pod *corev1.Pod, patch []byte) (*corev1.Pod, error) {
			return c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		},
		Kind: "pod",
	}.Claim(ctx, candidates)
	sort.Slice(out, func(i, j int) bool { return ordinalOf(out[i]) < ordinalOf(out[j]) })
	return out, err
}

// update is upstream's UpdateStatefulSet: revisions, pods, status, then
// the history trimmed to revisionHistoryLimit.
func (c *Controller) update(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision, now time.Time) (*appsv1.StatefulSetStatus, error) {
	revision.Sort(revisions)
	current, updateRev, collisionCount, err := c.revisions(ctx, set, revisions)
	if err != nil {
		return nil, err
	}
	status, err := c.updatePods(ctx, set, current, updateRev, collisionCount, pods, now)
	var statusErr error
	if status != nil {
		statusErr = c.writeStatus(ctx, set, status)
	}
	trimErr := c.truncateHistory(ctx, set, pods, revisions, current, updateRev)
	if err != nil {
		return nil, errors.Join(err, trimErr)
	}
	if statusErr != nil {
		return nil, statusErr
	}
	return status, trimErr
}

// revisions finds (or creates) the update revision for the set's template
// and the current revision named by status.currentRevision.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisionCount int32, err error) {
	if set.Status.CollisionCount != nil {
		collisionCount = *set.Status.CollisionCount
	}
	data, err := revision.TemplatePatch(set)
	if err != nil {
		return nil, nil, collisionCount, err
	}
	next := int64(1)
	if n := len(revisions); n > 0 {
		next = revisions[n-1].Revision + 1
	}
	owner := revision.Owner{Object: set, GVK: controllerKind}
	update = revision.New(owner, set.Spec.Template.Labels, set.Annotations, data, next, &collisionCount)
	equal := revision.FindEqual(revisions, update)
	switch {
	case len(equal) > 0 && revision.Equal(revisions[len(revisions)-1], equal[len(equal)-1]):
		update = revisions[len(revisions)-1]
	case len(equal) > 0:
		// Rolled back to an older template: it becomes the newest revision.
		update, err = c.history.Renumber(ctx, equal[len(equal)-1], update.Revision)
		if err != nil {
			return nil, nil, collisionCount, err
		}
	default:
		update, err = c.history.Create(ctx, owner, update, &collisionCount)
		if err != nil {
			return nil, nil, collisionCount, err
		}
	}
	for _, r := range revisions {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisionCount, nil
}

// replicaStatus counts pods as upstream: created, ready (Running and
// Ready), available, and, among those not terminating, at the current and
// at the update revision.
func computeStatus(status *appsv1.StatefulSetStatus, minReadySeconds int32, current, update *appsv1.ControllerRevision, now time.Time, lists ...[]*corev1.Pod) {
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas, status.CurrentReplicas, status.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, list := range lists {
		for _, pod := range list {
			if pod == nil {
				continue
			}
			if isCreated(pod) {
				status.Replicas++
			}
			if isRunningAndReady(pod) {
				status.ReadyReplicas++
				if isAvailable(pod, minReadySeconds, now) {
					status.AvailableReplicas++
				}
			}
			if isCreated(pod) && !isTerminating(pod) {
				if podRevision(pod) == current.Name {
					status.CurrentReplicas++
				}
				if podRevision(pod) == update.Name {
					status.UpdatedReplicas++
				}
			}
		}
	}
}

// updatePods is upstream's updateStatefulSet: it creates, fixes and
// deletes pods toward the spec and returns the status they give.
func (c *Controller) updatePods(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, collisionCount int32, pods []*corev1.Pod, now time.Time) (*appsv1.StatefulSetStatus, error) {
	logger := klog.FromContext(ctx)
	currentSet, err := applyRevision(set, current)
	if err != nil {
		return nil, err
	}
	updateSet, err := applyRevision(set, update)
	if err != nil {
		return nil, err
	}
	status := &appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    current.Name,
		UpdateRevision:     update.Name,
		CollisionCount:     &collisionCount,
		Conditions:         append([]appsv1.StatefulSetCondition(nil), set.Status.Conditions...),
	}
	computeStatus(status, set.Spec.MinReadySeconds, current, update, now, pods)

	replicas := make([]*corev1.Pod, replicasOf(set))
	var condemned []*corev1.Pod
	for _, pod := range pods {
		switch {
		case inOrdinalRange(pod, set):
			replicas[ordinalOf(pod)-startOrdinal(set)] = pod
		case ordinalOf(pod) >= 0:
			condemned = append(condemned, pod)
		}
	}
	for ord := startOrdinal(set); ord <= endOrdinal(set); ord++ {
		if i := ord - startOrdinal(set); replicas[i] == nil {
			replicas[i] = newVersionedPod(currentSet, updateSet, current.Name, update.Name, ord)
		}
	}
	sort.SliceStable(condemned, func(i, j int) bool { return ordinalOf(condemned[i]) > ordinalOf(condemned[j]) })

	var firstUnavailable *corev1.Pod
	for _, p := range replicas {
		if isUnavailable(p, set.Spec.MinReadySeconds, now) && firstUnavailable == nil {
			firstUnavailable = p
		}
	}
	for i := len(condemned) - 1; i >= 0; i-- {
		if isUnavailable(condemned[i], set.Spec.MinReadySeconds, now) && firstUnavailable == nil {
			firstUnavailable = condemned[i]
		}
	}
	if set.DeletionTimestamp != nil {
		return status, nil
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	done := func() { computeStatus(status, set.Spec.MinReadySeconds, current, update, now, replicas, condemned) }

	if stop, err := runForAll(len(replicas), monotonic, func(i int) (bool, error) {
		return c.processReplica(ctx, set, updateSet, monotonic, replicas, i, now)
	}); stop || err != nil {
		done()
		return status, err
	}
	if stop, err := runForAll(len(condemned), monotonic, func(i int) (bool, error) {
		return false, c.fixClaimOwners(ctx, updateSet, condemned[i])
	}); stop || err != nil {
		done()
		return status, err
	}
	if stop, err := runForAll(len(condemned), monotonic, func(i int) (bool, error) {
		pod := condemned[i]
		if isTerminating(pod) {
			if monotonic {
				logger.V(4).Info("Waiting for pod to terminate before scaling down", "pod", klog.KObj(pod))
				return true, nil
			}
			return false, nil
		}
		if monotonic && pod != firstUnavailable && (!isRunningAndReady(pod) || !isAvailable(pod, set.Spec.MinReadySeconds, now)) {
			logger.V(4).Info("Waiting for pod to be available before scaling down", "pod", klog.KObj(firstUnavailable))
			return true, nil
		}
		logger.V(2).Info("Pod is terminating for scale down", "pod", klog.KObj(pod))
		return true, c.deletePod(ctx, set, pod)
	}); stop || err != nil {
		done()
		return status, err
	}
	done()
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return status, nil
	}
	return status, c.rollingUpdate(ctx, set, replicas, update, status, now)
}

// processReplica creates, waits for or repairs the replica at i; true
// means stop the monotonic walk here.
func (c *Controller) processReplica(ctx context.Context, set, updateSet *appsv1.StatefulSet, monotonic bool, replicas []*corev1.Pod, i int, now time.Time) (bool, error) {
	pod := replicas[i]
	if isTerminal(pod) {
		// Failed or succeeded: delete it and create it again next time.
		if pod.DeletionTimestamp == nil {
			if err := c.deletePod(ctx, set, pod); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	if !isCreated(pod) {
		if stale, err := c.claimIsStale(set, pod); err != nil || stale {
			return true, err
		}
		if err := c.createPod(ctx, set, pod); err != nil {
			return true, err
		}
		if monotonic {
			return true, nil
		}
	}
	if isPending(pod) {
		if err := c.createClaims(ctx, set, pod); err != nil {
			return true, err
		}
		if err := c.fixClaimOwners(ctx, set, pod); err != nil {
			return true, err
		}
	}
	if monotonic && (isTerminating(pod) || !isRunningAndReady(pod) || !isAvailable(pod, set.Spec.MinReadySeconds, now)) {
		klog.FromContext(ctx).V(4).Info("Waiting for pod to be running, ready and available", "pod", klog.KObj(pod))
		return true, nil
	}
	match, err := c.claimsMatchPolicy(updateSet, pod)
	if err != nil {
		match = true
	}
	if identityMatches(set, pod) && storageMatches(set, pod) && match {
		return false, nil
	}
	return false, c.repairPod(ctx, updateSet, pod.DeepCopy())
}

// rollingUpdate deletes pods not at the update revision, from the highest
// ordinal down to the partition, within maxUnavailable (upstream's
// MaxUnavailableStatefulSet behaviour, on by default in v1.37).
func (c *Controller) rollingUpdate(ctx context.Context, set *appsv1.StatefulSet, replicas []*corev1.Pod, update *appsv1.ControllerRevision, status *appsv1.StatefulSetStatus, now time.Time) error {
	partition := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	budget, err := maxUnavailable(set)
	if err != nil {
		return err
	}
	parallel := set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
	unavailable, unavailableNeedingUpdate := 0, 0
	for _, pod := range replicas {
		if isUnavailable(pod, set.Spec.MinReadySeconds, now) {
			unavailable++
			if parallel && podRevision(pod) != update.Name && !isTerminating(pod) {
				unavailableNeedingUpdate++
			}
		}
	}
	if unavailable >= budget && unavailableNeedingUpdate == 0 {
		return nil
	}
	if parallel {
		for t := len(replicas) - 1; t >= partition; t-- {
			pod := replicas[t]
			if podRevision(pod) != update.Name && !isAvailable(pod, set.Spec.MinReadySeconds, now) && !isTerminating(pod) {
				if err := c.deletePod(ctx, set, pod); err != nil {
					return err
				}
				status.CurrentReplicas--
			}
		}
		remaining := budget - unavailable
		for t := len(replicas) - 1; t >= partition && remaining > 0; t-- {
			pod := replicas[t]
			if podRevision(pod) != update.Name && !isUnavailable(pod, set.Spec.MinReadySeconds, now) {
				if err := c.deletePod(ctx, set, pod); err != nil {
					return err
				}
				remaining--
				status.CurrentReplicas--
			}
		}
		return nil
	}
	toDelete := budget - unavailable
	for t, deleted := len(replicas)-1, 0; t >= partition && deleted < toDelete; t-- {
		pod := replicas[t]
		if podRevision(pod) != update.Name && !isTerminating(pod) {
			klog.FromContext(ctx).V(2).Info("Pod is terminating for update", "pod", klog.KObj(pod))
			if err := c.deletePod(ctx, set, pod); err != nil {
				return err
			}
			deleted++
			status.CurrentReplicas--
		}
	}
	return nil
}

// runForAll runs fn over 0..n-1: in order, stopping at the first that asks
// to (monotonic), or all at once in slow-start batches.
func runForAll(n int, monotonic bool, fn func(i int) (bool, error)) (bool, error) {
	if monotonic {
		for i := 0; i < n; i++ {
			if stop, err := fn(i); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	next := 0
	for batch := min(n, 1); batch > 0; batch = min(2*batch, n-next, maxBatch) {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for i := next; i < next+batch; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		next += batch
		if len(errs) > 0 {
			return true, errors.Join(errs...)
		}
	}
	return false, nil
}

// writeStatus completes the update (current = update once every replica is
// updated and ready) and writes the status if it changed.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	r := int32(replicasOf(set))
	if status.UpdatedReplicas == r && status.ReadyReplicas == r && status.Replicas == r {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
	s := set.Status
	if status.ObservedGeneration <= s.ObservedGeneration && status.Replicas == s.Replicas &&
		status.CurrentReplicas == s.CurrentReplicas && status.ReadyReplicas == s.ReadyReplicas &&
		status.UpdatedReplicas == s.UpdatedReplicas && status.CurrentRevision == s.CurrentRevision &&
		status.AvailableReplicas == s.AvailableReplicas && status.UpdateRevision == s.UpdateRevision &&
		equalCollision(status.CollisionCount, s.CollisionCount) {
		return nil
	}
	toUpdate := set.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		toUpdate.Status = *status
		_, err := c.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, toUpdate, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if fresh, getErr := c.setLister.StatefulSets(set.Namespace).Get(set.Name); getErr == nil {
			toUpdate = fresh.DeepCopy()
		}
		return err
	})
}

func equalCollision(a, b *int32) bool {
	var x, y int32
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	return x == y
}

// truncateHistory deletes the oldest revisions beyond revisionHistoryLimit
// that are neither current, update, nor any pod's.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) error {
	live := map[string]bool{}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, p := range pods {
		live[podRevision(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revisions {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if limit < 0 || len(old) <= limit {
		return nil
	}
	for _, r := range old[:len(old)-limit] {
		if err := c.history.Delete(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
