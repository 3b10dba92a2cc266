package rbac

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// RoleStrategy is the roles strategy.
type RoleStrategy struct{ nameStrategy }

// ClusterRoleStrategy is the clusterroles strategy.
type ClusterRoleStrategy struct{ nameStrategy }

var (
	_ registry.Strategy = RoleStrategy{}
	_ registry.Strategy = ClusterRoleStrategy{}
)

// Validate checks a new role's rules.
func (RoleStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateRules(obj.(*rbacv1.Role).Rules, true, field.NewPath("rules"))
}

// ValidateUpdate checks an updated role's rules.
func (s RoleStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// Validate checks a new cluster role's rules and aggregation rule.
func (ClusterRoleStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	cr := obj.(*rbacv1.ClusterRole)
	errs := ValidateRules(cr.Rules, false, field.NewPath("rules"))
	if cr.AggregationRule != nil {
		ap := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(cr.AggregationRule.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(ap, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range cr.AggregationRule.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&cr.AggregationRule.ClusterRoleSelectors[i],
				metav1validation.LabelSelectorValidationOptions{}, ap.Index(i))...)
		}
	}
	return errs
}

// ValidateUpdate checks an updated cluster role.
func (s ClusterRoleStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// ValidateRules checks each policy rule: verbs are required; non-resource
// URLs exclude resources and are refused in namespaced roles; resource rules
// need an API group and a resource.
func ValidateRules(rules []rbacv1.PolicyRule, namespaced bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := path.Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}
