// Package autoscaling holds the registry rules of HorizontalPodAutoscalers:
// autoscaling/v2 (the stored version) with upstream's defaults
// (minReplicas 1, a CPU 80% metric, behavior rules), validation, status
// rules and kubectl's table; and autoscaling/v1, stored as v2 through the
// lossless conversions in convert.go, which carry what v1 cannot say in
// upstream's autoscaling.alpha.kubernetes.io annotations.
package autoscaling

import (
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// DefaultCPUUtilization is the CPU target of an HPA that names no metric.
const DefaultCPUUtilization = 80

// Resources lists autoscaling/v2 and autoscaling/v1 horizontalpodautoscalers;
// v1 is stored as v2 in the same keys.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{V2Resource(), V1Resource()}
}

// V2Resource describes autoscaling/v2 horizontalpodautoscalers.
func V2Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  autoscalingv2.SchemeGroupVersion,
		Resource:      "horizontalpodautoscalers",
		Kind:          "HorizontalPodAutoscaler",
		ListKind:      "HorizontalPodAutoscalerList",
		SingularName:  "horizontalpodautoscaler",
		ShortNames:    []string{"hpa"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "horizontalpodautoscalers",
		New:           func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:       func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the autoscaling/v2 HPA strategy. Upstream keeps no
// generation for HPAs.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

func ptr[T any](v T) *T { return &v }

// Default applies upstream's autoscaling/v2 defaults.
func Default(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if hpa.Spec.MinReplicas == nil {
		hpa.Spec.MinReplicas = ptr(int32(1))
	}
	if len(hpa.Spec.Metrics) == 0 {
		hpa.Spec.Metrics = []autoscalingv2.MetricSpec{cpuMetric(DefaultCPUUtilization)}
	}
	if b := hpa.Spec.Behavior; b != nil {
		b.ScaleUp = fillRules(b.ScaleUp, scaleUpRules())
		b.ScaleDown = fillRules(b.ScaleDown, scaleDownRules())
	}
}

func cpuMetric(utilization int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(utilization)},
		},
	}
}

// scaleUpRules are upstream's default scale-up rules: no stabilization,
// the larger of 4 pods or 100% every 15 seconds.
func scaleUpRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr(int32(0)),
		SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// scaleDownRules are upstream's default scale-down rules: a 5-minute
// stabilization window, up to 100% every 15 seconds.
func scaleDownRules() *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr(int32(300)),
		SelectPolicy:               ptr(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

func fillRules(r, def *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if r == nil {
		return def
	}
	if len(r.Policies) == 0 {
		r.Policies = def.Policies
	}
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = def.StabilizationWindowSeconds
	}
	if r.SelectPolicy == nil {
		r.SelectPolicy = def.SelectPolicy
	}
	return r
}

// PrepareForCreate clears status and applies defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	Default(hpa)
}

// PrepareForUpdate keeps the status and applies defaults.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	hpa := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	hpa.Status = old.(*autoscalingv2.HorizontalPodAutoscaler).Status
	Default(hpa)
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec = old.(*autoscalingv2.HorizontalPodAutoscaler).Spec
}

// Validate checks a new HPA.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec (all of it may change).
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate checks the replica counts.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateStatus(&obj.(*autoscalingv2.HorizontalPodAutoscaler).Status, field.NewPath("status"))
}

// ValidateStatus checks currentReplicas and desiredReplicas are not
// negative.
func ValidateStatus(st *autoscalingv2.HorizontalPodAutoscalerStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if st.CurrentReplicas < 0 {
		errs = append(errs, field.Invalid(path.Child("currentReplicas"), st.CurrentReplicas, "must be greater than or equal to 0"))
	}
	if st.DesiredReplicas < 0 {
		errs = append(errs, field.Invalid(path.Child("desiredReplicas"), st.DesiredReplicas, "must be greater than or equal to 0"))
	}
	return errs
}

// ValidateSpec checks a (defaulted) v2 HPA spec with upstream's paths and
// messages.
func ValidateSpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	min := int32(1)
	if spec.MinReplicas != nil {
		min = *spec.MinReplicas
		if min < 1 {
			errs = append(errs, field.Invalid(path.Child("minReplicas"), min, "must be greater than or equal to 1"))
		}
	}
	if spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), spec.MaxReplicas, "must be greater than 0"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < min {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, validateRef(spec.ScaleTargetRef, path.Child("scaleTargetRef"))...)
	for i := range spec.Metrics {
		errs = append(errs, validateMetric(&spec.Metrics[i], path.Child("metrics").Index(i))...)
	}
	if b := spec.Behavior; b != nil {
		bp := path.Child("behavior")
		errs = append(errs, validateRules(b.ScaleUp, bp.Child("scaleUp"))...)
		errs = append(errs, validateRules(b.ScaleDown, bp.Child("scaleDown"))...)
	}
	return errs
}

func validateRef(ref autoscalingv2.CrossVersionObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), ""))
	} else if strings.ContainsAny(ref.Kind, "/%") {
		errs = append(errs, field.Invalid(path.Child("kind"), ref.Kind, `may not contain '/'`))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else if strings.ContainsAny(ref.Name, "/%") || ref.Name == "." || ref.Name == ".." {
		errs = append(errs, field.Invalid(path.Child("name"), ref.Name, `may not contain '/' or '%'`))
	}
	return errs
}

var metricTypes = []autoscalingv2.MetricSourceType{
	autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType,
	autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType,
}

func validateMetric(m *autoscalingv2.MetricSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := map[autoscalingv2.MetricSourceType]bool{
		autoscalingv2.ObjectMetricSourceType:            m.Object != nil,
		autoscalingv2.PodsMetricSourceType:              m.Pods != nil,
		autoscalingv2.ResourceMetricSourceType:          m.Resource != nil,
		autoscalingv2.ContainerResourceMetricSourceType: m.ContainerResource != nil,
		autoscalingv2.ExternalMetricSourceType:          m.External != nil,
	}
	known := false
	for _, t := range metricTypes {
		known = known || m.Type == t
	}
	switch {
	case m.Type == "":
		errs = append(errs, field.Required(path.Child("type"), "must specify a metric source type"))
	case !known:
		errs = append(errs, field.NotSupported(path.Child("type"), m.Type, metricTypes))
	case !set[m.Type]:
		errs = append(errs, field.Required(path.Child(jsonKey(m.Type)), "must populate information for the given metric source"))
	}
	n := 0
	for t, ok := range set {
		if ok {
			n++
			if t != m.Type && known {
				errs = append(errs, field.Forbidden(path.Child(jsonKey(t)), "must populate the given metric source only"))
			}
		}
	}
	if n == 0 && m.Type == "" {
		errs = append(errs, field.Required(path, "must populate information for the given metric source"))
	}
	switch {
	case m.Object != nil:
		p := path.Child("object")
		errs = append(errs, validateRef(m.Object.DescribedObject, p.Child("describedObject"))...)
		errs = append(errs, validateIdentifier(m.Object.Metric, p.Child("metric"))...)
		errs = append(errs, validateTarget(m.Object.Target, p.Child("target"))...)
		if m.Object.Target.Value == nil && m.Object.Target.AverageValue == nil {
			errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
		}
	case m.Pods != nil:
		p := path.Child("pods")
		errs = append(errs, validateIdentifier(m.Pods.Metric, p.Child("metric"))...)
		errs = append(errs, validateTarget(m.Pods.Target, p.Child("target"))...)
		if m.Pods.Target.AverageValue == nil {
			errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
		}
	case m.Resource != nil:
		p := path.Child("resource")
		errs = append(errs, validateResourceTarget(m.Resource.Name, m.Resource.Target, p)...)
	case m.ContainerResource != nil:
		p := path.Child("containerResource")
		errs = append(errs, validateResourceTarget(m.ContainerResource.Name, m.ContainerResource.Target, p)...)
		if m.ContainerResource.Container == "" {
			errs = append(errs, field.Required(p.Child("container"), "must populate container name"))
		}
	case m.External != nil:
		p := path.Child("external")
		errs = append(errs, validateIdentifier(m.External.Metric, p.Child("metric"))...)
		errs = append(errs, validateTarget(m.External.Target, p.Child("target"))...)
		if m.External.Target.Value == nil && m.External.Target.AverageValue == nil {
			errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
		}
	}
	return errs
}

func jsonKey(t autoscalingv2.MetricSourceType) string {
	switch t {
	case autoscalingv2.ContainerResourceMetricSourceType:
		return "containerResource"
	default:
		return strings.ToLower(string(t))
	}
}

func validateIdentifier(id autoscalingv2.MetricIdentifier, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if id.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "must specify a metric name"))
	}
	if id.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(id.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	}
	return errs
}

func validateResourceTarget(name corev1.ResourceName, t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), "must specify a resource name"))
	}
	errs = append(errs, validateTarget(t, path.Child("target"))...)
	tp := path.Child("target")
	switch {
	case t.AverageUtilization == nil && t.AverageValue == nil:
		errs = append(errs, field.Required(tp.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	case t.AverageUtilization != nil && t.AverageValue != nil:
		errs = append(errs, field.Forbidden(tp.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	if t.Value != nil {
		errs = append(errs, field.Forbidden(tp.Child("value"), "may not set a target value for a resource metric"))
	}
	return errs
}

var targetTypes = []autoscalingv2.MetricTargetType{
	autoscalingv2.AverageValueMetricType, autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType,
}

func validateTarget(t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	known := false
	for _, k := range targetTypes {
		known = known || t.Type == k
	}
	switch {
	case t.Type == "":
		errs = append(errs, field.Required(path.Child("type"), "must specify a metric target type"))
	case !known:
		errs = append(errs, field.NotSupported(path.Child("type"), t.Type, targetTypes))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(path.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(path.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(path.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

const (
	maxPeriodSeconds        = 1800
	maxStabilizationSeconds = 3600
)

func validateRules(r *autoscalingv2.HPAScalingRules, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(path.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
		} else if *w > maxStabilizationSeconds {
			errs = append(errs, field.Invalid(path.Child("stabilizationWindowSeconds"), *w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationSeconds)))
		}
	}
	if sp := r.SelectPolicy; sp != nil {
		valid := []autoscalingv2.ScalingPolicySelect{autoscalingv2.DisabledPolicySelect, autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}
		if *sp != valid[0] && *sp != valid[1] && *sp != valid[2] {
			errs = append(errs, field.NotSupported(path.Child("selectPolicy"), *sp, valid))
		}
	}
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(path.Child("policies"), "must specify at least one Policy"))
	}
	for i, p := range r.Policies {
		pp := path.Child("policies").Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			errs = append(errs, field.NotSupported(pp.Child("type"), p.Type,
				[]autoscalingv2.HPAScalingPolicyType{autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}))
		}
		if p.Value <= 0 {
			errs = append(errs, field.Invalid(pp.Child("value"), p.Value, "must be greater than zero"))
		}
		if p.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), p.PeriodSeconds, "must be greater than zero"))
		} else if p.PeriodSeconds > maxPeriodSeconds {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), p.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPeriodSeconds)))
		}
	}
	return errs
}

// TableColumns are kubectl's columns for HPAs.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return tableColumns()
}

func tableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Reference", Type: "string", Description: spec["scaleTargetRef"]},
		{Name: "Targets", Type: "string", Description: spec["metrics"]},
		{Name: "MinPods", Type: "string", Description: spec["minReplicas"]},
		{Name: "MaxPods", Type: "integer", Description: spec["maxReplicas"]},
		{Name: "Replicas", Type: "integer", Description: autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one HPA.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return nil, fmt.Errorf("horizontalpodautoscaler table: unexpected object %T", obj)
	}
	return tableRow(hpa), nil
}

func tableRow(hpa *autoscalingv2.HorizontalPodAutoscaler) []interface{} {
	ref := hpa.Spec.ScaleTargetRef.Kind + "/" + hpa.Spec.ScaleTargetRef.Name
	minPods := "<unset>"
	if hpa.Spec.MinReplicas != nil {
		minPods = fmt.Sprintf("%d", *hpa.Spec.MinReplicas)
	}
	return []interface{}{
		hpa.Name, ref, FormatMetrics(hpa.Spec.Metrics, hpa.Status.CurrentMetrics), minPods,
		int64(hpa.Spec.MaxReplicas), int64(hpa.Status.CurrentReplicas), registry.Age(hpa.CreationTimestamp),
	}
}

// FormatMetrics is kubectl's TARGETS cell: "current/target" for the first
// two metrics ("cpu: 20%/80%"), then "+ N more...".
func FormatMetrics(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const unknown = "<unknown>"
	var list []string
	for i, s := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		switch s.Type {
		case autoscalingv2.ExternalMetricSourceType:
			if s.External == nil {
				list = append(list, "<unknown type>")
				continue
			}
			var cur *autoscalingv2.MetricValueStatus
			if st != nil && st.External != nil {
				cur = &st.External.Current
			}
			list = append(list, valueTarget(s.External.Target, cur))
		case autoscalingv2.ObjectMetricSourceType:
			if s.Object == nil {
				list = append(list, "<unknown type>")
				continue
			}
			var cur *autoscalingv2.MetricValueStatus
			if st != nil && st.Object != nil {
				cur = &st.Object.Current
			}
			list = append(list, valueTarget(s.Object.Target, cur))
		case autoscalingv2.PodsMetricSourceType:
			if s.Pods == nil {
				list = append(list, "<unknown type>")
				continue
			}
			current := unknown
			if st != nil && st.Pods != nil && st.Pods.Current.AverageValue != nil {
				current = st.Pods.Current.AverageValue.String()
			}
			list = append(list, fmt.Sprintf("%s/%s", current, quantity(s.Pods.Target.AverageValue)))
		case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
			name, target, cur, prefix := resourceParts(s, st)
			if target.AverageValue != nil {
				current := unknown
				if cur != nil && cur.AverageValue != nil {
					current = cur.AverageValue.String()
				}
				list = append(list, fmt.Sprintf("%s%s: %s/%s", prefix, name, current, target.AverageValue.String()))
				continue
			}
			current := unknown
			if cur != nil && cur.AverageUtilization != nil {
				current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
			}
			tgt := "<auto>"
			if target.AverageUtilization != nil {
				tgt = fmt.Sprintf("%d%%", *target.AverageUtilization)
			}
			list = append(list, fmt.Sprintf("%s%s: %s/%s", prefix, name, current, tgt))
		default:
			list = append(list, "<unknown type>")
		}
	}
	const max = 2
	if len(list) > max {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:max], ", "), len(list)-max)
	}
	return strings.Join(list, ", ")
}

func resourceParts(s autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) (string, autoscalingv2.MetricTarget, *autoscalingv2.MetricValueStatus, string) {
	if s.Resource != nil {
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.Resource != nil {
			cur = &st.Resource.Current
		}
		return string(s.Resource.Name), s.Resource.Target, cur, ""
	}
	if s.ContainerResource != nil {
		var cur *autoscalingv2.MetricValueStatus
		if st != nil && st.ContainerResource != nil {
			cur = &st.ContainerResource.Current
		}
		return string(s.ContainerResource.Name), s.ContainerResource.Target, cur, s.ContainerResource.Container + "/"
	}
	return "", autoscalingv2.MetricTarget{}, nil, ""
}

func valueTarget(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := "<unknown>"
	if t.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s (avg)", current, t.AverageValue.String())
	}
	if cur != nil && cur.Value != nil {
		current = cur.Value.String()
	}
	return fmt.Sprintf("%s/%s", current, quantity(t.Value))
}

func quantity(q *resource.Quantity) string {
	if q == nil {
		return "<unset>"
	}
	return q.String()
}
