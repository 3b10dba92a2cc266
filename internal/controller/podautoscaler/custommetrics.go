package podautoscaler

import (
	"errors"
	"fmt"
	"math"
	"net/url"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
)

// Custom (custom.metrics.k8s.io) and external (external.metrics.k8s.io)
// metrics are read with k8s.io/metrics' clients through the API server,
// which proxies them to the extension server its APIService names (API
// aggregation). The clients reuse the controller's own connection and
// identity.

// metricsClients builds the custom and external metrics clients on the
// connection of client; nil when it has none (fake clients in tests).
func metricsClients(client kubernetes.Interface, mapper meta.RESTMapper) (customclient.CustomMetricsClient, customclient.AvailableAPIsGetter, externalclient.ExternalMetricsClient) {
	rc, ok := client.Discovery().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil, nil, nil
	}
	base := rc.Get().URL()
	// The transport carries the controller's credentials; the rate limit
	// is the controller manager's default (DefaultQPS/DefaultBurst).
	cfg := &rest.Config{Host: (&url.URL{Scheme: base.Scheme, Host: base.Host}).String(), Transport: rc.Client.Transport,
		QPS: 100, Burst: 200, UserAgent: "skiff-controller-manager/" + Name}
	if rc.Client.Transport == nil {
		return nil, nil, nil
	}
	ext, err := externalclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil
	}
	apis := customclient.NewAvailableAPIsGetter(client.Discovery())
	return customclient.NewForConfig(cfg, mapper, apis), apis, ext
}

// metricResult is one metric's proposal.
type metricResult struct {
	replicas int32
	name     string
	status   autoscalingv2.MetricStatus
}

// podsMetric is upstream's computeStatusForPodsMetric: the pods' average
// of the metric against the target average value, the pods weighed as
// for a plain (non-CPU) resource.
func (c *Controller) podsMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, spec *autoscalingv2.PodsMetricSource, current int32, selector labels.Selector, pods []*corev1.Pod, calc calculator, tol tolerances) (metricResult, error) {
	metricSelector, err := metav1.LabelSelectorAsSelector(spec.Metric.Selector)
	if err != nil {
		return metricResult{}, err
	}
	if c.custom == nil {
		return metricResult{}, fmt.Errorf("unable to get metric %s: no custom metrics client", spec.Metric.Name)
	}
	list, err := c.custom.NamespacedMetrics(hpa.Namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, spec.Metric.Name, metricSelector)
	if err != nil {
		return metricResult{}, fmt.Errorf("unable to get metric %s: unable to fetch metrics from custom metrics API: %w", spec.Metric.Name, err)
	}
	if len(list.Items) == 0 {
		return metricResult{}, fmt.Errorf("unable to get metric %s: no metrics returned from custom metrics API", spec.Metric.Name)
	}
	metrics := podMetrics{}
	for _, m := range list.Items {
		metrics[m.DescribedObject.Name] = podMetric{Value: m.Value.MilliValue(), Timestamp: m.Timestamp.Time}
	}
	if spec.Target.AverageValue == nil {
		return metricResult{}, errors.New("invalid pods metric source: no average value target was set")
	}
	replicas, usage, err := calc.valueReplicas(current, spec.Target.AverageValue.MilliValue(), metrics, pods, "", tol)
	if err != nil {
		return metricResult{}, err
	}
	return metricResult{replicas: replicas, name: fmt.Sprintf("pods metric %s", spec.Metric.Name), status: autoscalingv2.MetricStatus{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricStatus{Metric: spec.Metric, Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)}},
	}}, nil
}

// objectMetric is upstream's computeStatusForObjectMetric: a Value target
// scales the ready pods by usage/target; an AverageValue target divides
// the usage by the target (per pod of the scale's status).
func (c *Controller) objectMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, spec *autoscalingv2.ObjectMetricSource, scale *autoscalingv1.Scale, pods []*corev1.Pod, tol tolerances) (metricResult, error) {
	metricSelector, err := metav1.LabelSelectorAsSelector(spec.Metric.Selector)
	if err != nil {
		return metricResult{}, err
	}
	ref := spec.DescribedObject
	get := func() (int64, error) {
		if c.custom == nil {
			return 0, errors.New("no custom metrics client")
		}
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		var (
			v   interface{ MilliValue() int64 }
			err error
		)
		if gvk.Kind == "Namespace" && gvk.Group == "" {
			m, e := c.custom.RootScopedMetrics().GetForObject(gvk.GroupKind(), hpa.Namespace, spec.Metric.Name, metricSelector)
			if e == nil {
				v = &m.Value
			}
			err = e
		} else {
			m, e := c.custom.NamespacedMetrics(hpa.Namespace).GetForObject(gvk.GroupKind(), ref.Name, spec.Metric.Name, metricSelector)
			if e == nil {
				v = &m.Value
			}
			err = e
		}
		if err != nil {
			return 0, fmt.Errorf("unable to get metric %s on %s %s/%s: unable to fetch metrics from custom metrics API: %w", spec.Metric.Name, ref.Kind, hpa.Namespace, ref.Name, err)
		}
		return v.MilliValue(), nil
	}
	status := autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricStatus{DescribedObject: ref, Metric: spec.Metric}}
	switch {
	case spec.Target.Type == autoscalingv2.ValueMetricType && spec.Target.Value != nil:
		usage, err := get()
		if err != nil {
			return metricResult{}, err
		}
		replicas, err := usageRatioReplicas(scale.Spec.Replicas, float64(usage)/float64(spec.Target.Value.MilliValue()), tol, pods)
		if err != nil {
			return metricResult{}, err
		}
		status.Object.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
		return metricResult{replicas, fmt.Sprintf("%s metric %s", ref.Kind, spec.Metric.Name), status}, nil
	case spec.Target.Type == autoscalingv2.AverageValueMetricType && spec.Target.AverageValue != nil:
		usage, err := get()
		if err != nil {
			return metricResult{}, fmt.Errorf("failed to get %s object metric: %w", spec.Metric.Name, err)
		}
		replicas, avg := perPodReplicas(scale.Status.Replicas, usage, spec.Target.AverageValue.MilliValue(), tol)
		status.Object.Current.AverageValue = resource.NewMilliQuantity(avg, resource.DecimalSI)
		// upstream names this proposal "external metric ..." too
		return metricResult{replicas, fmt.Sprintf("external metric %s(%+v)", spec.Metric.Name, spec.Metric.Selector), status}, nil
	}
	return metricResult{}, errors.New("invalid object metric source: neither a value target nor an average value target was set")
}

// externalMetric is upstream's computeStatusForExternalMetric: the sum
// of the series the selector picks, against a per-pod average (over the
// scale's status replicas) or a total value (scaling the ready pods).
func (c *Controller) externalMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, spec *autoscalingv2.ExternalMetricSource, scale *autoscalingv1.Scale, pods []*corev1.Pod, tol tolerances) (metricResult, error) {
	metricSelector, err := metav1.LabelSelectorAsSelector(spec.Metric.Selector)
	if err != nil {
		return metricResult{}, err
	}
	sum := func() (int64, error) {
		if c.external == nil {
			return 0, fmt.Errorf("unable to get external metric %s/%s/%+v: no external metrics client", hpa.Namespace, spec.Metric.Name, metricSelector)
		}
		list, err := c.external.NamespacedMetrics(hpa.Namespace).List(spec.Metric.Name, metricSelector)
		if err != nil {
			return 0, fmt.Errorf("unable to get external metric %s/%s/%+v: unable to fetch metrics from external metrics API: %s", hpa.Namespace, spec.Metric.Name, metricSelector, err)
		}
		if len(list.Items) == 0 {
			return 0, fmt.Errorf("unable to get external metric %s/%s/%+v: no metrics returned from external metrics API", hpa.Namespace, spec.Metric.Name, metricSelector)
		}
		var total int64
		for _, m := range list.Items {
			total += m.Value.MilliValue()
		}
		return total, nil
	}
	name := fmt.Sprintf("external metric %s(%+v)", spec.Metric.Name, spec.Metric.Selector)
	status := autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{Metric: spec.Metric}}
	switch {
	case spec.Target.AverageValue != nil:
		usage, err := sum()
		if err != nil {
			return metricResult{}, fmt.Errorf("failed to get %s external metric: %w", spec.Metric.Name, err)
		}
		replicas, avg := perPodReplicas(scale.Status.Replicas, usage, spec.Target.AverageValue.MilliValue(), tol)
		status.External.Current.AverageValue = resource.NewMilliQuantity(avg, resource.DecimalSI)
		return metricResult{replicas, name, status}, nil
	case spec.Target.Value != nil:
		usage, err := sum()
		if err == nil {
			var replicas int32
			replicas, err = usageRatioReplicas(scale.Spec.Replicas, float64(usage)/float64(spec.Target.Value.MilliValue()), tol, pods)
			if err == nil {
				status.External.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
				return metricResult{replicas, name, status}, nil
			}
		}
		return metricResult{}, fmt.Errorf("failed to get external metric %s: %w", spec.Metric.Name, err)
	}
	return metricResult{}, errors.New("invalid external metric source: neither a value target nor an average value target was set")
}

// perPodReplicas is upstream's per-pod arithmetic for Object and External
// AverageValue targets: the total over the target is the count, unless
// the ratio to the current pods is within tolerance; the average is the
// total over the status replicas, rounded up.
func perPodReplicas(statusReplicas int32, usage, target int64, tol tolerances) (int32, int64) {
	replicas := statusReplicas
	ratio := float64(usage) / (float64(target) * float64(statusReplicas))
	if !tol.within(ratio) {
		replicas = int32(math.Ceil(float64(usage) / float64(target)))
	}
	return replicas, int64(math.Ceil(float64(usage) / float64(statusReplicas)))
}

// usageRatioReplicas is upstream's getUsageRatioReplicaCount: the ready
// pods (Running and Ready) times the ratio, unless within tolerance; from
// zero replicas, the ratio rounded up.
func usageRatioReplicas(current int32, ratio float64, tol tolerances, pods []*corev1.Pod) (int32, error) {
	if current == 0 {
		return int32(math.Ceil(ratio)), nil
	}
	if tol.within(ratio) {
		return current, nil
	}
	if len(pods) == 0 {
		return 0, fmt.Errorf("unable to calculate ready pods: %s", errNoPods)
	}
	ready := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready++
		}
	}
	n := ratio * float64(ready)
	if n > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return int32(math.Ceil(n)), nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
