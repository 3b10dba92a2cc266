package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// DeploymentResource describes apps/v1 deployments.
func DeploymentResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  appsv1.SchemeGroupVersion,
		Resource:      "deployments",
		Kind:          "Deployment",
		ListKind:      "DeploymentList",
		SingularName:  "deployment",
		ShortNames:    []string{"deploy"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "deployments",
		New:           func() runtime.Object { return &appsv1.Deployment{} },
		NewList:       func() runtime.Object { return &appsv1.DeploymentList{} },
		Strategy:      DeploymentStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "scale": registry.ScaleSubresource()},
	}
}

// Resources lists the apps/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{
		DeploymentResource(), ReplicaSetResource(), DaemonSetResource(),
		StatefulSetResource(), ControllerRevisionResource(),
	}
}

// DeploymentStrategy is the deployments strategy.
type DeploymentStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = DeploymentStrategy{}

// DefaultDeployment applies upstream's apps/v1 defaults.
func DefaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		one := int32(1)
		d.Spec.Replicas = &one
	}
	st := &d.Spec.Strategy
	if st.Type == "" {
		st.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if st.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if st.RollingUpdate == nil {
			st.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if st.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			st.RollingUpdate.MaxUnavailable = &v
		}
		if st.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			st.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		v := int32(10)
		d.Spec.RevisionHistoryLimit = &v
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		v := int32(600)
		d.Spec.ProgressDeadlineSeconds = &v
	}
	pod.DefaultPodSpec(&d.Spec.Template.Spec)
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (DeploymentStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	d := obj.(*appsv1.Deployment)
	d.Status = appsv1.DeploymentStatus{}
	d.Generation = 1
	DefaultDeployment(d)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec or the annotations changed (annotations are copied to the
// replica sets, so the controller must see them).
func (DeploymentStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
	d.Status = o.Status
	DefaultDeployment(d)
	d.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(d.Spec, o.Spec) || !apiequality.Semantic.DeepEqual(d.Annotations, o.Annotations) {
		d.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec and labels.
func (DeploymentStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
	d.Spec = o.Spec
	d.Labels = o.Labels
}

// Validate checks a new deployment.
func (DeploymentStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateDeploymentSpec(&obj.(*appsv1.Deployment).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps the selector immutable.
func (DeploymentStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	d, o := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
	errs := ValidateDeploymentSpec(&d.Spec, field.NewPath("spec"))
	return append(errs, validateSelectorImmutable(d.Spec.Selector, o.Spec.Selector)...)
}

// ValidateStatusUpdate checks the status counters.
func (DeploymentStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateDeploymentStatus(&obj.(*appsv1.Deployment).Status, field.NewPath("status"))
}

// ValidateDeploymentSpec checks a (defaulted) deployment spec.
func ValidateDeploymentSpec(spec *appsv1.DeploymentSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Replicas != nil {
		errs = append(errs, validateNonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	sel, selErrs := validateSelector(spec.Selector, path.Child("selector"))
	errs = append(errs, selErrs...)
	errs = append(errs, validateTemplate(&spec.Template, sel, path.Child("template"))...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, path.Child("strategy"))...)
	errs = append(errs, validateNonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonNegative(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	if spec.ProgressDeadlineSeconds != nil {
		p := *spec.ProgressDeadlineSeconds
		errs = append(errs, validateNonNegative(int64(p), path.Child("progressDeadlineSeconds"))...)
		if p <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(path.Child("progressDeadlineSeconds"), p, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentStrategy(st *appsv1.DeploymentStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch st.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if st.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(path.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", appsv1.RecreateDeploymentStrategyType)))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		ru := st.RollingUpdate
		ruPath := path.Child("rollingUpdate")
		if ru == nil {
			errs = append(errs, field.Required(ruPath, "this should be defaulted and never be nil"))
			break
		}
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, ruPath.Child("maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, ruPath.Child("maxSurge"))...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
		}
		if ru.MaxUnavailable != nil && ru.MaxUnavailable.Type == intstr.String && intOrPercentValue(ru.MaxUnavailable) > 100 {
			errs = append(errs, field.Invalid(ruPath.Child("maxUnavailable"), ru.MaxUnavailable.StrVal, "must not be greater than 100%"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), st.Type,
			[]string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

// ValidateDeploymentStatus checks the counters are non-negative and
// consistent.
func ValidateDeploymentStatus(st *appsv1.DeploymentStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNonNegative(st.ObservedGeneration, path.Child("observedGeneration"))...)
	errs = append(errs, validateNonNegative(int64(st.Replicas), path.Child("replicas"))...)
	errs = append(errs, validateNonNegative(int64(st.UpdatedReplicas), path.Child("updatedReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.ReadyReplicas), path.Child("readyReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.AvailableReplicas), path.Child("availableReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.UnavailableReplicas), path.Child("unavailableReplicas"))...)
	if st.TerminatingReplicas != nil {
		errs = append(errs, validateNonNegative(int64(*st.TerminatingReplicas), path.Child("terminatingReplicas"))...)
	}
	if st.CollisionCount != nil {
		errs = append(errs, validateNonNegative(int64(*st.CollisionCount), path.Child("collisionCount"))...)
	}
	if st.UpdatedReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("updatedReplicas"), st.UpdatedReplicas, msgOverReplicas))
	}
	if st.ReadyReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("readyReplicas"), st.ReadyReplicas, msgOverReplicas))
	}
	if st.AvailableReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), st.AvailableReplicas, msgOverReplicas))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

// TableColumns are kubectl's columns for deployments.
func (DeploymentStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
		{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
	}
}

// TableRow renders one deployment.
func (DeploymentStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	d := obj.(*appsv1.Deployment)
	desired := int32(0)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	containers, images := containerCells(&d.Spec.Template.Spec)
	return []interface{}{
		d.Name,
		fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired),
		int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas),
		registry.Age(d.CreationTimestamp),
		containers, images, selectorString(d.Spec.Selector),
	}, nil
}
