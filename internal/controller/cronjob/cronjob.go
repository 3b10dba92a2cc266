// Package cronjob is the CronJob controller: it creates a Job from the
// CronJob's template at each start time of its schedule.
//
// As upstream (kube-controller-manager's CronJob controller v2, v1.37):
// standard cron syntax and @hourly-style descriptors (robfig/cron/v3),
// spec.timeZone, concurrencyPolicy Allow/Forbid/Replace,
// startingDeadlineSeconds, only the most recent missed start time is run
// (with a TooManyMissedTimes warning past 100 missed), history limits for
// successful and failed Jobs, suspend, and status.active,
// lastScheduleTime and lastSuccessfulTime. Jobs are named
// <cronjob>-<scheduled minutes since the epoch> and annotated with
// batch.kubernetes.io/cronjob-scheduled-timestamp, so a start time is
// never run twice.
package cronjob

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// DefaultWorkers is upstream's --concurrent-cron-job-syncs.
const DefaultWorkers = 5

const jobIndexName = "skiff.sh/cronjob-controller-uid"

// AddJobIndex adds the controller's index of Jobs by their CronJob's UID
// to a Job informer, before it starts; once there, a second call is a
// no-op.
func AddJobIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[jobIndexName]; ok {
		return nil
	}
	return inf.AddIndexers(cache.Indexers{jobIndexName: func(obj any) ([]string, error) {
		if j, ok := obj.(*batchv1.Job); ok {
			if ref := metav1.GetControllerOf(j); ref != nil && ref.Kind == cronJobKind.Kind {
				return []string{string(ref.UID)}, nil
			}
		}
		return nil, nil
	}})
}

var cronJobKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller is the CronJob controller.
type Controller struct {
	client         kubernetes.Interface
	cronJobLister  batchlisters.CronJobLister
	cronJobsSynced cache.InformerSynced
	jobIndex       cache.Indexer
	jobsSynced     cache.InformerSynced
	recorder       record.EventRecorder
	clock          clock.WithTicker
	queue          *worker.Queue[string]
}

// New builds the CronJob controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs["cronjob"]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	cronJobs := cc.Informers.Batch().V1().CronJobs()
	jobs := cc.Informers.Batch().V1().Jobs()
	if err := AddJobIndex(jobs.Informer()); err != nil {
		return nil, fmt.Errorf("cronjob: job index: %w", err)
	}

	c := &Controller{
		client:         cc.Client,
		cronJobLister:  cronJobs.Lister(),
		cronJobsSynced: cronJobs.Informer().HasSynced,
		jobIndex:       jobs.Informer().GetIndexer(),
		jobsSynced:     jobs.Informer().HasSynced,
		recorder:       recorder,
		clock:          clk,
	}
	c.queue = worker.NewQueue("cronjob", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if _, err := cronJobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.updateCronJob,
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("cronjob: cronJobs handler: %w", err)
	}
	if _, err := jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.jobChanged,
		UpdateFunc: func(oldObj, newObj any) {
			old, cur := oldObj.(*batchv1.Job), newObj.(*batchv1.Job)
			if old.ResourceVersion == cur.ResourceVersion {
				return
			}
			if o, n := metav1.GetControllerOf(old), metav1.GetControllerOf(cur); o != nil && (n == nil || o.UID != n.UID) {
				c.jobChanged(old)
			}
			c.jobChanged(cur)
		},
		DeleteFunc: c.jobChanged,
	}); err != nil {
		return nil, fmt.Errorf("cronjob: jobs handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, "cronjob", []cache.InformerSynced{c.cronJobsSynced, c.jobsSynced}, c.queue)
}

func (c *Controller) enqueue(obj any) {
	if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(k)
	}
}

func (c *Controller) updateCronJob(oldObj, newObj any) {
	old, cur := oldObj.(*batchv1.CronJob), newObj.(*batchv1.CronJob)
	if old.Spec.Schedule != cur.Spec.Schedule || !ptr.Equal(old.Spec.TimeZone, cur.Spec.TimeZone) {
		s, err := parseSchedule(cur)
		if err != nil {
			c.recorder.Eventf(cur, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cur.Spec.Schedule)
			return
		}
		c.queue.AddAfter(key(cur), nextScheduleWait(cur, c.clock.Now(), s))
		return
	}
	c.enqueue(cur)
}

// jobChanged wakes the CronJob that controls the Job.
func (c *Controller) jobChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.Kind != cronJobKind.Kind {
		return
	}
	cj, err := c.cronJobLister.CronJobs(j.Namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return
	}
	c.queue.Add(key(cj))
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// Sync reconciles the CronJob named by key ("namespace/name"). When the
// next start time is known it returns worker.RequeueAfter.
func (c *Controller) Sync(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return nil
	}
	shared, err := c.cronJobLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	objs, err := c.jobIndex.ByIndex(jobIndexName, string(shared.UID))
	if err != nil {
		return err
	}
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j := o.(*batchv1.Job); j.Namespace == ns {
			jobs = append(jobs, j)
		}
	}
	cj := shared.DeepCopy()
	cleaned := c.cleanupFinishedJobs(ctx, cj, jobs)
	requeue, changed, syncErr := c.syncCronJob(ctx, cj, jobs)
	if cleaned || changed {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of cronjob %s: %w", k, err)
		}
	}
	if requeue != nil {
		return worker.RequeueAfter(*requeue)
	}
	return syncErr
}

func finishedType(j *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type, true
		}
	}
	return "", false
}

func inActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func removeActive(cj *batchv1.CronJob, uid types.UID) {
	active := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			active = append(active, r)
		}
	}
	cj.Status.Active = active
}

// syncCronJob reconciles status.active with the Jobs, then starts a Job if
// a start time is due. It returns when to look again and whether the
// status changed.
func (c *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, bool, error) {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	changed := false
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		found := inActive(cj, j.UID)
		ft, finished := finishedType(j)
		switch {
		case !found && !finished:
			// Maybe our cache is behind our own status write.
			fresh, err := c.client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return nil, changed, err
			}
			if inActive(fresh, j.UID) {
				*cj = *fresh
				continue
			}
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case finished:
			if found {
				removeActive(cj, j.UID)
				c.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, ft)
				changed = true
			}
			if ft == batchv1.JobComplete && j.Status.CompletionTime != nil {
				if cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time) {
					cj.Status.LastSuccessfulTime = j.Status.CompletionTime
					changed = true
				}
			}
		}
	}
	for _, r := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
		if children[r.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", r.Name)
			removeActive(cj, r.UID)
			changed = true
		case err != nil:
			return nil, changed, err
		}
	}

	if cj.DeletionTimestamp != nil {
		return nil, changed, nil
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, changed, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return nil, changed, nil
	}
	if containsTZ(cj.Spec.Schedule) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule", "CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule)
	}
	s, err := parseSchedule(cj)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	_, scheduled, m, err := mostRecentScheduleTime(cj, now, s, true)
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, changed, nil
	}
	if scheduled != nil && m == manyMissed {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
		logger.Info("Too many missed start times", "cronjob", klog.KObj(cj))
	}
	next := func() *time.Duration { d := nextScheduleWait(cj, now, s); return &d }
	if scheduled == nil {
		return next(), changed, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return next(), changed, nil
	}
	name := jobName(cj, *scheduled)
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == cj.Namespace {
			return next(), changed, nil
		}
	}
	if cj.Status.LastScheduleTime.Equal(&metav1.Time{Time: *scheduled}) {
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return next(), changed, nil
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent {
		for _, r := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
			j, err := c.client.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, changed, err
			}
			if !c.deleteJob(ctx, cj, j) {
				return nil, changed, fmt.Errorf("could not replace job %s/%s", j.Namespace, j.Name)
			}
			changed = true
		}
	}

	req, err := jobFromTemplate(cj, *scheduled)
	if err != nil {
		return nil, changed, err
	}
	created, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, req, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, changed, err
	case apierrors.IsAlreadyExists(err):
		existing, err := c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		if err != nil {
			return nil, changed, err
		}
		if !metav1.IsControlledBy(existing, cj) || inActive(cj, existing.UID) {
			return nil, changed, nil
		}
		logger.Info("Job already exists", "cronjob", klog.KObj(cj), "job", req.Name)
		created = existing
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, changed, err
	default:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	}
	cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{
		Kind: "Job", APIVersion: "batch/v1", Namespace: created.Namespace, Name: created.Name,
		UID: created.UID, ResourceVersion: created.ResourceVersion,
	})
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return next(), true, nil
}

func containsTZ(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == 'T' && s[i+1] == 'Z' {
			return true
		}
	}
	return false
}

// jobFromTemplate is the Job of the start time scheduled.
func jobFromTemplate(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	loc, err := time.LoadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := map[string]string{}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:              jobName(cj, scheduled),
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: metav1.Time{Time: scheduled},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&j.Spec)
	return j, nil
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond the history
// limits; it reports a status change.
func (c *Controller) cleanupFinishedJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch t, ok := finishedType(j); {
		case ok && t == batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case ok && t == batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && c.removeOldest(ctx, cj, succeeded, int(*l)) {
		changed = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && c.removeOldest(ctx, cj, failed, int(*l)) {
		changed = true
	}
	return changed
}

func (c *Controller) removeOldest(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, keep int) bool {
	n := len(jobs) - keep
	if n <= 0 {
		return false
	}
	sort.Slice(jobs, func(a, b int) bool {
		x, y := jobs[a].Status.StartTime, jobs[b].Status.StartTime
		switch {
		case x == nil && y != nil:
			return false
		case x != nil && y == nil:
			return true
		case x.Equal(y):
			return jobs[a].Name < jobs[b].Name
		}
		return x.Before(y)
	})
	changed := false
	for _, j := range jobs[:n] {
		if c.deleteJob(ctx, cj, j) {
			changed = true
		}
	}
	return changed
}

// deleteJob deletes a Job in the background (its pods follow through the
// garbage collector) and drops it from status.active.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, j *batchv1.Job) bool {
	err := c.client.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		klog.FromContext(ctx).Error(err, "Error deleting job from cronjob", "job", klog.KObj(j), "cronjob", klog.KObj(cj))
		return false
	}
	removeActive(cj, j.UID)
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", j.Name)
	return true
}
