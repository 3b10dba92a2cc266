package dra

import (
	"context"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// ResourceClaimTemplateResource describes resource.k8s.io/v1
// resourceclaimtemplates: the claim the resource-claim controller creates
// for each pod that names the template. The spec is immutable.
func ResourceClaimTemplateResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        groupVersion,
		Resource:            "resourceclaimtemplates",
		Kind:                "ResourceClaimTemplate",
		ListKind:            "ResourceClaimTemplateList",
		SingularName:        "resourceclaimtemplate",
		Namespaced:          true,
		StoragePrefix:       "resourceclaimtemplates",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
		NewList:             func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
		Strategy:            ResourceClaimTemplateStrategy{},
	}
}

// ResourceClaimTemplateStrategy is the resourceclaimtemplates strategy.
type ResourceClaimTemplateStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ResourceClaimTemplateStrategy{}

// PrepareForCreate applies the claim defaults.
func (ResourceClaimTemplateStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	DefaultClaimSpec(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec)
}

// PrepareForUpdate applies the claim defaults.
func (ResourceClaimTemplateStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	DefaultClaimSpec(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec)
}

// Validate checks the template's claim spec (spec.spec.devices...).
func (ResourceClaimTemplateStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateClaimSpec(&obj.(*resourcev1.ResourceClaimTemplate).Spec.Spec, field.NewPath("spec", "spec"))
}

// ValidateUpdate: the spec is immutable.
func (ResourceClaimTemplateStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	t, o := obj.(*resourcev1.ResourceClaimTemplate), old.(*resourcev1.ResourceClaimTemplate)
	return immutable(t.Spec, o.Spec, field.NewPath("spec"))
}
