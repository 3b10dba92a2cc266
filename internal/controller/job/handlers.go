package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// --- event handlers: they only enqueue keys and note observations.

func (c *Controller) enqueue(obj any, delay time.Duration) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if delay <= 0 {
		c.queue.Add(key)
		return
	}
	c.queue.AddAfter(key, delay)
}

func (c *Controller) updateJob(oldObj, newObj any) {
	old, cur := oldObj.(*batchv1.Job), newObj.(*batchv1.Job)
	if isFinished(cur) {
		c.enqueueSelector(cur) // release finalizers that may be left
		return
	}
	if cur.Generation == old.Generation {
		c.enqueue(cur, SyncBatchPeriod)
	} else {
		c.enqueue(cur, 0)
	}
	if cur.Status.StartTime != nil && cur.Spec.ActiveDeadlineSeconds != nil &&
		(old.Spec.ActiveDeadlineSeconds == nil || *old.Spec.ActiveDeadlineSeconds != *cur.Spec.ActiveDeadlineSeconds) {
		total := time.Duration(*cur.Spec.ActiveDeadlineSeconds) * time.Second
		c.enqueue(cur, total-c.clock.Since(cur.Status.StartTime.Time))
	}
}

func (c *Controller) deleteJob(obj any) {
	c.enqueue(obj, 0)
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	c.finished.Delete(j.UID)
	c.enqueueSelector(j)
	k := key(j)
	c.expectations.forget(k)
	c.backoff.remove(k)
}

// enqueueSelector asks the orphan worker to look at every pod the job's
// selector matches (finalizers left after the job finished or went away).
func (c *Controller) enqueueSelector(j *batchv1.Job) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil {
		return
	}
	c.orphanQueue.Add("selector:" + j.Namespace + "/" + sel.String())
}

func (c *Controller) enqueueOrphan(p *corev1.Pod) {
	c.orphanQueue.Add("pod:" + p.Namespace + "/" + p.Name)
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// resolveControllerRef returns the Job a controllerRef points at, if it
// still has that UID.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *batchv1.Job {
	if ref.Kind != jobKind.Kind {
		return nil
	}
	j, err := c.jobLister.Jobs(namespace).Get(ref.Name)
	if err != nil || j.UID != ref.UID {
		return nil
	}
	return j
}

// jobsForPod lists the Jobs whose selector matches an orphan pod.
func (c *Controller) jobsForPod(pod *corev1.Pod) []*batchv1.Job {
	list, err := c.jobLister.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*batchv1.Job
	for _, j := range list {
		sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, j)
	}
	return out
}

func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	if pod.DeletionTimestamp != nil {
		c.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if j := c.resolveControllerRef(pod.Namespace, ref); j != nil {
			c.expectations.creationObserved(key(j))
			c.enqueue(j, SyncBatchPeriod)
		}
		return
	}
	if hasTrackingFinalizer(pod) {
		c.enqueueOrphan(pod)
	}
	for _, j := range c.jobsForPod(pod) {
		c.enqueue(j, SyncBatchPeriod)
	}
}

func (c *Controller) updatePod(oldObj, newObj any) {
	old, cur := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
	if old.ResourceVersion == cur.ResourceVersion {
		return
	}
	if cur.DeletionTimestamp != nil {
		c.deletePod(cur, false)
		return
	}
	finalizerGone := !hasTrackingFinalizer(cur)
	curRef, oldRef := metav1.GetControllerOf(cur), metav1.GetControllerOf(old)
	refChanged := (curRef == nil) != (oldRef == nil) || (curRef != nil && curRef.UID != oldRef.UID)
	if refChanged && oldRef != nil {
		if j := c.resolveControllerRef(old.Namespace, oldRef); j != nil {
			if finalizerGone {
				c.finalizerExpectations.observed(key(j), cur.UID)
			}
			c.enqueue(j, SyncBatchPeriod)
		}
	}
	if curRef != nil {
		if j := c.resolveControllerRef(cur.Namespace, curRef); j != nil {
			if finalizerGone {
				c.finalizerExpectations.observed(key(j), cur.UID)
			}
			c.enqueue(j, SyncBatchPeriod)
		}
		return
	}
	if hasTrackingFinalizer(cur) {
		c.enqueueOrphan(cur)
	}
	if refChanged || !labels.Equals(old.Labels, cur.Labels) {
		for _, j := range c.jobsForPod(cur) {
			c.enqueue(j, SyncBatchPeriod)
		}
	}
}

// deletePod handles a pod's deletion (final) or its deletionTimestamp.
func (c *Controller) deletePod(obj any, final bool) {
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
	hasFinalizer := hasTrackingFinalizer(pod)
	if ref == nil {
		if hasFinalizer {
			c.enqueueOrphan(pod)
		}
		return
	}
	j := c.resolveControllerRef(pod.Namespace, ref)
	if j == nil || isFinished(j) {
		if hasFinalizer {
			c.enqueueOrphan(pod)
		}
		return
	}
	k := key(j)
	c.expectations.deletionObserved(k)
	if final || !hasFinalizer {
		c.finalizerExpectations.observed(k, pod.UID)
	}
	c.enqueue(j, SyncBatchPeriod)
}

// --- orphan pods

// syncOrphan removes the tracking finalizer from pods no unfinished Job
// owns: key "pod:<ns>/<name>" or "selector:<ns>/<selector>".
func (c *Controller) syncOrphan(ctx context.Context, k string) error {
	kind, rest, _ := strings.Cut(k, ":")
	ns, value, _ := strings.Cut(rest, "/")
	switch kind {
	case "pod":
		pod, err := c.podLister.Pods(ns).Get(value)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.releaseOrphan(ctx, pod)
	case "selector":
		sel, err := labels.Parse(value)
		if err != nil {
			return nil
		}
		pods, err := c.podLister.Pods(ns).List(sel)
		if err != nil {
			return err
		}
		var errs []error
		for _, p := range pods {
			if err := c.releaseOrphan(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

func (c *Controller) releaseOrphan(ctx context.Context, pod *corev1.Pod) error {
	if !hasTrackingFinalizer(pod) {
		return nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != jobKind.Kind || ref.APIVersion != jobKind.GroupVersion().String() {
			return nil // not a Job's pod
		}
		if j := c.resolveControllerRef(pod.Namespace, ref); j != nil && (managedElsewhere(j) || !isFinished(j)) {
			return nil // still tracked by its Job
		}
	}
	_, err := c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, removeFinalizerPatch(pod), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove tracking finalizer of orphan pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
