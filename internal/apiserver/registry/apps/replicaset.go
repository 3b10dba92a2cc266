package apps

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// ReplicaSetResource describes apps/v1 replicasets.
func ReplicaSetResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  appsv1.SchemeGroupVersion,
		Resource:      "replicasets",
		Kind:          "ReplicaSet",
		ListKind:      "ReplicaSetList",
		SingularName:  "replicaset",
		ShortNames:    []string{"rs"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "replicasets",
		New:           func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList:       func() runtime.Object { return &appsv1.ReplicaSetList{} },
		Strategy:      ReplicaSetStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "scale": registry.ScaleSubresource()},
	}
}

// ReplicaSetStrategy is the replicasets strategy.
type ReplicaSetStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ReplicaSetStrategy{}

// DefaultReplicaSet applies upstream's apps/v1 defaults.
func DefaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		one := int32(1)
		rs.Spec.Replicas = &one
	}
	pod.DefaultPodSpec(&rs.Spec.Template.Spec)
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (ReplicaSetStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	rs := obj.(*appsv1.ReplicaSet)
	rs.Status = appsv1.ReplicaSetStatus{}
	rs.Generation = 1
	DefaultReplicaSet(rs)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (ReplicaSetStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
	rs.Status = o.Status
	DefaultReplicaSet(rs)
	rs.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(rs.Spec, o.Spec) {
		rs.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (ReplicaSetStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*appsv1.ReplicaSet).Spec = old.(*appsv1.ReplicaSet).Spec
}

// Validate checks a new replica set.
func (ReplicaSetStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateReplicaSetSpec(&obj.(*appsv1.ReplicaSet).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps the selector immutable.
func (ReplicaSetStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
	errs := ValidateReplicaSetSpec(&rs.Spec, field.NewPath("spec"))
	return append(errs, validateSelectorImmutable(rs.Spec.Selector, o.Spec.Selector)...)
}

// ValidateStatusUpdate checks the status counters.
func (ReplicaSetStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateReplicaSetStatus(&obj.(*appsv1.ReplicaSet).Status, field.NewPath("status"))
}

// FieldSet offers status.replicas to field selectors, as upstream does.
func (ReplicaSetStrategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"status.replicas": strconv.Itoa(int(obj.(*appsv1.ReplicaSet).Status.Replicas))}
}

// ValidateReplicaSetSpec checks a (defaulted) replica set spec.
func ValidateReplicaSetSpec(spec *appsv1.ReplicaSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Replicas != nil {
		errs = append(errs, validateNonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	errs = append(errs, validateNonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	sel, selErrs := validateSelector(spec.Selector, path.Child("selector"))
	errs = append(errs, selErrs...)
	errs = append(errs, validateTemplate(&spec.Template, sel, path.Child("template"))...)
	return errs
}

// ValidateReplicaSetStatus checks the counters are non-negative and
// consistent.
func ValidateReplicaSetStatus(st *appsv1.ReplicaSetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNonNegative(int64(st.Replicas), path.Child("replicas"))...)
	errs = append(errs, validateNonNegative(int64(st.FullyLabeledReplicas), path.Child("fullyLabeledReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.ReadyReplicas), path.Child("readyReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.AvailableReplicas), path.Child("availableReplicas"))...)
	errs = append(errs, validateNonNegative(st.ObservedGeneration, path.Child("observedGeneration"))...)
	if st.TerminatingReplicas != nil {
		errs = append(errs, validateNonNegative(int64(*st.TerminatingReplicas), path.Child("terminatingReplicas"))...)
	}
	if st.FullyLabeledReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("fullyLabeledReplicas"), st.FullyLabeledReplicas, msgOverReplicas))
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

// TableColumns are kubectl's columns for replicasets.
func (ReplicaSetStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]},
	}
}

// TableRow renders one replica set.
func (ReplicaSetStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	rs := obj.(*appsv1.ReplicaSet)
	desired := int32(0)
	if rs.Spec.Replicas != nil {
		desired = *rs.Spec.Replicas
	}
	containers, images := containerCells(&rs.Spec.Template.Spec)
	return []interface{}{
		rs.Name, int64(desired), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
		registry.Age(rs.CreationTimestamp), containers, images, selectorString(rs.Spec.Selector),
	}, nil
}
