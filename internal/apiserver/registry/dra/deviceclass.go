package dra

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// DeviceClassResource describes resource.k8s.io/v1 deviceclasses: the
// selectors and configuration a claim's request refers to by name.
func DeviceClassResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        groupVersion,
		Resource:            "deviceclasses",
		Kind:                "DeviceClass",
		ListKind:            "DeviceClassList",
		SingularName:        "deviceclass",
		StoragePrefix:       "deviceclasses",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &resourcev1.DeviceClass{} },
		NewList:             func() runtime.Object { return &resourcev1.DeviceClassList{} },
		Strategy:            DeviceClassStrategy{},
	}
}

// DeviceClassStrategy is the deviceclasses strategy.
type DeviceClassStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = DeviceClassStrategy{}

// PrepareForCreate sets generation 1.
func (DeviceClassStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*resourcev1.DeviceClass).Generation = 1
}

// PrepareForUpdate bumps the generation when the spec changed.
func (DeviceClassStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	c, o := obj.(*resourcev1.DeviceClass), old.(*resourcev1.DeviceClass)
	if !apiequality.Semantic.DeepEqual(c.Spec, o.Spec) {
		c.Generation = o.Generation + 1
	}
}

// Validate checks selectors, configuration and the extended resource name.
func (DeviceClassStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateDeviceClassSpec(&obj.(*resourcev1.DeviceClass).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec; nothing in it is immutable.
func (DeviceClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateDeviceClassSpec(&obj.(*resourcev1.DeviceClass).Spec, field.NewPath("spec"))
}

func validateDeviceClassSpec(spec *resourcev1.DeviceClassSpec, path *field.Path) field.ErrorList {
	errs := validateSelectors(spec.Selectors, path.Child("selectors"))
	if len(spec.Config) > resourcev1.DeviceConfigMaxSize {
		errs = append(errs, field.TooMany(path.Child("config"), len(spec.Config), resourcev1.DeviceConfigMaxSize))
	}
	for i, c := range spec.Config {
		errs = append(errs, validateDeviceConfiguration(c.DeviceConfiguration, path.Child("config").Index(i))...)
	}
	if n := spec.ExtendedResourceName; n != nil && !isExtendedResourceName(v1.ResourceName(*n)) {
		errs = append(errs, field.Invalid(path.Child("extendedResourceName"), *n, "must be a valid extended resource name"))
	}
	return errs
}

// isExtendedResourceName: not a native resource (one with a domain
// outside kubernetes.io), not a "requests." quota name, and a qualified
// name with that prefix, as upstream's helper.
func isExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/")
	if native || strings.HasPrefix(s, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName("requests."+s)) == 0
}

// TableColumns are kubectl's: NAME AGE.
func (DeviceClassStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{nameColumn(), ageColumn()}
}
