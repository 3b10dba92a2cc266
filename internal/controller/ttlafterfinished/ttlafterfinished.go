// Package ttlafterfinished deletes finished Jobs once their
// spec.ttlSecondsAfterFinished has passed, as upstream's
// TTL-after-finished controller: the time counts from the Complete or
// Failed condition's lastTransitionTime, the decision is re-checked on a
// live read, and the Job is deleted with foreground propagation and a UID
// precondition (its pods go first).
package ttlafterfinished

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// DefaultWorkers is upstream's --concurrent-ttl-after-finished-syncs.
const DefaultWorkers = 5

// Controller is the TTL-after-finished controller.
type Controller struct {
	client     kubernetes.Interface
	jobLister  batchlisters.JobLister
	jobsSynced cache.InformerSynced
	clock      clock.WithTicker
	queue      *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	workers := cc.Options.ConcurrentSyncs["ttl-after-finished"]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	jobs := cc.Informers.Batch().V1().Jobs()
	c := &Controller{client: cc.Client, jobLister: jobs.Lister(), jobsSynced: jobs.Informer().HasSynced, clock: clk}
	c.queue = worker.NewQueue("ttl_jobs_to_delete", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if _, err := jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.jobChanged,
		UpdateFunc: func(_, obj any) { c.jobChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("ttl-after-finished: jobs handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, "ttl-after-finished", []cache.InformerSynced{c.jobsSynced}, c.queue)
}

func (c *Controller) jobChanged(obj any) {
	j, ok := obj.(*batchv1.Job)
	if !ok || j.DeletionTimestamp != nil || !needsCleanup(j) {
		return
	}
	c.queue.Add(j.Namespace + "/" + j.Name)
}

// Sync deletes the Job named by key if its TTL has passed, else asks to be
// looked at again when it will have.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	j, err := c.jobLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if left, due, err := c.expiry(ctx, j); err != nil || !due {
		return requeue(left, err)
	}
	// The cache may be stale (the TTL changed, the Job was re-run): decide
	// again on a live read.
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if left, due, err := c.expiry(ctx, fresh); err != nil || !due {
		return requeue(left, err)
	}
	klog.FromContext(ctx).V(4).Info("Cleaning up Job", "job", klog.KObj(fresh))
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another Job of that name
	}
	return err
}

func requeue(left time.Duration, err error) error {
	if err != nil {
		return err
	}
	if left > 0 {
		return worker.RequeueAfter(left)
	}
	return nil
}

// expiry returns the time left before j may be deleted and whether it is
// due now; a Job not to clean up is neither.
func (c *Controller) expiry(ctx context.Context, j *batchv1.Job) (time.Duration, bool, error) {
	if j.DeletionTimestamp != nil || !needsCleanup(j) {
		return 0, false, nil
	}
	finished, err := finishTime(j)
	if err != nil {
		return 0, false, err
	}
	now := c.clock.Now()
	if finished.After(now) {
		klog.FromContext(ctx).Info("Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred.", "job", klog.KObj(j))
	}
	left := finished.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now)
	return left, left <= 0, nil
}

func needsCleanup(j *batchv1.Job) bool {
	return j.Spec.TTLSecondsAfterFinished != nil && isFinished(j)
}

func isFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// finishTime is the lastTransitionTime of the Job's Complete or Failed
// condition.
func finishTime(j *batchv1.Job) (time.Time, error) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			if c.LastTransitionTime.IsZero() {
				return time.Time{}, fmt.Errorf("unable to find the time when the Job %s/%s finished", j.Namespace, j.Name)
			}
			return c.LastTransitionTime.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("unable to find the status of the finished Job %s/%s", j.Namespace, j.Name)
}
