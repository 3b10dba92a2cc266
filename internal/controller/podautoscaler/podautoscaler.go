// Package podautoscaler is the horizontal pod autoscaler controller, as
// upstream's: every sync period (15 s) each HorizontalPodAutoscaler reads
// its target's scale subresource, the resource metrics of the target's
// pods from metrics.k8s.io (which Skiff's API server serves itself), and
// proposes a replica count per metric; the highest proposal, stabilized
// and limited by min, max and the behavior's policies, is written to the
// scale subresource. Conditions, events and status follow upstream's
// wording. Pods and Object metrics are read from custom.metrics.k8s.io and
// External ones from external.metrics.k8s.io (custommetrics.go), which
// extension API servers serve through API aggregation.
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Upstream's defaults (kube-controller-manager flags).
const (
	Name = "horizontalpodautoscaling"
	// DefaultSyncPeriod is --horizontal-pod-autoscaler-sync-period.
	DefaultSyncPeriod = 15 * time.Second
	// DefaultDownscaleStabilization is
	// --horizontal-pod-autoscaler-downscale-stabilization.
	DefaultDownscaleStabilization = 5 * time.Minute
	// DefaultTolerance is --horizontal-pod-autoscaler-tolerance.
	DefaultTolerance = 0.1
	// DefaultCPUInitializationPeriod and DefaultInitialReadinessDelay are
	// --horizontal-pod-autoscaler-cpu-initialization-period and
	// --horizontal-pod-autoscaler-initial-readiness-delay.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	DefaultInitialReadinessDelay   = 30 * time.Second
	// DefaultWorkers is --concurrent-horizontal-pod-autoscaler-syncs.
	DefaultWorkers = 5
)

var podMetricsGVR = metricsv1beta1.SchemeGroupVersion.WithResource("pods")

// Controller is the horizontal pod autoscaler.
type Controller struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	synced    []cache.InformerSynced
	recorder  record.EventRecorder
	clock     clock.WithTicker
	queue     *worker.Queue[string]
	history   *history

	syncPeriod, downscaleWindow time.Duration
	tolerance                   float64
	calc                        calculator
	// custom and external read custom.metrics.k8s.io and
	// external.metrics.k8s.io (nil without a real connection: a metric of
	// theirs then fails); apis is the custom API's version discovery.
	custom   customclient.CustomMetricsClient
	external externalclient.ExternalMetricsClient
	apis     customclient.AvailableAPIsGetter
}

// New builds the controller (a controllercontext.InitFunc).
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Dynamic == nil {
		return nil, errors.New("horizontal pod autoscaler: needs a dynamic client for scale and metrics")
	}
	var clk clock.WithTicker = clock.RealClock{}
	if cc.Clock != nil {
		clk = cc.Clock
	}
	recorder := cc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{}
	}
	workers := cc.Options.ConcurrentSyncs[Name]
	if workers <= 0 {
		workers = DefaultWorkers
	}
	syncPeriod := DefaultSyncPeriod
	if cc.Options.HorizontalPodAutoscalerSyncPeriod > 0 {
		syncPeriod = cc.Options.HorizontalPodAutoscalerSyncPeriod
	}
	hpas := cc.Informers.Autoscaling().V2().HorizontalPodAutoscalers()
	pods := cc.Informers.Core().V1().Pods()
	c := &Controller{
		client: cc.Client, dynamic: cc.Dynamic,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cc.Client.Discovery())),
		hpaLister: hpas.Lister(), podLister: pods.Lister(),
		synced:   []cache.InformerSynced{hpas.Informer().HasSynced, pods.Informer().HasSynced},
		recorder: recorder, clock: clk, history: newHistory(),
		syncPeriod: syncPeriod, downscaleWindow: DefaultDownscaleStabilization, tolerance: DefaultTolerance,
		calc: calculator{cpuInitializationPeriod: DefaultCPUInitializationPeriod, delayOfInitialReadinessStatus: DefaultInitialReadinessDelay},
	}
	c.custom, c.apis, c.external = metricsClients(cc.Client, c.mapper)
	c.queue = worker.NewQueue("horizontalpodautoscaler", c.Sync, worker.Options[string]{Workers: workers, Clock: clk})
	if _, err := hpas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*autoscalingv2.HorizontalPodAutoscaler), cur.(*autoscalingv2.HorizontalPodAutoscaler)
			// A status write of our own needs no new look before the period.
			if o.ResourceVersion != n.ResourceVersion && !apiequality.Semantic.DeepEqual(o.Spec, n.Spec) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.history.forget(key)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("horizontal pod autoscaler: hpa handler: %w", err)
	}
	return c, nil
}

// Start runs the workers until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	if c.apis != nil {
		// upstream re-reads the custom metrics API's versions every 5 minutes
		go customclient.PeriodicallyInvalidate(c.apis, 5*time.Minute, ctx.Done())
	}
	return worker.Run(ctx, Name, c.synced, c.queue)
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// Sync reconciles one HPA and looks at it again one sync period later,
// failed or not (upstream's fixed-interval queue: errors do not back off).
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.reconcile(ctx, hpa.DeepCopy(), key); err != nil {
		klog.FromContext(ctx).V(2).Info("Horizontal pod autoscaler sync failed", "hpa", klog.KObj(hpa), "err", err)
	}
	return worker.RequeueAfter(c.syncPeriod)
}

func (c *Controller) reconcile(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string) error {
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	now := c.clock.Now()

	failScale := func(err error) error {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		return errors.Join(err, c.updateStatusIfNeeded(ctx, original, hpa))
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return failScale(err)
	}
	gvr, scale, err := c.getScale(ctx, hpa.Namespace, schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, ref.Name)
	if err != nil {
		return failScale(err)
	}
	setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := scale.Spec.Replicas
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}

	var (
		desired  int32
		reason   string
		statuses []autoscalingv2.MetricStatus
		rescale  = true
		retErr   error
	)
	switch {
	case current == 0 && minReplicas != 0:
		desired, rescale = 0, false
		setCondition(hpa, now, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	case current > hpa.Spec.MaxReplicas:
		desired, reason = hpa.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
	case current < minReplicas:
		desired, reason = minReplicas, "Current number of replicas below Spec.MinReplicas"
	default:
		proposed, metric, st, err := c.computeReplicas(ctx, hpa, scale, now)
		statuses = st
		if err != nil && proposed == -1 {
			setStatus(hpa, now, current, hpa.Status.DesiredReplicas, statuses, false)
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return errors.Join(fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err), c.updateStatusIfNeeded(ctx, original, hpa))
		}
		retErr = err
		desired = max(desired, proposed)
		if desired > current {
			reason = fmt.Sprintf("%s above target", metric)
		}
		if desired < current {
			reason = "All metrics below target"
		}
		l := c.history.normalize(hpa, key, now, c.downscaleWindow, current, desired, minReplicas)
		if l.stabilized {
			setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionTrue, l.stabilizedReason, "%s", l.stabilizedMsg)
		} else {
			setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
		}
		status := corev1.ConditionFalse
		if l.limited {
			status = corev1.ConditionTrue
		}
		setCondition(hpa, now, autoscalingv2.ScalingLimited, status, l.reason, "%s", l.message)
		desired = l.replicas
		rescale = desired != current
	}

	if rescale {
		if err := c.updateScale(ctx, gvr, hpa.Namespace, scale, desired); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err)
			setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			setStatus(hpa, now, current, hpa.Status.DesiredReplicas, statuses, false)
			return errors.Join(fmt.Errorf("failed to rescale %s: %w", reference, err), c.updateStatusIfNeeded(ctx, original, hpa))
		}
		setCondition(hpa, now, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.history.storeScale(hpa, key, now, c.downscaleWindow, current, desired)
		klog.FromContext(ctx).Info("Successfully rescaled", "hpa", klog.KObj(hpa), "currentReplicas", current, "desiredReplicas", desired, "reason", reason)
	} else {
		desired = current
	}
	setStatus(hpa, now, current, desired, statuses, rescale)
	if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
		return err
	}
	return retErr
}

// getScale reads the target's scale subresource, trying each resource the
// kind maps to; a kind unknown to the cached discovery is looked up afresh.
func (c *Controller) getScale(ctx context.Context, ns string, gk schema.GroupKind, name string) (schema.GroupVersionResource, *autoscalingv1.Scale, error) {
	mappings, err := c.mapper.RESTMappings(gk)
	if err != nil {
		c.mapper.Reset()
		if mappings, err = c.mapper.RESTMappings(gk); err != nil {
			return schema.GroupVersionResource{}, nil, fmt.Errorf("unable to determine resource for scale target reference: %w", err)
		}
	}
	var first error
	for _, m := range mappings {
		u, err := c.dynamic.Resource(m.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{}, "scale")
		if err == nil {
			scale := &autoscalingv1.Scale{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, scale); err != nil {
				return schema.GroupVersionResource{}, nil, err
			}
			return m.Resource, scale, nil
		}
		if first == nil {
			first = err
		}
	}
	return schema.GroupVersionResource{}, nil, first
}

func (c *Controller) updateScale(ctx context.Context, gvr schema.GroupVersionResource, ns string, scale *autoscalingv1.Scale, replicas int32) error {
	for attempt := 0; ; attempt++ {
		scale.Spec.Replicas = replicas
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(scale)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("autoscaling/v1")
		u.SetKind("Scale")
		_, err = c.dynamic.Resource(gvr).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}, "scale")
		if err == nil || !apierrors.IsConflict(err) || attempt >= 4 {
			return err
		}
		fresh, gerr := c.dynamic.Resource(gvr).Namespace(ns).Get(ctx, scale.Name, metav1.GetOptions{}, "scale")
		if gerr != nil {
			return err
		}
		if cerr := runtime.DefaultUnstructuredConverter.FromUnstructured(fresh.Object, scale); cerr != nil {
			return cerr
		}
	}
}

// computeReplicas is upstream's computeReplicasForMetrics: the highest
// proposal over the metrics; -1 with an error when every metric failed,
// or when some failed and the others would scale down.
func (c *Controller) computeReplicas(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	if scale.Status.Selector == "" {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", "selector is required")
		setCondition(hpa, now, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return -1, "", nil, errors.New("selector is required")
	}
	selector, err := labels.Parse(scale.Status.Selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, now, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", msg)
		return -1, "", nil, errors.New(msg)
	}
	pods, err := c.podLister.Pods(hpa.Namespace).List(selector)
	if err != nil {
		return -1, "", nil, err
	}
	statuses := make([]autoscalingv2.MetricStatus, len(hpa.Spec.Metrics))
	var (
		replicas     int32
		metric       string
		invalid      int
		firstErr     error
		firstInvalid autoscalingv2.HorizontalPodAutoscalerCondition
	)
	calc := c.calc
	calc.now = now
	tol := c.tolerances(hpa)
	var fetched []*metricsv1beta1.PodMetrics
	fetch := func() ([]*metricsv1beta1.PodMetrics, error) {
		if fetched == nil {
			m, err := c.podMetrics(ctx, hpa.Namespace, selector)
			if err != nil {
				return nil, err
			}
			fetched = m
		}
		return fetched, nil
	}
	for i, spec := range hpa.Spec.Metrics {
		proposal, name, cond, err := c.computeMetric(hpa, spec, scale, selector, pods, calc, tol, fetch, &statuses[i])
		if err != nil {
			if invalid == 0 {
				firstErr, firstInvalid = err, cond
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric = proposal, name
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%d invalid out of %d), first error is: %w", invalid, len(hpa.Spec.Metrics), firstErr)
	}
	if invalid >= len(hpa.Spec.Metrics) || (invalid > 0 && replicas < scale.Spec.Replicas) {
		setCondition(hpa, now, firstInvalid.Type, firstInvalid.Status, firstInvalid.Reason, "%s", firstInvalid.Message)
		return -1, "", statuses, firstErr
	}
	setCondition(hpa, now, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
	return replicas, metric, statuses, firstErr
}

// computeMetric proposes a count for one metric and fills its status.
func (c *Controller) computeMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, scale *autoscalingv1.Scale, selector labels.Selector, pods []*corev1.Pod, calc calculator, tol tolerances, fetch func() ([]*metricsv1beta1.PodMetrics, error), status *autoscalingv2.MetricStatus) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	current := scale.Spec.Replicas
	fail := func(reason string, err error) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
		c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
		return 0, "", autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: reason,
			Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err),
		}, err
	}
	var (
		res       corev1.ResourceName
		target    autoscalingv2.MetricTarget
		container string
		reason    = "FailedGetResourceMetric"
	)
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			return fail(reason, errors.New("invalid resource metric source: the resource is not set"))
		}
		res, target = spec.Resource.Name, spec.Resource.Target
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			return fail("FailedGetContainerResourceMetric", errors.New("invalid container resource metric source: the resource is not set"))
		}
		res, target, container, reason = spec.ContainerResource.Name, spec.ContainerResource.Target, spec.ContainerResource.Container, "FailedGetContainerResourceMetric"
	case autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType:
		var (
			r            metricResult
			err          error
			reason, what string
		)
		switch {
		case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
			reason, what = "FailedGetPodsMetric", "pods metric value"
			r, err = c.podsMetric(hpa, spec.Pods, current, selector, pods, calc, tol)
		case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
			reason, what = "FailedGetObjectMetric", "object metric value"
			r, err = c.objectMetric(hpa, spec.Object, scale, pods, tol)
		case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
			reason, what = "FailedGetExternalMetric", spec.External.Metric.Name+" external metric value"
			r, err = c.externalMetric(hpa, spec.External, scale, pods, tol)
		default:
			return fail("InvalidMetricSourceType", fmt.Errorf("invalid metric source: %s metric with no %s source", spec.Type, spec.Type))
		}
		if err != nil {
			// The condition and event carry the error; the sync's error
			// says which metric (upstream's wording).
			n, m, cond, _ := fail(reason, err)
			return n, m, cond, fmt.Errorf("failed to get %s: %w", what, err)
		}
		*status = r.status
		return r.replicas, r.name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	default:
		return fail("InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", spec.Type))
	}
	all, err := fetch()
	if err != nil {
		return fail(reason, fmt.Errorf("failed to get %s utilization: unable to get metrics for resource %s: %w", res, res, err))
	}
	metrics, err := usageOf(all, res, container)
	if err != nil {
		return fail(reason, fmt.Errorf("failed to get %s utilization: %w", res, err))
	}
	var value autoscalingv2.MetricValueStatus
	var proposal int32
	var name string
	switch {
	case target.AverageValue != nil:
		p, raw, err := calc.valueReplicas(current, target.AverageValue.MilliValue(), metrics, pods, res, tol)
		if err != nil {
			return fail(reason, fmt.Errorf("failed to get %s usage: %w", res, err))
		}
		q := quantity(res, raw)
		proposal, name, value = p, fmt.Sprintf("%s resource", res), autoscalingv2.MetricValueStatus{AverageValue: &q}
	case target.AverageUtilization != nil:
		p, utilization, raw, err := calc.utilizationReplicas(current, *target.AverageUtilization, metrics, pods, res, container, tol)
		if err != nil {
			return fail(reason, fmt.Errorf("failed to get %s utilization: %w", res, err))
		}
		q := quantity(res, raw)
		name = fmt.Sprintf("%s resource utilization (percentage of request)", res)
		if container != "" {
			name = fmt.Sprintf("%s container resource utilization (percentage of request)", res)
		}
		proposal, value = p, autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: &q}
	default:
		return fail(reason, errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set"))
	}
	if container != "" {
		*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: res, Container: container, Current: value}}
	} else {
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: res, Current: value}}
	}
	return proposal, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

// podMetrics lists the PodMetrics of the selected pods from metrics.k8s.io.
func (c *Controller) podMetrics(ctx context.Context, ns string, selector labels.Selector) ([]*metricsv1beta1.PodMetrics, error) {
	list, err := c.dynamic.Resource(podMetricsGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	out := make([]*metricsv1beta1.PodMetrics, 0, len(list.Items))
	for _, item := range list.Items {
		pm := &metricsv1beta1.PodMetrics{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, pm); err != nil {
			return nil, err
		}
		out = append(out, pm)
	}
	return out, nil
}

// usageOf is each pod's usage of res in milli-units: the sum over its
// containers, or the named container's. A pod with a container lacking the
// resource is left out (it counts as missing), as upstream does.
func usageOf(list []*metricsv1beta1.PodMetrics, res corev1.ResourceName, container string) (podMetrics, error) {
	if len(list) == 0 {
		return nil, errors.New("no metrics returned from resource metrics API")
	}
	out := podMetrics{}
	for _, pm := range list {
		var sum int64
		found, missing := false, false
		for _, ctr := range pm.Containers {
			if container != "" && ctr.Name != container {
				continue
			}
			q, ok := ctr.Usage[res]
			if !ok {
				missing = true
				break
			}
			sum += q.MilliValue()
			found = true
		}
		if missing || !found {
			continue
		}
		out[pm.Name] = podMetric{Value: sum, Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration}
	}
	return out, nil
}

func quantity(res corev1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if res == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

func (c *Controller) tolerances(hpa *autoscalingv2.HorizontalPodAutoscaler) tolerances {
	t := tolerances{c.tolerance, c.tolerance}
	if b := hpa.Spec.Behavior; b != nil {
		if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
			t.scaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
		}
		if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
			t.scaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
		}
	}
	return t
}

// setStatus rewrites the status as upstream's setStatus does.
func setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool) {
	gen := hpa.Generation
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		LastScaleTime:      hpa.Status.LastScaleTime,
		CurrentMetrics:     metrics,
		Conditions:         hpa.Status.Conditions,
		ObservedGeneration: &gen,
	}
	if rescaled {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

func (c *Controller) updateStatusIfNeeded(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// setCondition sets a condition, keeping its transition time unless the
// status changed.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time, t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for i := range hpa.Status.Conditions {
		c := &hpa.Status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
}
