// Package resourcequota holds the registry rules of core/v1 resource
// quotas: validation of hard limits and scopes, the status subresource
// that the quota controller writes, and the table kubectl prints.
package resourcequota

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 resourcequotas.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "resourcequotas",
		Kind:                "ResourceQuota",
		ListKind:            "ResourceQuotaList",
		SingularName:        "resourcequota",
		ShortNames:          []string{"quota"},
		Namespaced:          true,
		StoragePrefix:       "resourcequotas",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.ResourceQuota{} },
		NewList:             func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Strategy:            Strategy{},
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the registry strategy of resource quotas.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate clears the status.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*corev1.ResourceQuota).Status = corev1.ResourceQuotaStatus{}
}

// PrepareForUpdate keeps the status.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*corev1.ResourceQuota).Status = old.(*corev1.ResourceQuota).Status
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*corev1.ResourceQuota).Spec = old.(*corev1.ResourceQuota).Spec
}

// Validate checks a new quota.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.ResourceQuota).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.ResourceQuota).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate checks status.hard and status.used.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	st := &obj.(*corev1.ResourceQuota).Status
	p := field.NewPath("status")
	errs := validateList(st.Hard, p.Child("hard"))
	return append(errs, validateList(st.Used, p.Child("used"))...)
}

func validateList(list corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, q := range list {
		p := path.Key(string(k))
		for _, msg := range validation.IsQualifiedName(string(k)) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

var scopes = []corev1.ResourceQuotaScope{
	corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
	corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort,
	corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
	corev1.ResourceQuotaScopeVolumeAttributesClass,
}

func knownScope(s corev1.ResourceQuotaScope) bool {
	for _, k := range scopes {
		if s == k {
			return true
		}
	}
	return false
}

// ValidateSpec checks hard limits, scopes and the scope selector.
func ValidateSpec(spec *corev1.ResourceQuotaSpec, path *field.Path) field.ErrorList {
	errs := validateList(spec.Hard, path.Child("hard"))
	set := map[corev1.ResourceQuotaScope]bool{}
	for _, s := range spec.Scopes {
		if !knownScope(s) {
			errs = append(errs, field.Invalid(path.Child("scopes"), spec.Scopes, "unsupported scope"))
		}
		set[s] = true
	}
	if sel := spec.ScopeSelector; sel != nil {
		for i, req := range sel.MatchExpressions {
			rp := path.Child("scopeSelector", "matchExpressions").Index(i)
			if !knownScope(req.ScopeName) {
				errs = append(errs, field.Invalid(rp.Child("scopeName"), req.ScopeName, "unsupported scope"))
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(rp.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(rp.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.Invalid(rp.Child("operator"), req.Operator, "not a valid selector operator"))
			}
			set[req.ScopeName] = true
		}
	}
	if (set[corev1.ResourceQuotaScopeTerminating] && set[corev1.ResourceQuotaScopeNotTerminating]) ||
		(set[corev1.ResourceQuotaScopeBestEffort] && set[corev1.ResourceQuotaScopeNotBestEffort]) {
		errs = append(errs, field.Invalid(path.Child("scopes"), spec.Scopes, "conflicting scopes"))
	}
	return errs
}

// TableColumns are the columns of `kubectl get quota`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
		{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
	}
}

// TableRow renders one quota: "name: used/hard" for each resource in
// status.hard, sorted, limits.* under LIMIT and the rest under REQUEST.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return nil, fmt.Errorf("resourcequota table: unexpected object %T", obj)
	}
	names := make([]string, 0, len(q.Status.Hard))
	for k := range q.Status.Hard {
		names = append(names, string(k))
	}
	sort.Strings(names)
	var requests, limits []string
	for _, n := range names {
		used, hard := q.Status.Used[corev1.ResourceName(n)], q.Status.Hard[corev1.ResourceName(n)]
		cell := fmt.Sprintf("%s: %s/%s", n, used.String(), hard.String())
		if strings.HasPrefix(n, "limits.") {
			limits = append(limits, cell)
		} else {
			requests = append(requests, cell)
		}
	}
	return []interface{}{q.Name, registry.Age(q.CreationTimestamp), strings.Join(requests, ", "), strings.Join(limits, ", ")}, nil
}
