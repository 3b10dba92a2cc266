package dra

import (
	"context"
	"fmt"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// DeviceTaintRuleResource describes resource.k8s.io/v1 devicetaintrules
// (v1 since 1.37, DRADeviceTaintRules on by default): a taint applied to
// the devices a selector picks. Unlike the beta versions, v1 DELETE
// answers with a Status.
func DeviceTaintRuleResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  groupVersion,
		Resource:      "devicetaintrules",
		Kind:          "DeviceTaintRule",
		ListKind:      "DeviceTaintRuleList",
		SingularName:  "devicetaintrule",
		StoragePrefix: "devicetaintrules",
		New:           func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
		NewList:       func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
		Strategy:      DeviceTaintRuleStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// DeviceTaintRuleStrategy is the devicetaintrules strategy.
type DeviceTaintRuleStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = DeviceTaintRuleStrategy{}

// PrepareForCreate clears the status, sets generation 1 and timeAdded.
func (DeviceTaintRuleStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	r := obj.(*resourcev1.DeviceTaintRule)
	r.Status = resourcev1.DeviceTaintRuleStatus{}
	r.Generation = 1
	defaultTaintTime(&r.Spec.Taint)
}

// PrepareForUpdate keeps the status; a changed effect with an unchanged
// timeAdded moves timeAdded to now (upstream: it tracks when the effect
// was added); a changed spec bumps the generation.
func (DeviceTaintRuleStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	r, o := obj.(*resourcev1.DeviceTaintRule), old.(*resourcev1.DeviceTaintRule)
	r.Status = o.Status
	if r.Spec.Taint.Effect != o.Spec.Taint.Effect && r.Spec.Taint.TimeAdded.Equal(o.Spec.Taint.TimeAdded) {
		r.Spec.Taint.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
	defaultTaintTime(&r.Spec.Taint)
	if !apiequality.Semantic.DeepEqual(r.Spec, o.Spec) {
		r.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (DeviceTaintRuleStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*resourcev1.DeviceTaintRule).Spec = old.(*resourcev1.DeviceTaintRule).Spec
}

// Validate checks the selector and the taint.
func (DeviceTaintRuleStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateTaintRuleSpec(&obj.(*resourcev1.DeviceTaintRule).Spec, nil, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec (an unchanged effect is not checked
// again).
func (DeviceTaintRuleStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateTaintRuleSpec(&obj.(*resourcev1.DeviceTaintRule).Spec, &old.(*resourcev1.DeviceTaintRule).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate allows at most 8 conditions.
func (DeviceTaintRuleStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	r := obj.(*resourcev1.DeviceTaintRule)
	if n := len(r.Status.Conditions); n > resourcev1.DeviceTaintRuleStatusMaxConditions {
		return field.ErrorList{field.TooMany(field.NewPath("status", "conditions"), n, resourcev1.DeviceTaintRuleStatusMaxConditions)}
	}
	return nil
}

func validateTaintRuleSpec(spec, old *resourcev1.DeviceTaintRuleSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := spec.DeviceSelector; s != nil {
		sp := path.Child("deviceSelector")
		if s.Driver != nil {
			errs = append(errs, validateDriverName(*s.Driver, sp.Child("driver"))...)
		}
		if s.Pool != nil {
			errs = append(errs, validatePoolName(*s.Pool, sp.Child("pool"))...)
		}
		if s.Device != nil {
			errs = append(errs, validateDNSLabel(*s.Device, sp.Child("device"))...)
		}
	}
	var oldTaint *resourcev1.DeviceTaint
	if old != nil {
		oldTaint = &old.Taint
	}
	return append(errs, validateTaint(spec.Taint, oldTaint, path.Child("taint"))...)
}

// TableColumns are kubectl's: NAME KEY VALUE EFFECT TIMEADDED AGE.
func (DeviceTaintRuleStrategy) TableColumns() []metav1.TableColumnDefinition {
	doc := resourcev1.DeviceTaint{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Key", Type: "string", Description: doc["key"]},
		{Name: "Value", Type: "string", Description: doc["value"]},
		{Name: "Effect", Type: "string", Description: doc["effect"]},
		{Name: "TimeAdded", Type: "string", Description: doc["timeAdded"]},
		ageColumn(),
	}
}

// TableRow renders one rule.
func (DeviceTaintRuleStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	r, ok := obj.(*resourcev1.DeviceTaintRule)
	if !ok {
		return nil, fmt.Errorf("devicetaintrule table: unexpected object %T", obj)
	}
	added := ""
	if t := r.Spec.Taint.TimeAdded; t != nil {
		added = registry.Age(*t)
	}
	return []interface{}{r.Name, r.Spec.Taint.Key, r.Spec.Taint.Value, string(r.Spec.Taint.Effect), added, registry.Age(r.CreationTimestamp)}, nil
}
