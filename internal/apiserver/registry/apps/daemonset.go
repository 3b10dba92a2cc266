package apps

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// DaemonSetResource describes apps/v1 daemonsets.
func DaemonSetResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  appsv1.SchemeGroupVersion,
		Resource:      "daemonsets",
		Kind:          "DaemonSet",
		ListKind:      "DaemonSetList",
		SingularName:  "daemonset",
		ShortNames:    []string{"ds"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "daemonsets",
		New:           func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList:       func() runtime.Object { return &appsv1.DaemonSetList{} },
		Strategy:      DaemonSetStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// DaemonSetStrategy is the daemonsets strategy.
type DaemonSetStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = DaemonSetStrategy{}

// DefaultDaemonSet applies upstream's apps/v1 defaults: a RollingUpdate
// strategy with maxUnavailable 1 and maxSurge 0, a revision history of 10
// and the pod template's defaults.
func DefaultDaemonSet(ds *appsv1.DaemonSet) {
	st := &ds.Spec.UpdateStrategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if st.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromInt32(1)
			st.RollingUpdate.MaxUnavailable = &v
		}
		if st.RollingUpdate.MaxSurge == nil {
			v := intstr.FromInt32(0)
			st.RollingUpdate.MaxSurge = &v
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		v := int32(10)
		ds.Spec.RevisionHistoryLimit = &v
	}
	pod.DefaultPodSpec(&ds.Spec.Template.Spec)
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (DaemonSetStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	ds := obj.(*appsv1.DaemonSet)
	ds.Status = appsv1.DaemonSetStatus{}
	ds.Generation = 1
	if templateGeneration(ds) < 1 {
		setTemplateGeneration(ds, 1)
	}
	DefaultDaemonSet(ds)
}

// templateGenerationAnnotation is apps/v1's form of the internal
// spec.templateGeneration: 1 on create, one more on every template change.
// The DaemonSet controller labels its pods with it (pod-template-generation).
const templateGenerationAnnotation = "deprecated.daemonset.template.generation"

func templateGeneration(ds *appsv1.DaemonSet) int64 {
	v, err := strconv.ParseInt(ds.Annotations[templateGenerationAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

func setTemplateGeneration(ds *appsv1.DaemonSet, gen int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[templateGenerationAnnotation] = strconv.FormatInt(gen, 10)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (DaemonSetStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
	ds.Status = o.Status
	DefaultDaemonSet(ds)
	ds.Generation = o.Generation
	// The template generation is the server's: kept from the stored object
	// and bumped with the template, as upstream does.
	gen := templateGeneration(o)
	if !apiequality.Semantic.DeepEqual(ds.Spec.Template, o.Spec.Template) {
		gen++
	}
	if gen > 0 {
		setTemplateGeneration(ds, gen)
	}
	if !apiequality.Semantic.DeepEqual(ds.Spec, o.Spec) {
		ds.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (DaemonSetStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*appsv1.DaemonSet).Spec = old.(*appsv1.DaemonSet).Spec
}

// Validate checks a new daemon set.
func (DaemonSetStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateDaemonSetSpec(&obj.(*appsv1.DaemonSet).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps the selector immutable.
func (DaemonSetStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
	errs := ValidateDaemonSetSpec(&ds.Spec, field.NewPath("spec"))
	return append(errs, validateSelectorImmutable(ds.Spec.Selector, o.Spec.Selector)...)
}

// ValidateStatusUpdate checks the status counters.
func (DaemonSetStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateDaemonSetStatus(&obj.(*appsv1.DaemonSet).Status, field.NewPath("status"))
}

// ValidateDaemonSetSpec checks a (defaulted) daemon set spec.
func ValidateDaemonSetSpec(spec *appsv1.DaemonSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	sel, selErrs := validateWorkloadSelector(spec.Selector, "daemonset", path.Child("selector"))
	errs = append(errs, selErrs...)
	errs = append(errs, validateWorkloadTemplate(&spec.Template, sel, "DaemonSet", path.Child("template"))...)
	errs = append(errs, validateNonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonNegative(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	errs = append(errs, validateDaemonSetUpdateStrategy(&spec.UpdateStrategy, path.Child("updateStrategy"))...)
	return errs
}

func validateDaemonSetUpdateStrategy(st *appsv1.DaemonSetUpdateStrategy, path *field.Path) field.ErrorList {
	switch st.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ru := st.RollingUpdate
		ruPath := path.Child("rollingUpdate")
		if ru == nil {
			return field.ErrorList{field.Required(ruPath, "")}
		}
		var errs field.ErrorList
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
		errs = append(errs, validateNotOver100Percent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
		errs = append(errs, validateNotOver100Percent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
		hasUnavailable := intOrPercentValue(ru.MaxUnavailable) != 0
		hasSurge := intOrPercentValue(ru.MaxSurge) != 0
		switch {
		case hasUnavailable && hasSurge:
			errs = append(errs, field.Invalid(ruPath.Child("maxSurge"), ru.MaxSurge.String(), "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			errs = append(errs, field.Required(ruPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
		return errs
	default:
		return field.ErrorList{field.NotSupported(path, st,
			[]string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
	}
}

// ValidateDaemonSetStatus checks the counters are non-negative.
func ValidateDaemonSetStatus(st *appsv1.DaemonSetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"currentNumberScheduled", int64(st.CurrentNumberScheduled)},
		{"numberMisscheduled", int64(st.NumberMisscheduled)},
		{"desiredNumberScheduled", int64(st.DesiredNumberScheduled)},
		{"numberReady", int64(st.NumberReady)},
		{"observedGeneration", st.ObservedGeneration},
		{"updatedNumberScheduled", int64(st.UpdatedNumberScheduled)},
		{"numberAvailable", int64(st.NumberAvailable)},
		{"numberUnavailable", int64(st.NumberUnavailable)},
	} {
		errs = append(errs, validateNonNegative(c.v, path.Child(c.name))...)
	}
	if st.CollisionCount != nil {
		errs = append(errs, validateNonNegative(int64(*st.CollisionCount), path.Child("collisionCount"))...)
	}
	return errs
}

// TableColumns are kubectl's columns for daemonsets.
func (DaemonSetStrategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Desired", Type: "integer", Description: status["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: status["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: status["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: status["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: status["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: "The node selector of the pod template."},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
	}
}

// TableRow renders one daemon set.
func (DaemonSetStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return nil, fmt.Errorf("daemonset table: unexpected object %T", obj)
	}
	containers, images := containerCells(&ds.Spec.Template.Spec)
	return []interface{}{
		ds.Name,
		int64(ds.Status.DesiredNumberScheduled),
		int64(ds.Status.CurrentNumberScheduled),
		int64(ds.Status.NumberReady),
		int64(ds.Status.UpdatedNumberScheduled),
		int64(ds.Status.NumberAvailable),
		labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		registry.Age(ds.CreationTimestamp),
		containers, images, selectorString(ds.Spec.Selector),
	}, nil
}
