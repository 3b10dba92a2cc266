// Package policy holds the registry rules of policy/v1
// PodDisruptionBudgets (validation, generation and status rules, kubectl's
// table) and CheckEviction, the pure decision behind the pods/eviction
// subresource.
package policy

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the policy/v1 resources: poddisruptionbudgets.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes policy/v1 poddisruptionbudgets.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  policyv1.SchemeGroupVersion,
		Resource:      "poddisruptionbudgets",
		Kind:          "PodDisruptionBudget",
		ListKind:      "PodDisruptionBudgetList",
		SingularName:  "poddisruptionbudget",
		ShortNames:    []string{"pdb"},
		Namespaced:    true,
		StoragePrefix: "poddisruptionbudgets",
		New:           func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList:       func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the poddisruptionbudgets strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate clears status and sets generation 1.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{}
	pdb.Generation = 1
}

// PrepareForUpdate keeps the status and bumps generation when the spec
// changed.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pdb, o := obj.(*policyv1.PodDisruptionBudget), old.(*policyv1.PodDisruptionBudget)
	pdb.Status = o.Status
	pdb.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(pdb.Spec, o.Spec) {
		pdb.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*policyv1.PodDisruptionBudget).Spec = old.(*policyv1.PodDisruptionBudget).Spec
}

// Validate checks a new budget.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec (policy/v1 lets all of it change).
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*policyv1.PodDisruptionBudget).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate checks the counters.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateStatus(&obj.(*policyv1.PodDisruptionBudget).Status, field.NewPath("status"))
}

// ValidateSpec checks minAvailable/maxUnavailable (not both; non-negative
// ints or percents up to 100%), the selector and the unhealthy pod
// eviction policy.
func ValidateSpec(spec *policyv1.PodDisruptionBudgetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(path, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	errs = append(errs, validateIntOrPercent(spec.MinAvailable, path.Child("minAvailable"))...)
	errs = append(errs, validateIntOrPercent(spec.MaxUnavailable, path.Child("maxUnavailable"))...)
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	}
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.IfHealthyBudget && *p != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(path.Child("unhealthyPodEvictionPolicy"), *p,
			[]policyv1.UnhealthyPodEvictionPolicyType{policyv1.IfHealthyBudget, policyv1.AlwaysAllow}))
	}
	return errs
}

func validateIntOrPercent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	switch v.Type {
	case intstr.Int:
		if v.IntVal < 0 {
			errs = append(errs, field.Invalid(path, v.IntVal, "must be greater than or equal to 0"))
		}
	case intstr.String:
		msgs := validation.IsValidPercent(v.StrVal)
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(path, v.StrVal, msg))
		}
		if len(msgs) == 0 {
			if n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err == nil && n > 100 {
				errs = append(errs, field.Invalid(path, v.StrVal, "must not be greater than 100%"))
			}
		}
	}
	return errs
}

// ValidateStatus checks the counters are non-negative.
func ValidateStatus(st *policyv1.PodDisruptionBudgetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"disruptionsAllowed", int64(st.DisruptionsAllowed)}, {"currentHealthy", int64(st.CurrentHealthy)},
		{"desiredHealthy", int64(st.DesiredHealthy)}, {"expectedPods", int64(st.ExpectedPods)},
		{"observedGeneration", st.ObservedGeneration},
	} {
		if c.v < 0 {
			errs = append(errs, field.Invalid(path.Child(c.name), c.v, "must be greater than or equal to 0"))
		}
	}
	return errs
}

// TableColumns are kubectl's columns for PDBs.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
		{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one PDB; an unset bound reads N/A.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return nil, fmt.Errorf("poddisruptionbudget table: unexpected object %T", obj)
	}
	bound := func(v *intstr.IntOrString) string {
		if v == nil {
			return "N/A"
		}
		return v.String()
	}
	return []interface{}{
		pdb.Name, bound(pdb.Spec.MinAvailable), bound(pdb.Spec.MaxUnavailable),
		int64(pdb.Status.DisruptionsAllowed), registry.Age(pdb.CreationTimestamp),
	}, nil
}
