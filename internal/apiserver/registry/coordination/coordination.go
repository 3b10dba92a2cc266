// Package coordination holds the rules of coordination.k8s.io/v1 leases:
// validation of the spec and kubectl's table (NAME HOLDER AGE).
package coordination

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the coordination.k8s.io/v1 resources: leases.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes coordination.k8s.io/v1 leases.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  coordinationv1.SchemeGroupVersion,
		Resource:      "leases",
		Kind:          "Lease",
		ListKind:      "LeaseList",
		SingularName:  "lease",
		Namespaced:    true,
		StoragePrefix: "leases",
		New:           func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:       func() runtime.Object { return &coordinationv1.LeaseList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the leases strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Validate checks a new lease.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks an updated lease.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

var supportedStrategies = []string{string(coordinationv1.OldestEmulationVersion)}

// ValidateSpec checks durations and transitions are not negative and that
// preferredHolder comes with a strategy.
func ValidateSpec(spec *coordinationv1.LeaseSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil && *spec.Strategy != coordinationv1.OldestEmulationVersion {
		errs = append(errs, field.NotSupported(path.Child("strategy"), *spec.Strategy, supportedStrategies))
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// TableColumns are kubectl's columns for leases.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one lease.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	l := obj.(*coordinationv1.Lease)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []interface{}{l.Name, holder, registry.Age(l.CreationTimestamp)}, nil
}
