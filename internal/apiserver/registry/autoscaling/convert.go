package autoscaling

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Annotations in which autoscaling/v1 carries what it has no field for,
// as upstream does.
const (
	MetricSpecsAnnotation    = "autoscaling.alpha.kubernetes.io/metrics"
	MetricStatusesAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	ConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	BehaviorAnnotation       = "autoscaling.alpha.kubernetes.io/behavior"
)

var roundTripAnnotations = []string{MetricSpecsAnnotation, MetricStatusesAnnotation, ConditionsAnnotation, BehaviorAnnotation}

// ToV1 converts a v2 HPA to autoscaling/v1: a CPU utilization target
// becomes targetCPUUtilizationPercentage, every other metric, the current
// metrics, the conditions and the behavior go to annotations.
func ToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	out := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyPtr(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: copyPtr(in.Status.ObservedGeneration),
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	if in.APIVersion != "" || in.Kind != "" {
		out.APIVersion, out.Kind = autoscalingv1.SchemeGroupVersion.String(), "HorizontalPodAutoscaler"
	}
	var other []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil {
			out.Spec.TargetCPUUtilizationPercentage = copyPtr(m.Resource.Target.AverageUtilization)
			continue
		}
		other = append(other, metricSpecToV1(m))
	}
	current := make([]autoscalingv1.MetricStatus, 0, len(in.Status.CurrentMetrics))
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = copyPtr(m.Resource.Current.AverageUtilization)
		}
		current = append(current, metricStatusToV1(m))
	}
	set := func(key string, v interface{}) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("hpa %s: encode %s: %w", in.Name, key, err)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(b)
		return nil
	}
	if len(other) > 0 {
		if err := set(MetricSpecsAnnotation, other); err != nil {
			return nil, err
		}
	}
	if len(current) > 0 {
		if err := set(MetricStatusesAnnotation, current); err != nil {
			return nil, err
		}
	}
	if len(in.Status.Conditions) > 0 {
		conds := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(in.Status.Conditions))
		for i, c := range in.Status.Conditions {
			conds[i] = autoscalingv1.HorizontalPodAutoscalerCondition{
				Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
				ObservedGeneration: copyPtr(c.ObservedGeneration),
			}
		}
		if err := set(ConditionsAnnotation, conds); err != nil {
			return nil, err
		}
	}
	if in.Spec.Behavior != nil {
		if err := set(BehaviorAnnotation, in.Spec.Behavior); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ToV2 converts an autoscaling/v1 HPA to v2, restoring what ToV1 put in
// annotations and removing those annotations. Like upstream, the CPU
// target follows the other metrics, and an HPA with no metric at all gets
// the default CPU target.
func ToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	out := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    copyPtr(in.Spec.MinReplicas),
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: copyPtr(in.Status.ObservedGeneration),
			LastScaleTime:      in.Status.LastScaleTime.DeepCopy(),
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	if in.APIVersion != "" || in.Kind != "" {
		out.APIVersion, out.Kind = autoscalingv2.SchemeGroupVersion.String(), "HorizontalPodAutoscaler"
	}
	get := func(key string, into interface{}) (bool, error) {
		s, ok := in.Annotations[key]
		if !ok {
			return false, nil
		}
		if err := json.Unmarshal([]byte(s), into); err != nil {
			return false, fmt.Errorf("hpa %s: decode annotation %s: %w", in.Name, key, err)
		}
		return true, nil
	}
	var other []autoscalingv1.MetricSpec
	if _, err := get(MetricSpecsAnnotation, &other); err != nil {
		return nil, err
	}
	for _, m := range other {
		out.Spec.Metrics = append(out.Spec.Metrics, metricSpecToV2(m))
	}
	if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuMetric(*t))
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(DefaultCPUUtilization)}
	}
	var current []autoscalingv1.MetricStatus
	ok, err := get(MetricStatusesAnnotation, &current)
	if err != nil {
		return nil, err
	}
	if ok {
		for _, m := range current {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
		}
	} else if u := in.Status.CurrentCPUUtilizationPercentage; u != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(u)},
			},
		}}
	}
	var conds []autoscalingv1.HorizontalPodAutoscalerCondition
	if _, err := get(ConditionsAnnotation, &conds); err != nil {
		return nil, err
	}
	for _, c := range conds {
		out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			ObservedGeneration: copyPtr(c.ObservedGeneration),
		})
	}
	var behavior autoscalingv2.HorizontalPodAutoscalerBehavior
	if ok, err := get(BehaviorAnnotation, &behavior); err != nil {
		return nil, err
	} else if ok {
		out.Spec.Behavior = &behavior
	}
	for _, k := range roundTripAnnotations {
		delete(out.Annotations, k)
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out, nil
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func copyQ(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}

// valueOrZero is q, or a zero quantity for a v1 field that is not a pointer.
func valueOrZero(q *resource.Quantity) resource.Quantity {
	if q == nil {
		return resource.Quantity{}
	}
	return q.DeepCopy()
}

// nonZero is q as a pointer, nil when zero (v1 cannot tell unset from 0).
func nonZero(q resource.Quantity) *resource.Quantity {
	if q.IsZero() {
		return nil
	}
	return copyQ(&q)
}

func metricSpecToV1(m autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricSource{
			Target:       autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName:   m.Object.Metric.Name,
			Selector:     m.Object.Metric.Selector.DeepCopy(),
			TargetValue:  valueOrZero(m.Object.Target.Value),
			AverageValue: copyQ(m.Object.Target.AverageValue),
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricSource{
			MetricName:         m.Pods.Metric.Name,
			Selector:           m.Pods.Metric.Selector.DeepCopy(),
			TargetAverageValue: valueOrZero(m.Pods.Target.AverageValue),
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{
			Name:                     m.Resource.Name,
			TargetAverageUtilization: copyPtr(m.Resource.Target.AverageUtilization),
			TargetAverageValue:       copyQ(m.Resource.Target.AverageValue),
		}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{
			Name:                     m.ContainerResource.Name,
			Container:                m.ContainerResource.Container,
			TargetAverageUtilization: copyPtr(m.ContainerResource.Target.AverageUtilization),
			TargetAverageValue:       copyQ(m.ContainerResource.Target.AverageValue),
		}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricSource{
			MetricName:         m.External.Metric.Name,
			MetricSelector:     m.External.Metric.Selector.DeepCopy(),
			TargetValue:        copyQ(m.External.Target.Value),
			TargetAverageValue: copyQ(m.External.Target.AverageValue),
		}
	}
	return out
}

func metricSpecToV2(m autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	resourceTarget := func(util *int32, avg *resource.Quantity) autoscalingv2.MetricTarget {
		if avg != nil {
			return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(avg)}
		}
		return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: copyPtr(util)}
	}
	switch {
	case m.Object != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: copyQ(&m.Object.TargetValue)}
		if m.Object.AverageValue != nil {
			t = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(m.Object.AverageValue), Value: nonZero(m.Object.TargetValue)}
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector.DeepCopy()},
			Target:          t,
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector.DeepCopy()},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(&m.Pods.TargetAverageValue)},
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricSource{
			Name: m.Resource.Name, Target: resourceTarget(m.Resource.TargetAverageUtilization, m.Resource.TargetAverageValue),
		}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{
			Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Target: resourceTarget(m.ContainerResource.TargetAverageUtilization, m.ContainerResource.TargetAverageValue),
		}
	case m.External != nil:
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: copyQ(m.External.TargetAverageValue), Value: copyQ(m.External.TargetValue)}
		if m.External.TargetValue != nil && m.External.TargetAverageValue == nil {
			t.Type = autoscalingv2.ValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector.DeepCopy()},
			Target: t,
		}
	}
	return out
}

func metricStatusToV1(m autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricStatus{
			Target:       autoscalingv1.CrossVersionObjectReference(m.Object.DescribedObject),
			MetricName:   m.Object.Metric.Name,
			Selector:     m.Object.Metric.Selector.DeepCopy(),
			CurrentValue: valueOrZero(m.Object.Current.Value),
			AverageValue: copyQ(m.Object.Current.AverageValue),
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricStatus{
			MetricName:          m.Pods.Metric.Name,
			Selector:            m.Pods.Metric.Selector.DeepCopy(),
			CurrentAverageValue: valueOrZero(m.Pods.Current.AverageValue),
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricStatus{
			Name:                      m.Resource.Name,
			CurrentAverageUtilization: copyPtr(m.Resource.Current.AverageUtilization),
			CurrentAverageValue:       valueOrZero(m.Resource.Current.AverageValue),
		}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{
			Name:                      m.ContainerResource.Name,
			Container:                 m.ContainerResource.Container,
			CurrentAverageUtilization: copyPtr(m.ContainerResource.Current.AverageUtilization),
			CurrentAverageValue:       valueOrZero(m.ContainerResource.Current.AverageValue),
		}
	case m.External != nil:
		out.External = &autoscalingv1.ExternalMetricStatus{
			MetricName:          m.External.Metric.Name,
			MetricSelector:      m.External.Metric.Selector.DeepCopy(),
			CurrentValue:        valueOrZero(m.External.Current.Value),
			CurrentAverageValue: copyQ(m.External.Current.AverageValue),
		}
	}
	return out
}

func metricStatusToV2(m autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch {
	case m.Object != nil:
		out.Object = &autoscalingv2.ObjectMetricStatus{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector.DeepCopy()},
			Current:         autoscalingv2.MetricValueStatus{Value: nonZero(m.Object.CurrentValue), AverageValue: copyQ(m.Object.AverageValue)},
		}
	case m.Pods != nil:
		out.Pods = &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{AverageValue: nonZero(m.Pods.CurrentAverageValue)},
		}
	case m.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricStatus{
			Name:    m.Resource.Name,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(m.Resource.CurrentAverageUtilization), AverageValue: nonZero(m.Resource.CurrentAverageValue)},
		}
	case m.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{
			Name: m.ContainerResource.Name, Container: m.ContainerResource.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: copyPtr(m.ContainerResource.CurrentAverageUtilization), AverageValue: nonZero(m.ContainerResource.CurrentAverageValue)},
		}
	case m.External != nil:
		out.External = &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector.DeepCopy()},
			Current: autoscalingv2.MetricValueStatus{Value: nonZero(m.External.CurrentValue), AverageValue: copyQ(m.External.CurrentAverageValue)},
		}
	}
	return out
}
