// Package disruption is the disruption controller: it keeps the status of
// every PodDisruptionBudget, which the API server's eviction reads, as
// upstream's kube-controller-manager does (v1.37).
//
// For each budget it counts the selected pods that are ready and not being
// deleted (currentHealthy), the pods the budget protects (expectedPods:
// the pods themselves for an integer minAvailable, else the scale of their
// controllers), the healthy pods wanted (desiredHealthy), and so how many
// may be evicted (disruptionsAllowed), with the DisruptionAllowed
// condition. Controllers are found through Deployments, ReplicaSets,
// ReplicationControllers and StatefulSets from the shared informers, and
// any other kind through its scale subresource. Pods the eviction API
// recorded in status.disruptedPods are not counted healthy for two minutes
// unless they go away. A DisruptionTarget condition left True on a pod that
// was not deleted is reset to False after two minutes.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

const (
	// DeletionTimeout is how long a pod in status.disruptedPods is not
	// counted healthy while the controller waits to see it deleted.
	DeletionTimeout = 2 * time.Minute
	// StalePodDisruptionTimeout is how long a DisruptionTarget condition
	// may stay True on a pod that is not being deleted.
	StalePodDisruptionTimeout = 2 * time.Minute
	// DefaultWorkers: upstream runs one worker.
	DefaultWorkers = 1
)

// Controller is the disruption controller.
type Controller struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	mapper    meta.ResettableRESTMapper
	recorder  record.EventRecorder
	clock     clock.WithTicker

	pdbLister policylisters.PodDisruptionBudgetLister
	podLister corelisters.PodLister
	rcLister  corelisters.ReplicationControllerLister
	rsLister  appslisters.ReplicaSetLister
	dLister   appslisters.DeploymentLister
	ssLister  appslisters.StatefulSetLister
	synced    []cache.InformerSynced

	queue      *worker.Queue[string]
	staleQueue *worker.Queue[string]
}

// New builds the disruption controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	workers := cc.Options.ConcurrentSyncs["disruption"]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	pods := cc.Informers.Core().V1().Pods()
	pdbs := cc.Informers.Policy().V1().PodDisruptionBudgets()
	rcs := cc.Informers.Core().V1().ReplicationControllers()
	rss := cc.Informers.Apps().V1().ReplicaSets()
	ds := cc.Informers.Apps().V1().Deployments()
	sss := cc.Informers.Apps().V1().StatefulSets()
	c := &Controller{
		client:    cc.Client,
		dynamic:   cc.Dynamic,
		recorder:  recorder,
		clock:     clk,
		pdbLister: pdbs.Lister(),
		podLister: pods.Lister(),
		rcLister:  rcs.Lister(),
		rsLister:  rss.Lister(),
		dLister:   ds.Lister(),
		ssLister:  sss.Lister(),
		synced: []cache.InformerSynced{pods.Informer().HasSynced, pdbs.Informer().HasSynced, rcs.Informer().HasSynced,
			rss.Informer().HasSynced, ds.Informer().HasSynced, sss.Informer().HasSynced},
	}
	if cc.Client != nil {
		c.discovery = cc.Client.Discovery()
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.discovery))
	}
	c.queue = worker.NewQueue("disruption", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	c.staleQueue = worker.NewQueue("stale_pod_disruption", c.syncStalePod, worker.Options[string]{Clock: clk})
	if _, err := pdbs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueuePDB,
		UpdateFunc: func(_, obj any) { c.enqueuePDB(obj) },
		DeleteFunc: c.enqueuePDB,
	}); err != nil {
		return nil, fmt.Errorf("disruption: pdbs handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: c.podChanged,
	}); err != nil {
		return nil, fmt.Errorf("disruption: pods handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, "disruption", c.synced, c.queue, c.staleQueue)
}

func (c *Controller) enqueuePDB(obj any) {
	if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(k)
	}
}

// podChanged wakes the budget that selects the pod (the first, as
// upstream; a warning event when several do) and schedules the reset of a
// stale DisruptionTarget condition.
func (c *Controller) podChanged(obj any) {
	deleted := false
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pdbs, err := c.pdbLister.GetPodPodDisruptionBudgets(pod); err == nil && len(pdbs) > 0 {
		if len(pdbs) > 1 {
			msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
			c.recorder.Event(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets", msg)
		}
		c.queue.Add(pdbs[0].Namespace + "/" + pdbs[0].Name)
	}
	if deleted {
		return
	}
	if stale, after := c.staleDisruptionCondition(pod); stale {
		c.staleQueue.AddAfter(pod.Namespace+"/"+pod.Name, after)
	}
}

// Sync recomputes the status of the budget named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := c.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	recheck, err := c.trySync(ctx, pdb)
	if err == nil && recheck > 0 {
		return worker.RequeueAfter(recheck)
	}
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	klog.FromContext(ctx).Error(err, "Failed to sync PDB", "podDisruptionBudget", klog.KObj(pdb))
	// Fail safe: allow no disruption while the status cannot be computed.
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed = 0
	c.setCondition(out, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.SyncFailedReason, Message: err.Error(), ObservedGeneration: out.Status.ObservedGeneration,
	})
	if _, uerr := c.client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{}); uerr != nil {
		return errors.Join(err, uerr)
	}
	return err
}

// trySync computes and writes the budget's status; it returns when to look
// again (a disrupted pod's timeout), or 0.
func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) (time.Duration, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return 0, err
	}
	pods, err := c.podLister.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return 0, err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedPodCount(ctx, pdb, pods)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return 0, err
	}
	if len(unmanaged) > 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" "+
			"field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pods, pdb, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := c.updateStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return 0, err
	}
	if recheck != nil {
		return max(recheck.Sub(now), time.Millisecond), nil
	}
	return 0, nil
}

// expectedPodCount follows upstream: maxUnavailable and a percentage
// minAvailable scale with the controllers' replicas; an integer
// minAvailable with the pods that exist.
func (c *Controller) expectedPodCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(0, expected-int32(maxUnavailable))
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// expectedScale sums the replicas of the pods' controllers, each once.
func (c *Controller) expectedScale(ctx context.Context, pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		uid, n, found, err := c.controllerScale(ctx, ref, pod.Namespace)
		if err != nil {
			return 0, nil, err
		}
		if !found {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
		scales[uid] = n
	}
	var total int32
	for _, n := range scales {
		total += n
	}
	return total, unmanaged, nil
}

func groupOf(ref *metav1.OwnerReference) (string, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return gv.Group, err
}

// controllerScale finds the controller a pod's controllerRef points at and
// its replicas, in upstream's order: ReplicationController, Deployment
// (through its ReplicaSet), ReplicaSet, StatefulSet, then any kind with a
// scale subresource.
func (c *Controller) controllerScale(ctx context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	group, err := groupOf(ref)
	if err != nil {
		return "", 0, false, err
	}
	replicas := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	switch {
	case ref.Kind == "ReplicationController" && group == "":
		if rc, err := c.rcLister.ReplicationControllers(ns).Get(ref.Name); err == nil && rc.UID == ref.UID {
			return rc.UID, replicas(rc.Spec.Replicas), true, nil
		}
	case ref.Kind == "ReplicaSet" && (group == "apps" || group == "extensions"):
		rs, err := c.rsLister.ReplicaSets(ns).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			break
		}
		if dref := metav1.GetControllerOf(rs); dref != nil && dref.Kind == "Deployment" {
			if g, _ := groupOf(dref); g == "apps" || g == "extensions" {
				if d, err := c.dLister.Deployments(ns).Get(dref.Name); err == nil && d.UID == dref.UID {
					return d.UID, replicas(d.Spec.Replicas), true, nil
				}
			}
			break // a Deployment's ReplicaSet is not a controller of its own
		}
		return rs.UID, replicas(rs.Spec.Replicas), true, nil
	case ref.Kind == "StatefulSet" && group == "apps":
		if ss, err := c.ssLister.StatefulSets(ns).Get(ref.Name); err == nil && ss.UID == ref.UID {
			return ss.UID, replicas(ss.Spec.Replicas), true, nil
		}
	}
	return c.scaleController(ctx, ref, ns)
}

// scaleController reads <resource>/<name>/scale for any other kind.
func (c *Controller) scaleController(ctx context.Context, ref *metav1.OwnerReference, ns string) (types.UID, int32, bool, error) {
	if c.mapper == nil || c.dynamic == nil {
		return "", 0, false, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false, err
	}
	mapping, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		c.mapper.Reset() // a kind added since discovery was cached
		if mapping, err = c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version); err != nil {
			return "", 0, false, err
		}
	}
	scale, err := c.dynamic.Resource(mapping.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{}, "scale")
	if apierrors.IsNotFound(err) {
		ok, derr := c.implementsScale(mapping.Resource)
		if derr != nil {
			return "", 0, false, derr
		}
		if !ok {
			return "", 0, false, fmt.Errorf("%s does not implement the scale subresource", mapping.Resource.GroupResource())
		}
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	if scale.GetUID() != ref.UID {
		return "", 0, false, nil
	}
	n, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	return scale.GetUID(), int32(n), true, nil
}

func (c *Controller) implementsScale(gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource+"/scale" && r.Kind == "Scale" {
			return true, nil
		}
	}
	return false, nil
}

// disruptedPods keeps the entries of status.disruptedPods whose pod still
// exists, is not being deleted, and was evicted less than DeletionTimeout
// ago; it returns when the first of them expires.
func (c *Controller) disruptedPods(pods []*corev1.Pod, pdb *policyv1.PodDisruptionBudget, now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	var recheck *time.Time
	if pdb.Status.DisruptedPods == nil {
		return out, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		t, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		expires := t.Add(DeletionTimeout)
		if expires.Before(now) {
			c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name)
			continue
		}
		if recheck == nil || expires.Before(*recheck) {
			recheck = &expires
		}
		out[pod.Name] = t
	}
	return out, recheck
}

// countHealthy counts ready pods not being deleted and not just evicted.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if t, ok := disrupted[pod.Name]; ok && t.Add(DeletionTimeout).After(now) {
			continue
		}
		if podReady(pod) {
			n++
		}
	}
	return n
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Controller) updateStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired && st.ExpectedPods == expected &&
		st.DisruptionsAllowed == allowed && apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation && conditionUpToDate(pdb) {
		return nil
	}
	out := pdb.DeepCopy()
	out.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected, DisruptionsAllowed: allowed,
		DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: out.Status.Conditions,
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.InsufficientPodsReason, ObservedGeneration: out.Status.ObservedGeneration}
	if allowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	c.setCondition(out, cond)
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}

func conditionUpToDate(pdb *policyv1.PodDisruptionBudget) bool {
	cond := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || pdb.Status.ObservedGeneration != pdb.Generation {
		return false
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// setCondition sets cond, stamping lastTransitionTime with the injected
// clock when the status changes.
func (c *Controller) setCondition(pdb *policyv1.PodDisruptionBudget, cond metav1.Condition) {
	if pdb.Status.Conditions == nil {
		pdb.Status.Conditions = []metav1.Condition{}
	}
	if old := meta.FindStatusCondition(pdb.Status.Conditions, cond.Type); old == nil || old.Status != cond.Status {
		cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
	}
	meta.SetStatusCondition(&pdb.Status.Conditions, cond)
}

// staleDisruptionCondition reports a DisruptionTarget=True condition on a
// pod that is not being deleted and not terminal (an eviction or
// preemption that did not happen), and how long until it is stale.
func (c *Controller) staleDisruptionCondition(pod *corev1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	i := slices.IndexFunc(pod.Status.Conditions, func(pc corev1.PodCondition) bool { return pc.Type == corev1.DisruptionTarget })
	if i < 0 {
		return false, 0
	}
	cond := pod.Status.Conditions[i]
	if cond.Status != corev1.ConditionTrue || cond.Reason == corev1.PodReasonTerminationByKubelet {
		return false, 0
	}
	return true, max(0, StalePodDisruptionTimeout-c.clock.Since(cond.LastTransitionTime.Time))
}

// syncStalePod resets a stale DisruptionTarget condition to False.
func (c *Controller) syncStalePod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	stale, after := c.staleDisruptionCondition(pod)
	if !stale {
		return nil
	}
	if after > 0 {
		return worker.RequeueAfter(after)
	}
	out := pod.DeepCopy()
	for i := range out.Status.Conditions {
		pc := &out.Status.Conditions[i]
		if pc.Type == corev1.DisruptionTarget {
			pc.Status = corev1.ConditionFalse
			pc.LastTransitionTime = metav1.NewTime(c.clock.Now())
			pc.ObservedGeneration = pod.Generation
		}
	}
	_, err = c.client.CoreV1().Pods(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}
