// Package runtimeclass holds the rules of node.k8s.io/v1 runtimeclasses: the
// handler (a DNS label, immutable), pod overhead, scheduling constraints and
// kubectl's table (NAME HANDLER AGE).
package runtimeclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the node.k8s.io/v1 resources: runtimeclasses.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes node.k8s.io/v1 runtimeclasses.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  nodev1.SchemeGroupVersion,
		Resource:      "runtimeclasses",
		Kind:          "RuntimeClass",
		ListKind:      "RuntimeClassList",
		SingularName:  "runtimeclass",
		StoragePrefix: "runtimeclasses",
		New:           func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:       func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the runtimeclasses strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Validate checks a new runtime class.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateRuntimeClass(obj.(*nodev1.RuntimeClass))
}

// ValidateUpdate also keeps the handler immutable.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	rc, o := obj.(*nodev1.RuntimeClass), old.(*nodev1.RuntimeClass)
	errs := ValidateRuntimeClass(rc)
	return append(errs, apimachineryvalidation.ValidateImmutableField(rc.Handler, o.Handler, field.NewPath("handler"))...)
}

// ValidateRuntimeClass checks the handler, overhead and scheduling.
func ValidateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(rc.Handler) {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
	}
	if rc.Overhead != nil {
		op := field.NewPath("overhead", "podFixed")
		for name, q := range rc.Overhead.PodFixed {
			for _, msg := range validation.IsQualifiedName(string(name)) {
				errs = append(errs, field.Invalid(op.Key(string(name)), name, msg))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(op.Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	if s := rc.Scheduling; s != nil {
		sp := field.NewPath("scheduling")
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, sp.Child("nodeSelector"))...)
		for i, tol := range s.Tolerations {
			errs = append(errs, validateToleration(tol, sp.Child("tolerations").Index(i))...)
		}
	}
	return errs
}

var (
	supportedOperators = []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}
	supportedEffects   = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
)

func validateToleration(t corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key"))...)
	}
	if t.Key == "" && t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, supportedOperators))
	}
	if t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectPreferNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, supportedEffects))
	}
	return errs
}

// TableColumns are kubectl's columns for runtime classes.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Handler", Type: "string", Description: nodev1.RuntimeClass{}.SwaggerDoc()["handler"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one runtime class.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	rc, ok := obj.(*nodev1.RuntimeClass)
	if !ok {
		return nil, fmt.Errorf("expected RuntimeClass, got %T", obj)
	}
	return []interface{}{rc.Name, rc.Handler, registry.Age(rc.CreationTimestamp)}, nil
}
