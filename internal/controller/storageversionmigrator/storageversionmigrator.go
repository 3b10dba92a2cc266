// Package storageversionmigrator rewrites every stored object of a
// resource when a StorageVersionMigration asks for it, as upstream's
// migration runner, resource-version and storage-version-migrator
// controllers do together: one migration runs at a time per resource
// (MigrationRunning), the resource's current list resourceVersion is
// recorded as the checkpoint (status.resourceVersion), and every object
// not written since is patched with a no-op merge patch carrying its
// resourceVersion. The API server rewrites an object on such a patch only
// when its stored form is stale (today: encrypted with a key that is no
// longer the first of its provider), so after a key rotation one
// migration re-encrypts every Secret. Then MigrationSucceeded, or
// MigrationFailed with the error.
package storageversionmigrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is upstream's controller name (--controllers).
const Name = "storage-version-migrator-controller"

// Upstream's condition reasons.
const (
	reasonRunning   = "MigrationRunning"
	reasonSucceeded = "StorageVersionMigrationSucceeded"
	reasonFailed    = "StorageVersionMigrationFailed"
)

// discoveryGrace is how long a resource missing from discovery is waited
// for (a CRD just created) before the migration fails.
const discoveryGrace = time.Minute

// Controller is the storage version migrator.
type Controller struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	lister  svmlisters.StorageVersionMigrationLister
	synced  cache.InformerSynced
	clock   clock.WithTicker
	queue   *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Dynamic == nil {
		return nil, errors.New("storage version migrator: needs a dynamic client")
	}
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	svms := cc.Informers.Storagemigration().V1().StorageVersionMigrations()
	c := &Controller{
		client: cc.Client, dynamic: cc.Dynamic,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cc.Client.Discovery())),
		lister: svms.Lister(), synced: svms.Informer().HasSynced, clock: clk,
	}
	c.queue = worker.NewQueue("storage_version_migrator", c.Sync, worker.Options[string]{Workers: 1, Clock: clk})
	add := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := svms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		// A finished migration lets the next one of its resource start.
		DeleteFunc: func(any) { c.requeueWaiting() },
	}); err != nil {
		return nil, fmt.Errorf("%s: handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, []cache.InformerSynced{c.synced}, c.queue)
}

func (c *Controller) requeueWaiting() {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svm := range all {
		if !finished(svm) {
			c.queue.Add(svm.Name)
		}
	}
}

func finished(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed))
}

func running(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationRunning))
}

// Sync moves one migration a step: start it, record its checkpoint, or
// migrate.
func (c *Controller) Sync(ctx context.Context, name string) error {
	cached, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if finished(cached) {
		c.requeueWaiting()
		return nil
	}
	svm := cached.DeepCopy()
	if !running(svm) {
		// One migration at a time per resource: the oldest goes first.
		all, err := c.lister.List(labels.Everything())
		if err != nil {
			return err
		}
		for _, other := range all {
			if other.Name != svm.Name && other.Spec.Resource == svm.Spec.Resource && running(other) && !finished(other) {
				return worker.RequeueAfter(5 * time.Second)
			}
		}
		c.setCondition(svm, svmv1.MigrationRunning, reasonRunning, "The migration is running")
		return c.updateStatus(ctx, svm)
	}
	gr := schema.GroupResource{Group: svm.Spec.Resource.Group, Resource: svm.Spec.Resource.Resource}
	gvr, err := c.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		c.mapper.Reset()
		if c.clock.Since(svm.CreationTimestamp.Time) < discoveryGrace {
			return fmt.Errorf("resource %s does not exist in discovery yet: %w", gr, err)
		}
		return c.fail(ctx, svm, "resource does not exist in discovery")
	}
	if svm.Status.ResourceVersion == "" {
		list, err := c.dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		svm.Status.ResourceVersion = list.GetResourceVersion()
		return c.updateStatus(ctx, svm)
	}
	checkpoint, err := strconv.ParseUint(svm.Status.ResourceVersion, 10, 64)
	if err != nil {
		return c.fail(ctx, svm, fmt.Sprintf("migration encountered unhandled error: error comparing resource versions: %v", err))
	}
	return c.migrate(ctx, svm, gvr, checkpoint)
}

// migrate patches every object not written since checkpoint.
func (c *Controller) migrate(ctx context.Context, svm *svmv1.StorageVersionMigration, gvr schema.GroupVersionResource, checkpoint uint64) error {
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return c.fail(ctx, svm, "migration encountered unhandled error: "+err.Error())
	}
	total, pending := 0, 0
	type target struct{ ns, name, rv string }
	var targets []target
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := c.dynamic.Resource(gvr).List(ctx, opts)
		if err != nil {
			return err
		}
		for _, obj := range page.Items {
			total++
			rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			if err != nil {
				return c.fail(ctx, svm, fmt.Sprintf("migration encountered unhandled error: error comparing resource versions: %v", err))
			}
			if rv > checkpoint {
				continue // written since the migration began: already current
			}
			targets = append(targets, target{obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion()})
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	pending = len(targets)
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	for _, t := range targets {
		patch, _ := json.Marshal(map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]string{"resourceVersion": t.rv},
		})
		_, err := c.dynamic.Resource(gvr).Namespace(t.ns).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Name})
		switch {
		case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err):
			// Written or gone since: either way current.
			pending--
		case retriable(err):
			c.setCondition(svm, svmv1.MigrationRunning, reasonRunning, runningMessage(pending, total, err))
			_ = c.updateStatus(ctx, svm)
			return err
		default:
			klog.FromContext(ctx).Error(err, "Failed to migrate an object", "resource", gvr, "namespace", t.ns, "name", t.name)
			c.setCondition(svm, svmv1.MigrationRunning, reasonRunning, runningMessage(pending, total, nil))
			return c.fail(ctx, svm, fmt.Sprintf("%d/%d not yet migrated. migration encountered unhandled error: %s", pending, total, err))
		}
	}
	c.setCondition(svm, svmv1.MigrationRunning, reasonRunning, runningMessage(pending, total, nil))
	c.setCondition(svm, svmv1.MigrationSucceeded, reasonSucceeded, "Migration completed")
	return c.updateStatus(ctx, svm)
}

func runningMessage(pending, total int, transient error) string {
	msg := "The migration is running"
	if total > 0 {
		if pending > 0 {
			msg += fmt.Sprintf(", %d/%d objects not yet migrated", pending, total)
		} else {
			msg += fmt.Sprintf(", %d objects verified migrated", total)
		}
	}
	if transient != nil {
		msg += "; transient error: " + transient.Error()
	}
	return msg
}

func retriable(err error) bool {
	return utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err)
}

// fail ends the migration with msg as the Failed condition's message.
func (c *Controller) fail(ctx context.Context, svm *svmv1.StorageVersionMigration, msg string) error {
	c.setCondition(svm, svmv1.MigrationFailed, reasonFailed, msg)
	return c.updateStatus(ctx, svm)
}

func (c *Controller) setCondition(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType, reason, msg string) {
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{
		Type: string(t), Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
}

func (c *Controller) updateStatus(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	_, err := c.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}
