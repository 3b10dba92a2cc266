package storagek8s

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// maxVolumeAttributesParameters is the most parameters a
// VolumeAttributesClass may have, as upstream.
const maxVolumeAttributesParameters = 512

// VolumeAttributesClassResource describes storage.k8s.io/v1
// volumeattributesclasses: a driver name and the parameters a CSI driver
// applies to a volume, both immutable.
func VolumeAttributesClassResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        storagev1.SchemeGroupVersion,
		Resource:            "volumeattributesclasses",
		Kind:                "VolumeAttributesClass",
		ListKind:            "VolumeAttributesClassList",
		SingularName:        "volumeattributesclass",
		ShortNames:          []string{"vac"},
		StoragePrefix:       "volumeattributesclasses",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
		NewList:             func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
		Strategy:            VolumeAttributesClassStrategy{},
	}
}

// VolumeAttributesClassStrategy is the volumeattributesclasses strategy.
type VolumeAttributesClassStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = VolumeAttributesClassStrategy{}

// Validate checks a new class: driverName is required and a qualified
// name (lower-cased), parameters hold at least one pair, at most 512 and
// 256 KiB in all, with no empty key.
func (VolumeAttributesClassStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateVolumeAttributesClass(obj.(*storagev1.VolumeAttributesClass))
}

func validateVolumeAttributesClass(vac *storagev1.VolumeAttributesClass) field.ErrorList {
	errs := validateProvisioner(vac.DriverName, field.NewPath("driverName"))
	path := field.NewPath("parameters")
	switch {
	case len(vac.Parameters) > maxVolumeAttributesParameters:
		return append(errs, field.TooLong(path, "", maxVolumeAttributesParameters))
	case len(vac.Parameters) == 0:
		errs = append(errs, field.Required(path, "must contain at least one key/value pair"))
	}
	return append(errs, validateParameters(vac.Parameters, path)...)
}

// ValidateUpdate forbids changing driverName or parameters.
func (VolumeAttributesClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	vac, prev := obj.(*storagev1.VolumeAttributesClass), old.(*storagev1.VolumeAttributesClass)
	var errs field.ErrorList
	if vac.DriverName != prev.DriverName {
		errs = append(errs, field.Forbidden(field.NewPath("driverName"), "updates to driverName are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(vac.Parameters, prev.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	return append(errs, validateVolumeAttributesClass(vac)...)
}

// TableColumns are kubectl's: NAME DRIVERNAME AGE.
func (VolumeAttributesClassStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "DriverName", Type: "string", Description: storagev1.VolumeAttributesClass{}.SwaggerDoc()["driverName"]},
		ageColumn(),
	}
}

// TableRow renders one class.
func (VolumeAttributesClassStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	vac, ok := obj.(*storagev1.VolumeAttributesClass)
	if !ok {
		return nil, fmt.Errorf("volumeattributesclass table: unexpected object %T", obj)
	}
	return []interface{}{vac.Name, vac.DriverName, registry.Age(vac.CreationTimestamp)}, nil
}
