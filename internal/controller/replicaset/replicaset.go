// Package replicaset is the ReplicaSet controller, which also runs
// ReplicationControllers: it creates and deletes pods so that each object
// has spec.replicas active pods matching its selector, adopts matching
// orphans and releases pods that no longer match (ownerReferences with
// controller=true and blockOwnerDeletion), and reports status.
//
// It follows upstream's behaviour where a client can see it: creations in
// slow-start batches (1, 2, 4, ...) capped at 500 a sync; deletions ranked
// unscheduled < scheduled, Pending < Unknown < Running, not ready < ready,
// lower pod-deletion-cost, doubled-up nodes, shorter ready time, more
// restarts, newer; expectations so that a slow watch never double-creates;
// events SuccessfulCreate, SuccessfulDelete, FailedCreate, FailedDelete; a
// ReplicaFailure condition when creating or deleting fails.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/controllerref"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

const (
	// BurstReplicas caps the pods created or deleted in one sync.
	BurstReplicas = 500
	// DefaultWorkers is upstream's --concurrent-replicaset-syncs.
	DefaultWorkers = 5

	// Event reasons, as upstream.
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// Controller is the ReplicaSet (or ReplicationController) controller.
type Controller struct {
	kind         kind
	client       kubernetes.Interface
	podLister    corelisters.PodLister
	podsSynced   cache.InformerSynced
	recorder     record.EventRecorder
	clock        clock.PassiveClock
	queue        *worker.Queue[string]
	expectations *Expectations
}

// New builds the ReplicaSet controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	return newController(cc, replicaSetKind(cc.Client, cc.Informers))
}

// NewForReplicationControllers builds the same controller over
// ReplicationControllers (a controllercontext.InitFunc).
func NewForReplicationControllers(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	return newController(cc, replicationControllerKind(cc.Client, cc.Informers))
}

func newController(cc controllercontext.Context, k kind) (*Controller, error) {
	var clk clock.PassiveClock = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs[k.name]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	pods := cc.Informers.Core().V1().Pods()
	c := &Controller{
		kind:         k,
		client:       cc.Client,
		podLister:    pods.Lister(),
		podsSynced:   pods.Informer().HasSynced,
		recorder:     recorder,
		clock:        clk,
		expectations: NewExpectations(clk),
	}
	c.queue = worker.NewQueue(k.name, c.Sync, worker.Options[string]{Workers: workers, Clock: cc.Clock})
	if _, err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj) },
		UpdateFunc: c.updateOwner,
		DeleteFunc: c.deleteOwner,
	}); err != nil {
		return nil, fmt.Errorf("%s: %s handler: %w", k.name, k.gvk.Kind, err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", k.name, err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	klog.FromContext(ctx).V(1).Info("Starting workers", "kind", c.kind.gvk.Kind, "workers", c.queue.Workers())
	return worker.Run(ctx, c.kind.name, []cache.InformerSynced{c.kind.informer.HasSynced, c.podsSynced}, c.queue)
}

// --- event handlers: they only enqueue keys and note observations.

func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) updateOwner(oldObj, newObj any) {
	oldRS, newRS := c.kind.convert(oldObj), c.kind.convert(newObj)
	if oldRS != nil && newRS != nil && oldRS.UID != newRS.UID {
		// Deleted and recreated under the same name while the watch was away.
		c.deleteOwner(cache.DeletedFinalStateUnknown{Key: key(oldRS), Obj: oldObj})
	}
	c.enqueue(newObj)
}

func (c *Controller) deleteOwner(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	rs := c.kind.convert(obj)
	if rs == nil {
		return
	}
	c.expectations.Delete(key(rs))
	c.queue.Add(key(rs))
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// resolveControllerRef returns the owner a controllerRef points at, if it
// is of our kind and still has that UID.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	if ref == nil || ref.Kind != c.kind.gvk.Kind || ref.APIVersion != c.kind.gvk.GroupVersion().String() {
		return nil
	}
	rs, err := c.kind.get(namespace, ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil
	}
	return rs
}

// ownersForPod lists the owners in the pod's namespace whose selector
// matches it (candidates to adopt an orphan).
func (c *Controller) ownersForPod(pod *corev1.Pod) []*appsv1.ReplicaSet {
	list, err := c.kind.list(pod.Namespace)
	if err != nil {
		return nil
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range list {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, rs)
	}
	return out
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if rs := c.resolveControllerRef(pod.Namespace, ref); rs != nil {
			c.expectations.CreationObserved(key(rs))
			c.queue.Add(key(rs))
		}
		return
	}
	for _, rs := range c.ownersForPod(pod) {
		c.queue.Add(key(rs))
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	oldPod, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if oldPod.ResourceVersion == pod.ResourceVersion {
		return // a resync
	}
	labelsChanged := !labels.Equals(oldPod.Labels, pod.Labels)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod)
		if labelsChanged {
			c.deletePod(oldPod)
		}
		return
	}
	oldRef, ref := metav1.GetControllerOf(oldPod), metav1.GetControllerOf(pod)
	if oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		if rs := c.resolveControllerRef(oldPod.Namespace, oldRef); rs != nil {
			c.queue.Add(key(rs))
		}
	}
	if ref != nil {
		rs := c.resolveControllerRef(pod.Namespace, ref)
		if rs == nil {
			return
		}
		c.queue.Add(key(rs))
		// A pod that just became ready is available minReadySeconds later.
		if !IsPodReady(oldPod) && IsPodReady(pod) && rs.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(key(rs), time.Duration(rs.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if labelsChanged || oldRef != nil {
		for _, rs := range c.ownersForPod(pod) {
			c.queue.Add(key(rs))
		}
	}
}

func (c *Controller) deletePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return
	}
	rs := c.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	c.expectations.DeletionObserved(key(rs), key(pod))
	c.queue.Add(key(rs))
}

// --- sync

// Sync reconciles the object named by key ("namespace/name").
func (c *Controller) Sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing", "kind", c.kind.gvk.Kind, "key", key, "duration", c.clock.Since(start))
	}()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	cached, err := c.kind.get(namespace, name)
	if apierrors.IsNotFound(err) {
		c.expectations.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}
	rs := cached.DeepCopy()
	needsSync := c.expectations.Satisfied(key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil // an invalid selector cannot be fixed by retrying
	}

	all, err := c.podLister.Pods(namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var candidates []*corev1.Pod
	for _, p := range all {
		if IsPodActive(p) {
			candidates = append(candidates, p)
		}
	}
	pods, err := c.claimPods(ctx, rs, selector, candidates)
	if err != nil {
		return err
	}

	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, pods, rs)
	}
	status := c.calculateStatus(rs, pods, manageErr)
	updated, err := c.updateStatus(ctx, rs, status)
	if err != nil {
		return errors.Join(manageErr, err)
	}
	if manageErr == nil && updated.Spec.MinReadySeconds > 0 &&
		updated.Status.ReadyReplicas == replicas(updated) && updated.Status.AvailableReplicas != replicas(updated) {
		c.queue.AddAfter(key, time.Duration(updated.Spec.MinReadySeconds)*time.Second)
	}
	return manageErr
}

func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// claimPods adopts orphans that match the selector and releases owned pods
// that no longer match, and returns the pods the object owns. Adoption is
// re-checked against a fresh read of the owner, so a deleted and recreated
// owner never adopts pods on behalf of the old one.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	return controllerref.Claimer[*corev1.Pod]{
		Owner: rs,
		GVK:   c.kind.gvk,
		Match: func(pod *corev1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) },
		CanAdopt: controllerref.LiveCheck(rs, c.kind.name, func(ctx context.Context) (metav1.Object, error) {
			return c.kind.getLive(ctx, rs.Namespace, rs.Name)
		}),
		Patch: func(ctx context.Context, pod *corev1.Pod, patch []byte) (*corev1.Pod, error) {
			return c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		},
		Kind: "pod",
	}.Claim(ctx, pods)
}

// manageReplicas creates or deletes pods so that there are spec.replicas.
func (c *Controller) manageReplicas(ctx context.Context, pods []*corev1.Pod, rs *appsv1.ReplicaSet) error {
	rsKey := key(rs)
	diff := len(pods) - int(replicas(rs))
	switch {
	case diff < 0:
		n := min(-diff, BurstReplicas)
		c.expectations.ExpectCreations(rsKey, n)
		created, err := slowStartBatch(n, 1, func() error { return c.createPod(ctx, rs) })
		if skipped := n - created; skipped > 0 {
			for range skipped {
				c.expectations.CreationObserved(rsKey)
			}
		}
		return err
	case diff > 0:
		n := min(diff, BurstReplicas)
		victims := podsToDelete(pods, n, c.clock.Now())
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = key(p)
		}
		c.expectations.ExpectDeletions(rsKey, keys)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for _, p := range victims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.deletePodOf(ctx, rs, p); err != nil {
					c.expectations.DeletionObserved(rsKey, key(p))
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return nil
}

// slowStartBatch calls fn count times in batches of 1, 2, 4, ... and stops
// after the first batch with an error, returning the successes.
func slowStartBatch(count, initial int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, initial); batch > 0; batch = min(2*batch, remaining) {
		errCh := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(); err != nil {
					errCh <- err
				}
			}()
		}
		wg.Wait()
		close(errCh)
		successes += batch - len(errCh)
		if len(errCh) > 0 {
			return successes, <-errCh
		}
		remaining -= batch
	}
	return successes, nil
}

// podsToDelete picks n pods in upstream's order of deletion.
func podsToDelete(pods []*corev1.Pod, n int, now time.Time) []*corev1.Pod {
	if n >= len(pods) {
		return pods
	}
	onNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			onNode[p.Spec.NodeName]++
		}
	}
	ranked := append([]*corev1.Pod(nil), pods...)
	sort.Sort(podRank{pods: ranked, onNode: onNode, now: now})
	return ranked[:n]
}

// PodFromTemplate is the pod the owner rs creates.
func PodFromTemplate(rs *appsv1.ReplicaSet, ref metav1.OwnerReference) (*corev1.Pod, error) {
	t := rs.Spec.Template
	if len(t.Labels) == 0 {
		return nil, errors.New("unable to create pods, no labels")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rs.Name + "-",
			Namespace:       rs.Namespace,
			Labels:          copyMap(t.Labels),
			Annotations:     copyMap(t.Annotations),
			Finalizers:      append([]string(nil), t.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	return pod, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	pod, err := PodFromTemplate(rs, c.kind.ownerRef(rs))
	if err != nil {
		c.recorder.Eventf(c.eventObject(rs), corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		return err
	}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil // the namespace is going away; nothing to report
		}
		c.recorder.Eventf(c.eventObject(rs), corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create pod for %s: %w", key(rs), err)
	}
	c.recorder.Eventf(c.eventObject(rs), corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

func (c *Controller) deletePodOf(ctx context.Context, rs *appsv1.ReplicaSet, pod *corev1.Pod) error {
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil // someone else deleted it; the informer will tell us
	}
	if err != nil {
		c.recorder.Eventf(c.eventObject(rs), corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	c.recorder.Eventf(c.eventObject(rs), corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %v", pod.Name)
	return nil
}

// eventObject is what events are recorded against: a reference of the
// owner's real kind (the RC itself for ReplicationControllers).
func (c *Controller) eventObject(rs *appsv1.ReplicaSet) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: c.kind.gvk.GroupVersion().String(), Kind: c.kind.gvk.Kind,
		Namespace: rs.Namespace, Name: rs.Name, UID: rs.UID, ResourceVersion: rs.ResourceVersion,
	}
}

// calculateStatus is the status rs has with the pods it owns.
func (c *Controller) calculateStatus(rs *appsv1.ReplicaSet, pods []*corev1.Pod, manageErr error) appsv1.ReplicaSetStatus {
	s := *rs.Status.DeepCopy()
	templateSel := labels.SelectorFromSet(rs.Spec.Template.Labels)
	now := c.clock.Now()
	var fully, ready, available int32
	for _, p := range pods {
		if templateSel.Matches(labels.Set(p.Labels)) {
			fully++
		}
		if IsPodReady(p) {
			ready++
			if IsPodAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}
	s.Replicas = int32(len(pods))
	s.FullyLabeledReplicas = fully
	s.ReadyReplicas = ready
	s.AvailableReplicas = available

	failure := conditionIndex(s.Conditions, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure < 0:
		reason := "FailedCreate"
		if len(pods) > int(replicas(rs)) {
			reason = "FailedDelete"
		}
		s.Conditions = append(s.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: manageErr.Error(),
		})
	case manageErr == nil && failure >= 0:
		s.Conditions = append(s.Conditions[:failure:failure], s.Conditions[failure+1:]...)
	}
	return s
}

func conditionIndex(cs []appsv1.ReplicaSetCondition, t appsv1.ReplicaSetConditionType) int {
	for i := range cs {
		if cs[i].Type == t {
			return i
		}
	}
	return -1
}

// updateStatus writes status (with observedGeneration) unless it is already
// there; on a conflict it retries once on a fresh read.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, status appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	status.ObservedGeneration = rs.Generation
	if apiequality.Semantic.DeepEqual(rs.Status, status) {
		return rs, nil
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		rs.Status = status
		var out *appsv1.ReplicaSet
		out, err = c.kind.updateStatus(ctx, rs)
		if err == nil {
			return out, nil
		}
		if !apierrors.IsConflict(err) {
			break
		}
		fresh, getErr := c.kind.getLive(ctx, rs.Namespace, rs.Name)
		if getErr != nil {
			return nil, fmt.Errorf("update status of %s: %w", key(rs), getErr)
		}
		status.ObservedGeneration = fresh.Generation
		rs = fresh
	}
	return nil, fmt.Errorf("update status of %s: %w", key(rs), err)
}
