package job

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// trackStatus counts finished pods without losing or doubling any:
//  1. pods with the tracking finalizer that finished (or, once the Job is
//     finished, every pod) go into status.uncountedTerminatedPods (Indexed
//     Jobs: into completedIndexes) and that status is written;
//  2. their finalizers are removed;
//  3. pods whose finalizer is gone leave the uncounted lists for the
//     succeeded/failed counters, and the Job gets its final condition once
//     nothing is uncounted or terminating.
func (c *Controller) trackStatus(ctx context.Context, st *syncState, needsFlush bool) error {
	job := st.job
	indexed := isIndexed(job)
	if indexed {
		sort.SliceStable(st.pods, func(i, j int) bool { return completionIndex(st.pods[i]) < completionIndex(st.pods[j]) })
	}
	withFinalizer := sets.New[types.UID]()
	for _, p := range st.pods {
		if hasTrackingFinalizer(p) && !st.expectedRm.Has(p.UID) {
			withFinalizer.Insert(p.UID)
		}
	}
	if countUncounted(&job.Status, withFinalizer) {
		needsFlush = true
	}
	uncounted := job.Status.UncountedTerminatedPods
	var (
		release       []*corev1.Pod
		newSucceeded  []int
		reachedMax    bool
		jobFailing    = st.finished != nil && !(st.finished.Type == batchv1.JobSuccessCriteriaMet && st.finished.Status == corev1.ConditionTrue)
		finalTarget   = st.finished
		failedCounted = func(p *corev1.Pod) bool {
			return matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).countFailed
		}
	)
	for _, p := range st.pods {
		if !hasTrackingFinalizer(p) || st.expectedRm.Has(p.UID) {
			continue // counted in an earlier sync
		}
		failed := isPodFailed(p, job)
		if !c.canRemoveFinalizer(st, p, failed) {
			continue
		}
		release = append(release, p)
		ix := completionIndex(p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !st.uncountedFail.Has(p.UID):
			if indexed {
				if validIndex(job, ix) && !st.prevSucceededIndexes.has(ix) {
					newSucceeded = append(newSucceeded, ix)
					needsFlush = true
				}
			} else if !st.uncountedSucc.Has(p.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
				needsFlush = true
			}
		case failed || jobFailing:
			if !st.uncountedFail.Has(p.UID) && (!indexed || validIndex(job, ix)) && failedCounted(p) {
				uncounted.Failed = append(uncounted.Failed, p.UID)
				needsFlush = true
			}
		}
		if len(newSucceeded)+len(uncounted.Succeeded)+len(uncounted.Failed) >= MaxUncountedPods {
			reachedMax = true // the rest waits for the next sync
			break
		}
	}
	if indexed {
		st.succeededIndexes = st.succeededIndexes.with(newSucceeded...)
		s := st.succeededIndexes.String()
		if s != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(st.succeededIndexes.total())
		job.Status.CompletedIndexes = s
		var failedStr *string
		if st.failedIndexes != nil {
			failedStr = ptr.To(st.failedIndexes.String())
		}
		if !ptr.Equal(job.Status.FailedIndexes, failedStr) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	now := c.clock.Now()
	if finalTarget != nil && finalTarget.Type == batchv1.JobFailureTarget {
		// Record the FailureTarget before pods lose their finalizers; the
		// Job becomes Failed once they are counted.
		job.Status.Conditions = append(job.Status.Conditions, *finalTarget)
		needsFlush = true
		st.finished = newCondition(batchv1.JobFailed, finalTarget.Reason, finalTarget.Message, now)
	}
	if f := st.finished; f != nil && f.Type == batchv1.JobSuccessCriteriaMet && f.Status == corev1.ConditionTrue {
		if isTrueCondition(job, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *f)
			needsFlush = true
		}
		st.finished = newCondition(batchv1.JobComplete, f.Reason, f.Message, now)
	}

	needsFlush, err := c.flushAndRelease(ctx, st, release, withFinalizer, needsFlush)
	if err != nil {
		return err
	}
	finished := !reachedMax && c.enactFinished(st)
	if finished {
		needsFlush = true
	}
	if needsFlush {
		updated, err := c.updateStatus(ctx, st.job)
		if err != nil {
			return fmt.Errorf("removing uncounted pods from status: %w", err)
		}
		st.job = updated
		if finished {
			c.recordFinished(updated, st.finished)
			c.finished.Store(updated.UID, struct{}{})
		}
	}
	return nil
}

// canRemoveFinalizer: the Job is ending or being deleted, the pod
// succeeded, or it failed and is not kept for its index's replacement.
func (c *Controller) canRemoveFinalizer(st *syncState, p *corev1.Pod, failed bool) bool {
	if st.job.DeletionTimestamp != nil || st.finished != nil || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if hasBackoffLimitPerIndex(st.job) {
		if d, ok := st.delayedPerIndex[completionIndex(p)]; ok && d.UID == p.UID {
			return false
		}
	}
	return true
}

// flushAndRelease writes the status with the new uncounted pods (step 1),
// removes the finalizers (step 2) and moves the released pods to the
// counters (step 3). It returns whether status changes remain unwritten.
func (c *Controller) flushAndRelease(ctx context.Context, st *syncState, release []*corev1.Pod, withFinalizer sets.Set[types.UID], needsFlush bool) (bool, error) {
	k := key(st.job)
	if needsFlush {
		updated, err := c.updateStatus(ctx, st.job)
		if err != nil {
			return needsFlush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		st.job = updated
		c.backoff.set(k, st.backoff)
		needsFlush = false
	}
	var rmErr error
	if len(release) > 0 {
		var ok []bool
		ok, rmErr = c.removeFinalizers(ctx, k, release)
		for i, p := range release {
			if ok[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if countUncounted(&st.job.Status, withFinalizer) {
		needsFlush = true
	}
	if rmErr != nil && needsFlush {
		if updated, err := c.updateStatus(ctx, st.job); err != nil {
			return needsFlush, fmt.Errorf("removing uncounted pods from status: %w", err)
		} else {
			st.job = updated
		}
	}
	return needsFlush, rmErr
}

// countUncounted moves the uncounted pods that no longer have a finalizer
// to the counters; it reports a change.
func countUncounted(status *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := status.UncountedTerminatedPods
	changed := false
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range uids {
			if withFinalizer.Has(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	if left := keep(u.Succeeded); len(left) != len(u.Succeeded) {
		status.Succeeded += int32(len(u.Succeeded) - len(left))
		u.Succeeded = left
		changed = true
	}
	if left := keep(u.Failed); len(left) != len(u.Failed) {
		status.Failed += int32(len(u.Failed) - len(left))
		u.Failed = left
		changed = true
	}
	return changed
}

// removeFinalizers patches the tracking finalizer away from pods; ok[i] is
// true when pod i no longer has it (a pod already gone counts).
func (c *Controller) removeFinalizers(ctx context.Context, k string, pods []*corev1.Pod) ([]bool, error) {
	ok := make([]bool, len(pods))
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizerExpectations.expectRemoved(k, uids...)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, 50)
	for i, p := range pods {
		patch := removeFinalizerPatch(p)
		if patch == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				c.finalizerExpectations.observed(k, p.UID)
				if !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("remove tracking finalizer of %s: %w", p.Name, err))
					mu.Unlock()
					return
				}
			}
			ok[i] = true
		}()
	}
	wg.Wait()
	return ok, errors.Join(errs...)
}

// enactFinished sets the final condition (and completionTime) once no pod
// is uncounted or terminating.
func (c *Controller) enactFinished(st *syncState) bool {
	f := st.finished
	if f == nil {
		return false
	}
	job := st.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if st.terminating > 0 {
		return false
	}
	job.Status.Conditions, _ = setCondition(job.Status.Conditions, f.Type, f.Status, f.Reason, f.Message, c.clock.Now())
	if f.Type == batchv1.JobComplete {
		t := f.LastTransitionTime
		job.Status.CompletionTime = &t
	}
	return true
}

func (c *Controller) recordFinished(job *batchv1.Job, f *batchv1.JobCondition) {
	if f.Type == batchv1.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			c.recorder.Event(job, corev1.EventTypeWarning, ReasonTooManySucceeded, "Too many succeeded pods running after completion count reached")
		}
		c.recorder.Event(job, corev1.EventTypeNormal, ReasonCompleted, "Job completed")
		return
	}
	c.recorder.Event(job, corev1.EventTypeWarning, f.Reason, f.Message)
}

func (c *Controller) updateStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	out, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return job, err
	}
	return out, nil
}
