// Package job is the Job controller: it runs a Job's pods to completion.
//
// It follows upstream's kube-controller-manager Job controller (v1.37)
// where a client can see it: completions and parallelism, NonIndexed and
// Indexed completion modes (the index in the annotation and label
// batch.kubernetes.io/job-completion-index, the env JOB_COMPLETION_INDEX and
// the hostname <job>-<index>), backoffLimit, backoffLimitPerIndex and
// maxFailedIndexes, podFailurePolicy, successPolicy, activeDeadlineSeconds,
// suspend, podReplacementPolicy, the pod failure backoff (10 s doubling up
// to 10 min), and the conditions FailureTarget, SuccessCriteriaMet,
// Complete, Failed and Suspended.
//
// Pods are tracked with the batch.kubernetes.io/job-tracking finalizer: a
// finished pod is first recorded in status.uncountedTerminatedPods, then
// its finalizer is removed, then it moves to the succeeded or failed
// counter. So a pod removed at any point is counted once, and no pod is
// counted twice even if the controller restarts between steps.
package job

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/podowner"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

const (
	// DefaultWorkers is upstream's --concurrent-job-syncs.
	DefaultWorkers = 5
	// SyncBatchPeriod batches the syncs pod events cause.
	SyncBatchPeriod = time.Second
	// MaxUncountedPods caps status.uncountedTerminatedPods and the finalizer
	// removals of one sync.
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync caps the pods created or deleted in a sync.
	MaxPodCreateDeletePerSync = 500

	// Event reasons, as upstream.
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
	ReasonCompleted        = "Completed"
	ReasonSuspended        = "Suspended"
	ReasonResumed          = "Resumed"
	ReasonTooManySucceeded = "TooManySucceededPods"
)

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Controller is the Job controller.
type Controller struct {
	client     kubernetes.Interface
	jobLister  batchlisters.JobLister
	jobsSynced cache.InformerSynced
	podLister  corelisters.PodLister
	podIndex   cache.Indexer
	podsSynced cache.InformerSynced
	recorder   record.EventRecorder
	clock      clock.WithTicker
	workers    int

	queue       *worker.Queue[string]
	orphanQueue *worker.Queue[string]

	expectations          *expectations
	finalizerExpectations *finalizerExpectations
	backoff               *backoffStore
	// finished holds the UIDs of Jobs this controller marked finished whose
	// update it has not seen yet; they are not synced again meanwhile.
	finished sync.Map
}

// New builds the Job controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs["job"]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	jobs := cc.Informers.Batch().V1().Jobs()
	pods := cc.Informers.Core().V1().Pods()
	if err := podowner.AddIndex(pods.Informer()); err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	c := &Controller{
		client:                cc.Client,
		jobLister:             jobs.Lister(),
		jobsSynced:            jobs.Informer().HasSynced,
		podLister:             pods.Lister(),
		podIndex:              pods.Informer().GetIndexer(),
		podsSynced:            pods.Informer().HasSynced,
		recorder:              recorder,
		clock:                 clk,
		workers:               workers,
		expectations:          newExpectations(clk),
		finalizerExpectations: newFinalizerExpectations(),
		backoff:               newBackoffStore(),
	}
	// API errors are retried from 1 s doubling to 1 min, as upstream.
	c.queue = worker.NewQueue("job", c.Sync, worker.Options[string]{
		Workers: workers, Clock: clk,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
	})
	c.orphanQueue = worker.NewQueue("job_orphan_pod", c.syncOrphan, worker.Options[string]{
		Clock:       clk,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
	})
	if _, err := jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(obj, 0) },
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("job: jobs handler: %w", err)
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: func(obj any) { c.deletePod(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("job: pods handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	klog.FromContext(ctx).V(1).Info("Starting job controller", "workers", c.workers)
	return worker.Run(ctx, "job", []cache.InformerSynced{c.jobsSynced, c.podsSynced}, c.queue, c.orphanQueue)
}

// --- helpers over a Job

func isFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// managedElsewhere is true for a Job whose spec.managedBy names another
// controller: it is left alone.
func managedElsewhere(j *batchv1.Job) bool {
	return j.Spec.ManagedBy != nil && *j.Spec.ManagedBy != batchv1.JobControllerName
}

func suspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

func findCondition(cs []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

func newCondition(t batchv1.JobConditionType, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
}

// setCondition sets a condition of type t to status, reason and message;
// a False condition is never added, only updated. It reports a change.
func setCondition(cs []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(cs, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return cs, false
		}
		*c = *newCondition(t, reason, message, now)
		c.Status = status
		return cs, true
	}
	if status == corev1.ConditionFalse {
		return cs, false
	}
	return append(cs, *newCondition(t, reason, message, now)), true
}

func isTrueCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	if c := findCondition(j.Status.Conditions, t); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

// --- sync

// syncState is what one sync knows about a Job.
type syncState struct {
	job               *batchv1.Job
	pods              []*corev1.Pod
	active            []*corev1.Pod
	ready             int32
	terminating       int32
	succeeded, failed int32
	uncountedSucc     sets.Set[types.UID]
	uncountedFail     sets.Set[types.UID]
	expectedRm        sets.Set[types.UID]
	backoff           backoffRecord

	prevSucceededIndexes indexSet
	succeededIndexes     indexSet
	failedIndexes        *indexSet
	// delayedPerIndex is, per index, the last failed pod whose finalizer is
	// kept until its replacement is created (backoffLimitPerIndex).
	delayedPerIndex map[int]*corev1.Pod

	// finished is the condition that ends the Job, once decided.
	finished *batchv1.JobCondition
}

// Sync reconciles the Job named by key ("namespace/name").
func (c *Controller) Sync(ctx context.Context, k string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() { logger.V(4).Info("Finished syncing job", "key", k, "duration", c.clock.Since(start)) }()
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return nil
	}
	shared, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expectations.forget(k)
		c.finalizerExpectations.forget(k)
		c.backoff.remove(k)
		return nil
	}
	if err != nil {
		return err
	}
	if managedElsewhere(shared) {
		return nil
	}
	job := shared.DeepCopy()
	if isFinished(job) {
		c.backoff.remove(k)
		c.finished.Delete(job.UID)
		return nil
	}
	if _, ok := c.finished.Load(job.UID); ok {
		return nil // marked finished by us; waiting for the update event
	}
	if m := job.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		c.recorder.Event(job, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	if job.Spec.Parallelism == nil || job.Spec.BackoffLimit == nil {
		return nil // not defaulted: not from an API server
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}

	// Expectations are read before the pods, so that a pod created after
	// this point defers the sync rather than sneaking in.
	satisfied := c.expectations.satisfied(k)
	pods, err := c.podsForJob(ctx, job)
	if err != nil {
		return err
	}
	st := &syncState{
		job:           job,
		pods:          pods,
		active:        filterPods(pods, isPodActive),
		uncountedSucc: sets.New(job.Status.UncountedTerminatedPods.Succeeded...),
		uncountedFail: sets.New(job.Status.UncountedTerminatedPods.Failed...),
		expectedRm:    c.finalizerExpectations.expected(k),
	}
	st.ready = countReady(st.active)
	st.terminating = int32(len(filterPods(pods, isPodTerminating)))
	active := int32(len(st.active))
	newSucc, newFail := c.newFinishedPods(st)
	st.succeeded = job.Status.Succeeded + int32(len(newSucc)) + int32(st.uncountedSucc.Len())
	st.failed = job.Status.Failed + int32(countedFailures(job, newFail)) + int32(st.uncountedFail.Len())

	now := c.clock.Now()
	if job.Status.StartTime == nil && !suspended(job) {
		t := metav1.NewTime(now)
		job.Status.StartTime = &t
	}
	st.backoff = nextBackoffRecord(c.backoff.get(k), newSucc, newFail)

	c.decideFinished(st)

	var manageErr error
	suspendChanged := false
	if st.finished != nil {
		deletedReady, deleted, err := c.deleteActive(ctx, job, st.active)
		if deleted != active || !satisfied {
			// Pods or finalizers may remain: finish in a later sync.
			st.finished = nil
		}
		active -= deleted
		st.terminating += deleted
		st.ready -= deletedReady
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			active, manageErr = c.manage(ctx, st)
			managed = true
		}
		complete := false
		if job.Spec.Completions == nil {
			complete = st.succeeded > 0 && active == 0
		} else {
			complete = st.succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			st.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods", now)
		case managed && suspended(job):
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, ReasonSuspended, "Job suspended")
				// Scheduling directives may change while suspended; the
				// deadline counts from the resume (MutableSchedulingDirectivesForSuspendedJobs).
				job.Status.StartTime = nil
			}
		case managed:
			var changed bool
			job.Status.Conditions, changed = setCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
			if changed {
				suspendChanged = true
				c.recorder.Event(job, corev1.EventTypeNormal, ReasonResumed, "Job resumed")
				t := metav1.NewTime(now)
				job.Status.StartTime = &t
			}
		}
	}

	needsFlush := suspendChanged || active != job.Status.Active || !ptr.Equal(&st.ready, job.Status.Ready) ||
		!ptr.Equal(&st.terminating, job.Status.Terminating)
	job.Status.Active = active
	job.Status.Ready = ptr.To(st.ready)
	job.Status.Terminating = ptr.To(st.terminating)
	if err := c.trackStatus(ctx, st, needsFlush); err != nil {
		return fmt.Errorf("tracking status of job %s: %w", k, err)
	}
	return manageErr
}

// decideFinished evaluates, in upstream's order, whether the Job has
// failed or met its success criteria: earlier SuccessCriteriaMet and
// FailureTarget conditions first, then the pod failure policy, the backoff
// limit, the deadline, the per-index limits and the success policy.
func (c *Controller) decideFinished(st *syncState) {
	job, now := st.job, c.clock.Now()
	st.finished = isTrueCondition(job, batchv1.JobSuccessCriteriaMet)
	if st.finished == nil {
		if ft := isTrueCondition(job, batchv1.JobFailureTarget); ft != nil {
			st.finished = newCondition(batchv1.JobFailed, ft.Reason, ft.Message, now)
		} else if msg := failJobMessage(job, st.pods); msg != "" {
			st.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, msg, now)
		}
	}
	if st.finished == nil {
		switch {
		case st.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, st.pods):
			st.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case c.pastActiveDeadline(job):
			st.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case job.Spec.ActiveDeadlineSeconds != nil && !suspended(job) && job.Status.StartTime != nil:
			left := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - c.clock.Since(job.Status.StartTime.Time)
			c.queue.AddAfter(key(job), left)
		}
	}
	if !isIndexed(job) {
		return
	}
	n := completions(job)
	st.prevSucceededIndexes = parseIndexSet(job.Status.CompletedIndexes, n)
	var newIxs []int
	for _, p := range st.pods {
		if ix := completionIndex(p); p.Status.Phase == corev1.PodSucceeded && validIndex(job, ix) && hasTrackingFinalizer(p) {
			newIxs = append(newIxs, ix)
		}
	}
	st.succeededIndexes = st.prevSucceededIndexes.with(newIxs...)
	st.succeeded = int32(st.succeededIndexes.total())
	if hasBackoffLimitPerIndex(job) {
		var prev indexSet
		if job.Status.FailedIndexes != nil {
			prev = parseIndexSet(*job.Status.FailedIndexes, n)
		}
		var failedIxs []int
		for _, p := range st.pods {
			if ix := completionIndex(p); validIndex(job, ix) && hasTrackingFinalizer(p) && isIndexFailed(job, p) {
				failedIxs = append(failedIxs, ix)
			}
		}
		failed := prev.with(failedIxs...)
		st.failedIndexes = &failed
		if st.finished == nil {
			if job.Spec.MaxFailedIndexes != nil && failed.total() > int(*job.Spec.MaxFailedIndexes) {
				st.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes", now)
			} else if failed.total() > 0 && failed.total()+st.succeededIndexes.total() >= n {
				st.finished = newCondition(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
			}
		}
		st.delayedPerIndex = c.podsWithDelayedDeletion(st)
	}
	if st.finished == nil {
		if msg, ok := matchSuccessPolicy(job.Spec.SuccessPolicy, n, st.succeededIndexes); ok {
			st.finished = newCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, msg, now)
		}
	}
}

// isIndexFailed: the pod's index failed for good (FailIndex, or the
// index's failures reached backoffLimitPerIndex).
func isIndexFailed(job *batchv1.Job, p *corev1.Pod) bool {
	if !isPodFailed(p, job) {
		return false
	}
	m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p)
	if m.action != nil && *m.action == batchv1.PodFailurePolicyActionFailIndex {
		return true
	}
	return m.countFailed && indexFailureCount(p) >= *job.Spec.BackoffLimitPerIndex
}

// podsWithDelayedDeletion picks, per index neither succeeded, failed nor
// active, the failed pod its replacement inherits the failure count from.
func (c *Controller) podsWithDelayedDeletion(st *syncState) map[int]*corev1.Pod {
	activeIxs := sets.New(indexesOf(st.active)...)
	out := map[int]*corev1.Pod{}
	for _, p := range c.validPods(st, nil) {
		if !isPodFailed(p, st.job) {
			continue
		}
		ix := completionIndex(p)
		if st.succeededIndexes.has(ix) || st.failedIndexes.has(ix) || activeIxs.Has(ix) {
			continue
		}
		if last, ok := out[ix]; ok {
			if indexAbsoluteFailureCount(last) <= indexAbsoluteFailureCount(p) && !finishedTime(p).Before(finishedTime(last)) {
				out[ix] = p
			}
		} else {
			out[ix] = p
		}
	}
	return out
}

// validPods are the pods with a tracking finalizer not yet counted (not in
// uncounted, finalizer removal not pending) and, for Indexed Jobs, a valid
// index.
func (c *Controller) validPods(st *syncState, uncounted sets.Set[types.UID]) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range st.pods {
		if !hasTrackingFinalizer(p) || uncounted.Has(p.UID) || st.expectedRm.Has(p.UID) {
			continue
		}
		if isIndexed(st.job) && !validIndex(st.job, completionIndex(p)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func (c *Controller) newFinishedPods(st *syncState) (succeeded, failed []*corev1.Pod) {
	for _, p := range c.validPods(st, st.uncountedSucc) {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded = append(succeeded, p)
		}
	}
	for _, p := range c.validPods(st, st.uncountedFail) {
		if isPodFailed(p, st.job) {
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

// countedFailures is the failed pods the pod failure policy does not ignore.
func countedFailures(job *batchv1.Job, failed []*corev1.Pod) int {
	n := 0
	for _, p := range failed {
		if matchPodFailurePolicy(job.Spec.PodFailurePolicy, p).countFailed {
			n++
		}
	}
	return n
}

// failJobMessage is the message of the first failed pod that a FailJob
// rule matches, or "".
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) string {
	if job.Spec.PodFailurePolicy == nil {
		return ""
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); m.failJobMessage != "" {
				return m.failJobMessage
			}
		}
	}
	return ""
}

// pastBackoffLimitOnFailure sums the container restarts of running and
// pending pods of an OnFailure Job against the backoff limit.
func pastBackoffLimitOnFailure(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var n int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range p.Status.InitContainerStatuses {
			n += cs.RestartCount
		}
		for _, cs := range p.Status.ContainerStatuses {
			n += cs.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return n > 0
	}
	return n >= *job.Spec.BackoffLimit
}

func (c *Controller) pastActiveDeadline(job *batchv1.Job) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || suspended(job) {
		return false
	}
	return c.clock.Since(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}
