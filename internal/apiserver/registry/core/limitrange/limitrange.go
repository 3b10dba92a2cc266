// Package limitrange holds the registry rules of core/v1 limit ranges:
// upstream's defaults for container limits (default from max, default
// request from default or min), validation of the min ≤ defaultRequest ≤
// default ≤ max ordering, and the table kubectl prints.
package limitrange

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 limitranges.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "limitranges",
		Kind:          "LimitRange",
		ListKind:      "LimitRangeList",
		SingularName:  "limitrange",
		ShortNames:    []string{"limits"},
		Namespaced:    true,
		StoragePrefix: "limitranges",
		New:           func() runtime.Object { return &corev1.LimitRange{} },
		NewList:       func() runtime.Object { return &corev1.LimitRangeList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the registry strategy of limit ranges.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Default applies upstream's defaults to Container items: a missing
// default limit is the max, a missing default request is the default
// limit, else the min.
func Default(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		for k, v := range item.Max {
			if _, ok := item.Default[k]; !ok {
				item.Default[k] = v.DeepCopy()
			}
		}
		for k, v := range item.Default {
			if _, ok := item.DefaultRequest[k]; !ok {
				item.DefaultRequest[k] = v.DeepCopy()
			}
		}
		for k, v := range item.Min {
			if _, ok := item.DefaultRequest[k]; !ok {
				item.DefaultRequest[k] = v.DeepCopy()
			}
		}
	}
}

// PrepareForCreate applies defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	Default(obj.(*corev1.LimitRange))
}

// PrepareForUpdate applies defaults.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	Default(obj.(*corev1.LimitRange))
}

// Validate checks a new limit range.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.LimitRange).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.LimitRange).Spec, field.NewPath("spec"))
}

// ValidateSpec checks each item's type, resource names and the ordering of
// its quantities, with upstream's paths and messages.
func ValidateSpec(spec *corev1.LimitRangeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.LimitType]bool{}
	for i := range spec.Limits {
		item := &spec.Limits[i]
		idx := path.Child("limits").Index(i)
		if item.Type == "" {
			errs = append(errs, field.Required(idx.Child("type"), ""))
		}
		if item.Type == corev1.LimitTypePod || item.Type == corev1.LimitTypeContainer {
			if seen[item.Type] {
				errs = append(errs, field.Duplicate(idx.Child("type"), item.Type))
			}
			seen[item.Type] = true
		}
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(idx.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(idx.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		}
		keys := map[corev1.ResourceName]bool{}
		for _, bag := range []struct {
			name string
			list corev1.ResourceList
		}{{"max", item.Max}, {"min", item.Min}, {"default", item.Default}, {"defaultRequest", item.DefaultRequest}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}} {
			for k, q := range bag.list {
				keys[k] = true
				p := idx.Child(bag.name).Key(string(k))
				for _, msg := range validation.IsQualifiedName(string(k)) {
					errs = append(errs, field.Invalid(p, k, msg))
				}
				if q.Sign() < 0 {
					errs = append(errs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
				}
			}
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, n := range names {
			errs = append(errs, validateOrder(item, corev1.ResourceName(n), idx)...)
		}
	}
	return errs
}

func validateOrder(item *corev1.LimitRangeItem, k corev1.ResourceName, idx *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := string(k)
	minQ, hasMin := item.Min[k]
	maxQ, hasMax := item.Max[k]
	defQ, hasDef := item.Default[k]
	reqQ, hasReq := item.DefaultRequest[k]
	ratio, hasRatio := item.MaxLimitRequestRatio[k]
	if hasMin && hasMax && minQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("min").Key(key), minQ.String(), fmt.Sprintf("min value %s is greater than max value %s", minQ.String(), maxQ.String())))
	}
	if hasReq && hasMin && minQ.Cmp(reqQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("min value %s is greater than default request value %s", minQ.String(), reqQ.String())))
	}
	if hasReq && hasMax && reqQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("default request value %s is greater than max value %s", reqQ.String(), maxQ.String())))
	}
	if hasReq && hasDef && reqQ.Cmp(defQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("defaultRequest").Key(key), reqQ.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", reqQ.String(), defQ.String())))
	}
	if hasDef && hasMin && minQ.Cmp(defQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("default").Key(key), minQ.String(), fmt.Sprintf("min value %s is greater than default value %s", minQ.String(), defQ.String())))
	}
	if hasDef && hasMax && defQ.Cmp(maxQ) > 0 {
		errs = append(errs, field.Invalid(idx.Child("default").Key(key), maxQ.String(), fmt.Sprintf("default value %s is greater than max value %s", defQ.String(), maxQ.String())))
	}
	if hasRatio && ratio.Cmp(*resource.NewQuantity(1, resource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(idx.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax && minQ.Sign() > 0 {
		maxRatio := float64(maxQ.MilliValue()) / float64(minQ.MilliValue())
		if float64(ratio.MilliValue())/1000 > maxRatio {
			errs = append(errs, field.Invalid(idx.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), maxRatio)))
		}
	}
	return errs
}

// TableColumns are the columns of `kubectl get limits`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Created At", Type: "date", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one limit range: its name and creation time in RFC 3339.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	lr, ok := obj.(*corev1.LimitRange)
	if !ok {
		return nil, fmt.Errorf("limitrange table: unexpected object %T", obj)
	}
	return []interface{}{lr.Name, lr.CreationTimestamp.UTC().Format(time.RFC3339)}, nil
}
