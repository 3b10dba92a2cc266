package storagek8s

import (
	"context"

	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// CSIStorageCapacityResource describes storage.k8s.io/v1
// csistoragecapacities.
func CSIStorageCapacityResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  storagev1.SchemeGroupVersion,
		Resource:      "csistoragecapacities",
		Kind:          "CSIStorageCapacity",
		ListKind:      "CSIStorageCapacityList",
		SingularName:  "csistoragecapacity",
		Namespaced:    true,
		StoragePrefix: "csistoragecapacities",
		New:           func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
		NewList:       func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		Strategy:      CSIStorageCapacityStrategy{},
	}
}

// CSIStorageCapacityStrategy is the csistoragecapacities strategy.
type CSIStorageCapacityStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = CSIStorageCapacityStrategy{}

// Validate checks a new capacity object.
func (CSIStorageCapacityStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCSIStorageCapacity(obj.(*storagev1.CSIStorageCapacity))
}

// ValidateUpdate keeps nodeTopology and storageClassName immutable.
func (CSIStorageCapacityStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*storagev1.CSIStorageCapacity), old.(*storagev1.CSIStorageCapacity)
	errs := ValidateCSIStorageCapacity(c)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(c.NodeTopology, o.NodeTopology, field.NewPath("nodeTopology"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(c.StorageClassName, o.StorageClassName, field.NewPath("storageClassName"))...)
	return errs
}

// ValidateCSIStorageCapacity checks the topology selector, the class name
// and that quantities are not negative.
func ValidateCSIStorageCapacity(c *storagev1.CSIStorageCapacity) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(c.NodeTopology, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("nodeTopology"))
	if c.StorageClassName == "" {
		errs = append(errs, field.Required(field.NewPath("storageClassName"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(c.StorageClassName) {
			errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, msg))
		}
	}
	if c.Capacity != nil && c.Capacity.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
	}
	if c.MaximumVolumeSize != nil && c.MaximumVolumeSize.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maximumVolumeSize"), c.MaximumVolumeSize.String(), "must be greater than or equal to 0"))
	}
	return errs
}

// TableColumns are kubectl's columns for capacities (no AGE upstream).
func (CSIStorageCapacityStrategy) TableColumns() []metav1.TableColumnDefinition {
	doc := storagev1.CSIStorageCapacity{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "StorageClassName", Type: "string", Description: doc["storageClassName"]},
		{Name: "Capacity", Type: "string", Description: doc["capacity"]},
	}
}

// TableRow renders one capacity object.
func (CSIStorageCapacityStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	c := obj.(*storagev1.CSIStorageCapacity)
	capacity := "<unset>"
	if c.Capacity != nil {
		capacity = c.Capacity.String()
	}
	return []interface{}{c.Name, c.StorageClassName, capacity}, nil
}
