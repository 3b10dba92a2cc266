package networking

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// maxControllerLength bounds spec.controller.
const maxControllerLength = 250

// IngressClassResource describes networking.k8s.io/v1 ingressclasses.
func IngressClassResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  networkingv1.SchemeGroupVersion,
		Resource:      "ingressclasses",
		Kind:          "IngressClass",
		ListKind:      "IngressClassList",
		SingularName:  "ingressclass",
		StoragePrefix: "ingressclasses",
		New:           func() runtime.Object { return &networkingv1.IngressClass{} },
		NewList:       func() runtime.Object { return &networkingv1.IngressClassList{} },
		Strategy:      IngressClassStrategy{},
	}
}

// IngressClassStrategy is the ingressclasses strategy.
type IngressClassStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = IngressClassStrategy{}

// DefaultIngressClass sets parameters.scope to Cluster when parameters are
// given without a scope.
func DefaultIngressClass(ic *networkingv1.IngressClass) {
	if p := ic.Spec.Parameters; p != nil && p.Scope == nil {
		s := networkingv1.IngressClassParametersReferenceScopeCluster
		p.Scope = &s
	}
}

// PrepareForCreate applies defaults and sets generation 1.
func (IngressClassStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	ic := obj.(*networkingv1.IngressClass)
	ic.Generation = 1
	DefaultIngressClass(ic)
}

// PrepareForUpdate applies defaults and bumps generation on spec changes.
func (IngressClassStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ic, o := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass)
	DefaultIngressClass(ic)
	ic.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(ic.Spec, o.Spec) {
		ic.Generation = o.Generation + 1
	}
}

// Validate checks a new ingress class.
func (IngressClassStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateIngressClassSpec(&obj.(*networkingv1.IngressClass).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps spec.controller immutable.
func (IngressClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ic, o := obj.(*networkingv1.IngressClass), old.(*networkingv1.IngressClass)
	errs := ValidateIngressClassSpec(&ic.Spec, field.NewPath("spec"))
	return append(errs, apimachineryvalidation.ValidateImmutableField(ic.Spec.Controller, o.Spec.Controller, field.NewPath("spec", "controller"))...)
}

var supportedScopes = []string{
	networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace,
}

// ValidateIngressClassSpec checks the controller and the parameters
// reference.
func ValidateIngressClassSpec(spec *networkingv1.IngressClassSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	cp := path.Child("controller")
	switch {
	case spec.Controller == "":
		errs = append(errs, field.Required(cp, ""))
	case len(spec.Controller) > maxControllerLength:
		errs = append(errs, field.TooLong(cp, spec.Controller, maxControllerLength))
	default:
		errs = append(errs, validation.IsDomainPrefixedPath(cp, spec.Controller)...)
	}
	p := spec.Parameters
	if p == nil {
		return errs
	}
	pp := path.Child("parameters")
	if p.APIGroup != nil && *p.APIGroup != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*p.APIGroup) {
			errs = append(errs, field.Invalid(pp.Child("apiGroup"), *p.APIGroup, msg))
		}
	}
	if p.Kind == "" {
		errs = append(errs, field.Required(pp.Child("kind"), ""))
	}
	if p.Name == "" {
		errs = append(errs, field.Required(pp.Child("name"), ""))
	}
	if p.Scope == nil {
		errs = append(errs, field.Required(pp.Child("scope"), ""))
		return errs
	}
	switch *p.Scope {
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if p.Namespace != nil {
			errs = append(errs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if p.Namespace == nil || *p.Namespace == "" {
			errs = append(errs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range validation.IsDNS1123Label(*p.Namespace) {
				errs = append(errs, field.Invalid(pp.Child("namespace"), *p.Namespace, msg))
			}
		}
	default:
		errs = append(errs, field.NotSupported(pp.Child("scope"), *p.Scope, supportedScopes))
	}
	return errs
}

// TableColumns are kubectl's columns for ingress classes.
func (IngressClassStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Controller", Type: "string", Description: "Controller that is responsible for handling this class"},
		{Name: "Parameters", Type: "string", Description: "A reference to a resource with additional parameters"},
		ageColumn(),
	}
}

// TableRow renders one ingress class; parameters read Kind[.group]/name.
func (IngressClassStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ic := obj.(*networkingv1.IngressClass)
	params := "<none>"
	if p := ic.Spec.Parameters; p != nil {
		params = p.Kind
		if p.APIGroup != nil {
			params += "." + *p.APIGroup
		}
		params += "/" + p.Name
	}
	return []interface{}{ic.Name, ic.Spec.Controller, params, registry.Age(ic.CreationTimestamp)}, nil
}
