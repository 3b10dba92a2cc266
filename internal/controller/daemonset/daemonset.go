// Package daemonset is the DaemonSet controller: one daemon pod on every
// node the DaemonSet's template fits (nodeName, node selector, required
// node affinity, taints against the template's tolerations plus those
// upstream adds to daemon pods), created pinned to its node by a required
// node affinity on metadata.name and placed by the scheduler; pods on
// nodes that no longer fit are deleted, failed pods are deleted and
// re-created with a per-node back-off (1 s doubling to 15 min).
//
// Template changes roll out as upstream's: RollingUpdate with
// maxUnavailable (delete old, then create new) or maxSurge (create new
// beside old, delete old once the new one is available), or OnDelete. Each
// template is kept as a ControllerRevision (internal/controller/revision)
// named <daemonset>-<template hash>; pods carry the hash in
// controller-revision-hash, so `kubectl rollout history|undo|status` work.
// The status counters are computed exactly as upstream computes them.
package daemonset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
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
	Name = "daemonset"
	// BurstReplicas caps the pods created or deleted in one sync (upstream 250).
	BurstReplicas = 250
	// DefaultWorkers is upstream's --concurrent-daemonset-syncs.
	DefaultWorkers = 2
	// backoffGCInterval is how often expired failed-pod back-offs are dropped.
	backoffGCInterval = time.Minute

	// Event reasons, as upstream.
	ReasonSelectingAll       = "SelectingAll"
	ReasonFailedPlacement    = "FailedPlacement"
	ReasonFailedDaemonPod    = "FailedDaemonPod"
	ReasonSucceededDaemonPod = "SucceededDaemonPod"
	ReasonSuccessfulCreate   = "SuccessfulCreate"
	ReasonFailedCreate       = "FailedCreate"
	ReasonSuccessfulDelete   = "SuccessfulDelete"
	ReasonFailedDelete       = "FailedDelete"
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Controller is the DaemonSet controller.
type Controller struct {
	client       kubernetes.Interface
	dsLister     appslisters.DaemonSetLister
	podLister    corelisters.PodLister
	podIndexer   cache.Indexer
	nodeLister   corelisters.NodeLister
	history      revision.History
	synced       []cache.InformerSynced
	recorder     record.EventRecorder
	clock        clock.WithTicker
	queue        *worker.Queue[string]
	expectations *expectations
	// failedPods spaces the re-creation of daemon pods that keep failing,
	// per DaemonSet, generation and node.
	failedPods *flowcontrol.Backoff
}

// New builds the DaemonSet controller (a controllercontext.InitFunc).
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
	dss := cc.Informers.Apps().V1().DaemonSets()
	pods := cc.Informers.Core().V1().Pods()
	nodes := cc.Informers.Core().V1().Nodes()
	revs := cc.Informers.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:       cc.Client,
		dsLister:     dss.Lister(),
		podLister:    pods.Lister(),
		podIndexer:   pods.Informer().GetIndexer(),
		nodeLister:   nodes.Lister(),
		history:      revision.History{Client: cc.Client, Lister: revs.Lister()},
		synced:       []cache.InformerSynced{dss.Informer().HasSynced, pods.Informer().HasSynced, nodes.Informer().HasSynced, revs.Informer().HasSynced},
		recorder:     recorder,
		clock:        clk,
		expectations: newExpectations(clk),
		failedPods:   flowcontrol.NewFakeBackOff(time.Second, 15*time.Minute, clk),
	}
	c.queue = worker.NewQueue(Name, c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if err := podowner.AddIndex(pods.Informer()); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if _, err := dss.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.deleteDaemonSet,
	}); err != nil {
		return nil, fmt.Errorf("%s: daemonset handler: %w", Name, err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: c.deletePod,
	}); err != nil {
		return nil, fmt.Errorf("%s: pod handler: %w", Name, err)
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addNode,
		UpdateFunc: c.updateNode,
	}); err != nil {
		return nil, fmt.Errorf("%s: node handler: %w", Name, err)
	}
	if _, err := revs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.revisionChanged,
		UpdateFunc: func(_, obj any) { c.revisionChanged(obj) },
		DeleteFunc: c.revisionChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: controllerrevision handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the workers (and the back-off GC) until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	gc := worker.LoopFunc(func(ctx context.Context) {
		t := c.clock.NewTicker(backoffGCInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				c.failedPods.GC()
			}
		}
	})
	return worker.Run(ctx, Name, c.synced, c.queue, gc)
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

func (c *Controller) deleteDaemonSet(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return
	}
	c.expectations.forget(key(ds))
	c.queue.Add(key(ds))
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.DaemonSet {
	if ref == nil || ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(namespace).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil
	}
	return ds
}

// daemonSetsForOrphan are the DaemonSets whose selector matches pod.
func (c *Controller) daemonSetsForOrphan(pod *corev1.Pod) []*appsv1.DaemonSet {
	list, err := c.dsLister.DaemonSets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.DaemonSet
	for _, ds := range list {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, ds)
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
		if ds := c.resolveControllerRef(pod.Namespace, ref); ds != nil {
			c.expectations.creationObserved(key(ds))
			c.queue.Add(key(ds))
		}
		return
	}
	for _, ds := range c.daemonSetsForOrphan(pod) {
		c.queue.Add(key(ds))
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	oldPod, pod := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if oldPod.ResourceVersion == pod.ResourceVersion {
		return
	}
	if pod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil {
		// A graceful delete: count it now, the informer's delete comes later.
		c.deletePod(pod)
		return
	}
	oldRef, ref := metav1.GetControllerOf(oldPod), metav1.GetControllerOf(pod)
	if oldRef != nil && (ref == nil || oldRef.UID != ref.UID) {
		if ds := c.resolveControllerRef(oldPod.Namespace, oldRef); ds != nil {
			c.queue.Add(key(ds))
		}
	}
	if ref != nil {
		ds := c.resolveControllerRef(pod.Namespace, ref)
		if ds == nil {
			return
		}
		c.queue.Add(key(ds))
		if !podutils.IsPodReady(oldPod) && podutils.IsPodReady(pod) && ds.Spec.MinReadySeconds > 0 {
			c.queue.AddAfter(key(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	if !labels.Equals(oldPod.Labels, pod.Labels) || oldRef != nil {
		for _, ds := range c.daemonSetsForOrphan(pod) {
			c.queue.Add(key(ds))
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
	ds := c.resolveControllerRef(pod.Namespace, metav1.GetControllerOf(pod))
	if ds == nil {
		return
	}
	c.expectations.deletionObserved(key(ds))
	c.queue.Add(key(ds))
}

func (c *Controller) addNode(obj any) {
	node := obj.(*corev1.Node)
	list, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range list {
		if run, _ := placementOf(ds).shouldRun(node); run {
			c.queue.Add(key(ds))
		}
	}
}

// updateNode enqueues the DaemonSets whose verdict on the node changed,
// and those with misscheduled pods (the change may have fixed them).
func (c *Controller) updateNode(oldObj, newObj any) {
	oldNode, node := oldObj.(*corev1.Node), newObj.(*corev1.Node)
	if reflect.DeepEqual(oldNode.Labels, node.Labels) && reflect.DeepEqual(oldNode.Spec.Taints, node.Spec.Taints) && oldNode.Name == node.Name {
		return
	}
	list, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range list {
		p := placementOf(ds)
		oldRun, oldCont := p.shouldRun(oldNode)
		run, cont := p.shouldRun(node)
		if oldRun != run || oldCont != cont || ds.Status.NumberMisscheduled > 0 {
			c.queue.Add(key(ds))
		}
	}
}

func (c *Controller) revisionChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	r, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	if ds := c.resolveControllerRef(r.Namespace, metav1.GetControllerOf(r)); ds != nil {
		c.queue.Add(key(ds))
	}
}

// --- sync

// Sync reconciles the DaemonSet named by key ("namespace/name").
func (c *Controller) Sync(ctx context.Context, dsKey string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing daemon set", "key", dsKey, "duration", c.clock.Since(start))
	}()
	namespace, name, err := cache.SplitMetaNamespaceKey(dsKey)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", dsKey, err)
	}
	cached, err := c.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.forget(dsKey)
		return nil
	}
	if err != nil {
		return err
	}
	ds := cached.DeepCopy()
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil // an invalid selector cannot be fixed by retrying
	}
	if selector.Empty() {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonSelectingAll, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		return nil
	}
	cur, old, err := c.constructHistory(ctx, ds, selector)
	if err != nil {
		return fmt.Errorf("construct revisions of daemon set %s: %w", dsKey, err)
	}
	hash := cur.Labels[HashLabel]

	if !c.expectations.satisfied(dsKey) {
		pods, err := c.claimPods(ctx, ds, selector)
		if err != nil {
			return err
		}
		return c.updateStatus(ctx, ds, nodes, podsByNode(pods, false), hash, false)
	}
	pods, err := c.claimPods(ctx, ds, selector)
	if err != nil {
		return err
	}
	manageErr := c.update(ctx, ds, nodes, pods, hash, old)
	statusErr := c.updateStatus(ctx, ds, nodes, podsByNode(pods, false), hash, true)
	if manageErr != nil {
		return manageErr
	}
	return statusErr
}

// update creates and deletes daemon pods, rolls the template and trims the
// history.
func (c *Controller) update(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string, old []*appsv1.ControllerRevision) error {
	toCreate, toDelete := c.plan(ctx, ds, nodes, podsByNode(pods, false), hash)
	if err := c.syncNodes(ctx, ds, toDelete, toCreate, hash); err != nil {
		return err
	}
	if c.expectations.satisfied(key(ds)) && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		byNode := podsByNode(pods, false)
		toCreate, toDelete, err := c.rollingUpdate(ds, nodes, byNode, hash)
		if err != nil {
			return err
		}
		if err := c.syncNodes(ctx, ds, toDelete, toCreate, hash); err != nil {
			return err
		}
	}
	return c.cleanupHistory(ctx, ds, old, podsByNode(pods, true))
}

// claimPods returns the DaemonSet's pods: those it controls that match its
// selector, plus matching orphans it adopts (after a live check that it is
// not being deleted); it releases controlled pods that no longer match.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet, selector labels.Selector) ([]*corev1.Pod, error) {
	candidates, err := podowner.Candidates(c.podIndexer, ds.Namespace, ds.UID)
	if err != nil {
		return nil, err
	}
	out, err := controllerref.Claimer[*corev1.Pod]{
		Owner:    ds,
		GVK:      controllerKind,
		Match:    func(pod *corev1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) },
		CanAdopt: func(ctx context.Context) error { return c.canAdopt(ctx, ds) },
		Patch: func(ctx context.Context, pod *corev1.Pod, patch []byte) (*corev1.Pod, error) {
			return c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		},
		Kind: "pod",
	}.Claim(ctx, candidates)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// canAdopt re-reads the DaemonSet live: adoption is only for a DaemonSet
// that still exists with this UID and is not being deleted.
func (c *Controller) canAdopt(ctx context.Context, ds *appsv1.DaemonSet) error {
	return controllerref.LiveCheck(ds, "daemon set", func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	})(ctx)
}

// podsByNode maps node names to the daemon pods on (or pinned to) them;
// terminal pods being deleted are left out unless includeDeletedTerminal.
func podsByNode(pods []*corev1.Pod, includeDeletedTerminal bool) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		terminal := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
		if !includeDeletedTerminal && terminal && pod.DeletionTimestamp != nil {
			continue
		}
		node, ok := targetNode(pod)
		if !ok {
			continue
		}
		out[node] = append(out[node], pod)
	}
	return out
}

// plan decides, node by node, which nodes need a daemon pod and which pods
// must go: none where one should run, extra ones (the oldest stays, or
// with surge the oldest of each revision until the new one is available),
// failed and succeeded ones (failed ones under the back-off), those on
// nodes where the pod may no longer run, and unscheduled ones pinned to
// nodes that are gone.
func (c *Controller) plan(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) (toCreate, toDelete []string) {
	logger := klog.FromContext(ctx)
	p := placementOf(ds)
	now := c.clock.Now()
	known := map[string]bool{}
	for _, node := range nodes {
		known[node.Name] = true
		run, cont := p.shouldRun(node)
		pods, exists := byNode[node.Name]
		switch {
		case run && !exists:
			toCreate = append(toCreate, node.Name)
		case cont:
			var running []*corev1.Pod
			for _, pod := range pods {
				if pod.DeletionTimestamp != nil {
					continue
				}
				switch pod.Status.Phase {
				case corev1.PodFailed:
					backoffKey := fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, node.Name)
					if c.failedPods.IsInBackOffSinceUpdate(backoffKey, now) {
						delay := c.failedPods.Get(backoffKey)
						logger.V(4).Info("Deleting failed daemon pod is held back", "pod", klog.KObj(pod), "node", node.Name, "delay", delay)
						c.queue.AddAfter(key(ds), delay)
						continue
					}
					c.failedPods.Next(backoffKey, now)
					c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDaemonPod, "Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name)
					toDelete = append(toDelete, pod.Name)
				case corev1.PodSucceeded:
					c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSucceededDaemonPod, "Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name)
					toDelete = append(toDelete, pod.Name)
				default:
					running = append(running, pod)
				}
			}
			sortPods(running)
			if !allowsSurge(ds) {
				for _, extra := range running[min(1, len(running)):] {
					toDelete = append(toDelete, extra.Name)
				}
				break
			}
			if len(running) == 0 {
				if run {
					toCreate = append(toCreate, node.Name)
				}
				break
			}
			var oldestNew, oldestOld *corev1.Pod
			for _, pod := range running {
				if pod.Labels[HashLabel] == hash {
					if oldestNew == nil {
						oldestNew = pod
						continue
					}
				} else if oldestOld == nil {
					oldestOld = pod
					continue
				}
				toDelete = append(toDelete, pod.Name)
			}
			if oldestNew != nil && oldestOld != nil {
				if !podutils.IsPodReady(oldestOld) || podutils.IsPodAvailable(oldestNew, ds.Spec.MinReadySeconds, metav1.NewTime(now)) {
					toDelete = append(toDelete, oldestOld.Name)
				}
			}
		case exists:
			for _, pod := range pods {
				if pod.DeletionTimestamp == nil {
					toDelete = append(toDelete, pod.Name)
				}
			}
		}
	}
	gone := make([]string, 0)
	for node, pods := range byNode {
		if known[node] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				gone = append(gone, pod.Name)
			}
		}
	}
	sort.Strings(gone)
	return toCreate, append(toDelete, gone...)
}

// sortPods orders a node's daemon pods as upstream: scheduled before
// unscheduled, then oldest first, then by name.
func sortPods(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			return a.Spec.NodeName != ""
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// syncNodes deletes the named pods and creates a pod for each named node,
// at most BurstReplicas of each, creations in slow-start batches.
func (c *Controller) syncNodes(ctx context.Context, ds *appsv1.DaemonSet, toDelete, toCreate []string, hash string) error {
	dsKey := key(ds)
	creates := min(len(toCreate), BurstReplicas)
	deletes := min(len(toDelete), BurstReplicas)
	if creates == 0 && deletes == 0 {
		return nil
	}
	c.expectations.set(dsKey, creates, deletes)
	template := podTemplate(ds, hash)
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for pos, batch := 0, min(creates, 1); pos < creates; pos, batch = pos+batch, min(2*batch, creates-(pos+batch)) {
		before := len(errs)
		var wg sync.WaitGroup
		for _, node := range toCreate[pos : pos+batch] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.createPod(ctx, ds, template, node); err != nil {
					c.expectations.creationObserved(dsKey)
					fail(err)
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		failed := len(errs) > before
		mu.Unlock()
		if skipped := creates - (pos + batch); failed && skipped > 0 {
			c.expectations.lower(dsKey, skipped, 0)
			break
		}
	}
	var wg sync.WaitGroup
	for _, name := range toDelete[:deletes] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.deletePodOf(ctx, ds, name); err != nil {
				c.expectations.deletionObserved(dsKey)
				if !apierrors.IsNotFound(err) {
					fail(err)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, template corev1.PodTemplateSpec, node string) error {
	t := template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ds.Name + "-",
			Namespace:       ds.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: t.Spec,
	}
	pod.Spec.Affinity = pinToNode(pod.Spec.Affinity, node)
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		return fmt.Errorf("create daemon pod for node %s: %w", node, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %v", created.Name)
	return nil
}

func (c *Controller) deletePodOf(ctx context.Context, ds *appsv1.DaemonSet, name string) error {
	err := c.client.CoreV1().Pods(ds.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete daemon pod %s: %w", name, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %v", name)
	return nil
}

// --- status

// computeStatus counts as upstream: per node that should run a pod,
// desired; with a pod, current; its oldest pod ready, available (after
// minReadySeconds), updated (current hash or generation); pods on nodes
// that should not run one, misscheduled.
func computeStatus(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) appsv1.DaemonSetStatus {
	var s appsv1.DaemonSetStatus
	p := placementOf(ds)
	generation := templateGeneration(ds)
	for _, node := range nodes {
		run, _ := p.shouldRun(node)
		pods := byNode[node.Name]
		if !run {
			if len(pods) > 0 {
				s.NumberMisscheduled++
			}
			continue
		}
		s.DesiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		s.CurrentNumberScheduled++
		sorted := append([]*corev1.Pod(nil), pods...)
		sortPods(sorted)
		pod := sorted[0]
		if podutils.IsPodReady(pod) {
			s.NumberReady++
			if podutils.IsPodAvailable(pod, ds.Spec.MinReadySeconds, metav1.NewTime(now)) {
				s.NumberAvailable++
			}
		}
		if isUpdated(pod, hash, generation) {
			s.UpdatedNumberScheduled++
		}
	}
	s.NumberUnavailable = s.DesiredNumberScheduled - s.NumberAvailable
	return s
}

// updateStatus writes the counters (and observedGeneration when the sync
// acted on this generation) unless they are already there; a failed write
// is retried once on a fresh read.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, observed bool) error {
	s := computeStatus(ds, nodes, byNode, hash, c.clock.Now())
	if ds.Spec.MinReadySeconds > 0 && s.NumberReady != s.NumberAvailable {
		c.queue.AddAfter(key(ds), time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	counters := func(st appsv1.DaemonSetStatus) appsv1.DaemonSetStatus {
		return appsv1.DaemonSetStatus{
			DesiredNumberScheduled: st.DesiredNumberScheduled, CurrentNumberScheduled: st.CurrentNumberScheduled,
			NumberMisscheduled: st.NumberMisscheduled, NumberReady: st.NumberReady,
			UpdatedNumberScheduled: st.UpdatedNumberScheduled, NumberAvailable: st.NumberAvailable,
			NumberUnavailable: st.NumberUnavailable,
		}
	}
	if apiequality.Semantic.DeepEqual(counters(ds.Status), s) && (ds.Status.ObservedGeneration >= ds.Generation || !observed) {
		return nil // (without observed, a write would change nothing)
	}
	toUpdate := ds
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if observed {
			toUpdate.Status.ObservedGeneration = ds.Generation
		}
		toUpdate.Status.DesiredNumberScheduled = s.DesiredNumberScheduled
		toUpdate.Status.CurrentNumberScheduled = s.CurrentNumberScheduled
		toUpdate.Status.NumberMisscheduled = s.NumberMisscheduled
		toUpdate.Status.NumberReady = s.NumberReady
		toUpdate.Status.UpdatedNumberScheduled = s.UpdatedNumberScheduled
		toUpdate.Status.NumberAvailable = s.NumberAvailable
		toUpdate.Status.NumberUnavailable = s.NumberUnavailable
		if _, err = c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, toUpdate, metav1.UpdateOptions{}); err == nil {
			return nil
		}
		fresh, getErr := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("update status of daemon set %s: %w", key(ds), getErr)
		}
		toUpdate = fresh
	}
	return fmt.Errorf("update status of daemon set %s: %w", key(ds), err)
}
