package job

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/podowner"
)

// podsForJob returns the pods the Job owns, adopting matching orphans
// (ownerReference and tracking finalizer) and releasing owned pods that no
// longer match. Adoption is re-checked against a live read of the Job.
func (c *Controller) podsForJob(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("job %s selector: %w", key(job), err)
	}
	owned, err := podowner.Owned(c.podIndex, job.Namespace, job.UID)
	if err != nil {
		return nil, err
	}
	orphans, err := podowner.Orphans(c.podIndex, job.Namespace)
	if err != nil {
		return nil, err
	}
	var (
		out      []*corev1.Pod
		errs     []error
		canAdopt *bool
	)
	for _, o := range owned {
		p := o.(*corev1.Pod)
		if p.Namespace != job.Namespace {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
			continue
		}
		if job.DeletionTimestamp != nil {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"$deleteFromPrimitiveList/finalizers":[%q],"uid":%q}}`,
			job.UID, batchv1.JobTrackingFinalizer, p.UID)
		if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
			errs = append(errs, fmt.Errorf("release pod %s: %w", p.Name, err))
		}
	}
	for _, o := range orphans {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil || job.DeletionTimestamp != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if canAdopt == nil {
			fresh, err := c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
			ok := err == nil && fresh.UID == job.UID && fresh.DeletionTimestamp == nil
			canAdopt = &ok
		}
		if !*canAdopt {
			break
		}
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"finalizers":[%q],"uid":%q}}`,
			jobKind.GroupVersion().String(), jobKind.Kind, job.Name, job.UID, batchv1.JobTrackingFinalizer, p.UID)
		adopted, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("adopt pod %s: %w", p.Name, err))
			}
			continue
		}
		out = append(out, adopted)
	}
	return out, errors.Join(errs...)
}

// deleteActive deletes pods keeping their finalizers (trackStatus counts
// and releases them); it returns the deleted ready pods and all deleted.
func (c *Controller) deleteActive(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	var (
		deletedReady atomic.Int32
		deleted      atomic.Int32
		mu           sync.Mutex
		errs         []error
		wg           sync.WaitGroup
	)
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.deletePodOf(ctx, job, p); err != nil && !apierrors.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			deleted.Add(1)
			if isPodReady(p) {
				deletedReady.Add(1)
			}
		}()
	}
	wg.Wait()
	return deletedReady.Load(), deleted.Load(), errors.Join(errs...)
}

// deleteJobPods removes the finalizer of each pod, then deletes it (pods
// deleted because of parallelism or suspend are not counted as failures).
func (c *Controller) deleteJobPods(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	k := key(job)
	var (
		deletedReady atomic.Int32
		deleted      atomic.Int32
		mu           sync.Mutex
		errs         []error
		wg           sync.WaitGroup
	)
	fail := func(err error) {
		c.expectations.deletionObserved(k)
		if !apierrors.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if patch := removeFinalizerPatch(p); patch != nil {
				if _, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
					fail(fmt.Errorf("remove tracking finalizer of %s: %w", p.Name, err))
					return
				}
			}
			if err := c.deletePodOf(ctx, job, p); err != nil {
				fail(err)
				if !apierrors.IsNotFound(err) {
					return
				}
			}
			deleted.Add(1)
			if isPodReady(p) {
				deletedReady.Add(1)
			}
		}()
	}
	wg.Wait()
	return deletedReady.Load(), deleted.Load(), errors.Join(errs...)
}

func (c *Controller) deletePodOf(ctx context.Context, job *batchv1.Job, p *corev1.Pod) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		c.recorder.Eventf(job, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting: %v", err)
		return fmt.Errorf("delete pod %s: %w", p.Name, err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %v", p.Name)
	return nil
}

// manage creates or deletes pods so that the Job runs as many as it
// should; it returns the new active count.
func (c *Controller) manage(ctx context.Context, st *syncState) (int32, error) {
	job, k := st.job, key(st.job)
	active := int32(len(st.active))
	parallelism := *job.Spec.Parallelism

	if suspended(job) {
		rm := podsToRemove(job, st.active, int(active))
		c.expectations.expect(k, 0, len(rm))
		ready, removed, err := c.deleteJobPods(ctx, job, rm)
		st.terminating += removed
		st.ready -= ready
		return active - removed, err
	}

	var want int32
	if job.Spec.Completions == nil {
		want = parallelism
		if st.succeeded > 0 {
			want = active // after a success, let the rest finish
		}
	} else {
		want = max(0, min(*job.Spec.Completions-st.succeeded, parallelism))
	}

	rm := podsToRemove(job, st.active, int(max(0, active-want)))
	if len(rm) > MaxPodCreateDeletePerSync {
		rm = rm[:MaxPodCreateDeletePerSync]
	}
	if len(rm) > 0 {
		c.expectations.expect(k, 0, len(rm))
		ready, removed, err := c.deleteJobPods(ctx, job, rm)
		st.terminating += removed
		st.ready -= ready
		return active - removed, err
	}

	var terminating int32
	if onlyReplaceFailedPods(job) {
		terminating = st.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if left := remainingBackoff(c.clock.Now(), DefaultPodFailureBackoff, MaxPodFailureBackoff, st.backoff.failuresAfterLastSuccess, st.backoff.lastFailureTime); left > 0 {
			c.queue.AddAfter(k, max(left, SyncBatchPeriod))
			return active, nil
		}
	}
	diff = min(diff, MaxPodCreateDeletePerSync)

	var indexes []int
	if isIndexed(job) {
		taken := st.succeededIndexes.with(indexesOf(st.active)...)
		if onlyReplaceFailedPods(job) {
			taken = taken.with(indexesOf(filterPods(st.pods, isPodTerminating))...)
		}
		if st.failedIndexes != nil {
			taken = taken.union(*st.failedIndexes)
		}
		indexes = firstPendingIndexes(taken, int(diff), completions(job))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			indexes, wait = c.indexesReadyToCreate(indexes, st.delayedPerIndex)
			if wait > 0 {
				c.queue.AddAfter(k, max(wait, SyncBatchPeriod))
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}
	if diff == 0 {
		return active, nil
	}

	template := job.Spec.Template.DeepCopy()
	if isIndexed(job) {
		addIndexEnv(&template.Spec)
	}
	if !hasTrackingFinalizerIn(template.Finalizers) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}

	c.expectations.expect(k, int(diff), 0)
	var (
		created atomic.Int32
		mu      sync.Mutex
		errs    []error
	)
	next := 0
	remaining := int(diff)
	for batch := min(remaining, 1); batch > 0; batch = min(2*batch, remaining) {
		errsBefore := len(errs)
		var wg sync.WaitGroup
		for range batch {
			ix := noIndex
			if next < len(indexes) {
				ix = indexes[next]
			}
			next++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.createPod(ctx, st, template, ix); err != nil {
					c.expectations.creationObserved(k)
					if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
						return
					}
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				created.Add(1)
			}()
		}
		wg.Wait()
		remaining -= batch
		if len(errs) > errsBefore && remaining > 0 {
			for range remaining {
				c.expectations.creationObserved(k)
			}
			break
		}
	}
	return active + created.Load(), errors.Join(errs...)
}

func hasTrackingFinalizerIn(fs []string) bool {
	for _, f := range fs {
		if f == batchv1.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

// indexesReadyToCreate keeps the indexes whose per-index backoff has
// passed; when none has, it returns the shortest wait.
func (c *Controller) indexesReadyToCreate(indexes []int, delayed map[int]*corev1.Pod) ([]int, time.Duration) {
	var ready []int
	var wait *time.Duration
	now := c.clock.Now()
	for _, ix := range indexes {
		left := time.Duration(0)
		if p := delayed[ix]; p != nil {
			t := finishedTime(p)
			left = remainingBackoff(now, DefaultPodFailureBackoff, MaxPodFailureBackoff, indexAbsoluteFailureCount(p)+1, &t)
		}
		if left == 0 {
			ready = append(ready, ix)
		} else if wait == nil || left < *wait {
			wait = &left
		}
	}
	if len(ready) > 0 {
		return ready, 0
	}
	return nil, ptr.Deref(wait, 0)
}

// createPod creates one pod from template (index ix for Indexed Jobs).
func (c *Controller) createPod(ctx context.Context, st *syncState, template *corev1.PodTemplateSpec, ix int) error {
	job := st.job
	t := template
	generateName := job.Name + "-"
	if ix != noIndex {
		t = template.DeepCopy()
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		t.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		t.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
		generateName = podGenerateName(job.Name, ix)
		if hasBackoffLimitPerIndex(job) {
			failures, ignored := nextIndexFailureCounts(job, st.delayedPerIndex[ix])
			t.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
			if ignored > 0 {
				t.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
			}
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    generateName,
			Namespace:       job.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if len(pod.Labels) == 0 {
		err := errors.New("unable to create pods, no labels")
		c.recorder.Eventf(job, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		return err
	}
	out, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			c.recorder.Eventf(job, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating: %v", err)
		}
		return fmt.Errorf("create pod for job %s: %w", key(job), err)
	}
	c.recorder.Eventf(job, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %v", out.Name)
	return nil
}

// nextIndexFailureCounts are the failure counts a replacement inherits from
// the failed pod it replaces.
func nextIndexFailureCounts(job *batchv1.Job, replaced *corev1.Pod) (int32, int32) {
	if replaced == nil {
		return 0, 0
	}
	failures := indexFailureCount(replaced)
	ignored := annotationInt32(replaced, batchv1.JobIndexIgnoredFailureCountAnnotation)
	if matchPodFailurePolicy(job.Spec.PodFailurePolicy, replaced).countFailed {
		failures++
	} else {
		ignored++
	}
	return failures, ignored
}
