// Package scheduling holds the rules of scheduling.k8s.io/v1
// priorityclasses: the default preemption policy, the reserved "system-"
// names, the ceiling on user-defined values, immutable values, the single
// global default, kubectl's table, and the two system classes the server
// creates at start.
package scheduling

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

const (
	// SystemPriorityClassPrefix starts the names reserved for system classes.
	SystemPriorityClassPrefix = "system-"
	// HighestUserDefinablePriority is the largest value a user class may have.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is the base of the system classes' values.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemNodeCritical and SystemClusterCritical name the system classes.
	SystemNodeCritical    = "system-node-critical"
	SystemClusterCritical = "system-cluster-critical"
)

// SystemPriorityClasses returns the classes upstream creates at start:
// system-node-critical (2000001000) and system-cluster-critical
// (2000000000).
func SystemPriorityClasses() []schedulingv1.PriorityClass {
	return []schedulingv1.PriorityClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:       SystemCriticalPriority + 1000,
			Description: "Used for system critical pods that must not be moved from their current node.",
		},
		{
			ObjectMeta:  metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:       SystemCriticalPriority,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
		},
	}
}

// Lister lists the stored priority classes; the strategy uses it to keep a
// single global default.
type Lister func(ctx context.Context) ([]schedulingv1.PriorityClass, error)

// Resources lists the scheduling.k8s.io/v1 resources: priorityclasses,
// whose single-global-default rule reads the stored classes through
// deps.Reader (nil: the rule is not checked).
func Resources(deps registry.Deps) []registry.Resource {
	var list Lister
	if deps.Reader != nil {
		list = func(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
			l := &schedulingv1.PriorityClassList{}
			if err := deps.Reader.List(ctx, schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), "", true, l); err != nil {
				return nil, err
			}
			return l.Items, nil
		}
	}
	return []registry.Resource{Resource(list)}
}

// Resource describes scheduling.k8s.io/v1 priorityclasses. list may be nil:
// the single-global-default check is then skipped.
func Resource(list Lister) registry.Resource {
	return registry.Resource{
		GroupVersion:  schedulingv1.SchemeGroupVersion,
		Resource:      "priorityclasses",
		Kind:          "PriorityClass",
		ListKind:      "PriorityClassList",
		SingularName:  "priorityclass",
		ShortNames:    []string{"pc"},
		StoragePrefix: "priorityclasses",
		New:           func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:       func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy:      NewStrategy(list),
	}
}

// Strategy is the priorityclasses strategy. It also implements
// registry.BeforeCreater and registry.BeforeUpdater to refuse a second
// global default.
type Strategy struct {
	registry.DefaultStrategy
	list Lister
}

var (
	_ registry.Strategy      = (*Strategy)(nil)
	_ registry.BeforeCreater = (*Strategy)(nil)
	_ registry.BeforeUpdater = (*Strategy)(nil)
)

// NewStrategy builds the strategy; list may be nil.
func NewStrategy(list Lister) *Strategy { return &Strategy{list: list} }

// DefaultPriorityClass sets preemptionPolicy to PreemptLowerPriority.
func DefaultPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		p := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &p
	}
}

// PrepareForCreate applies defaults.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	DefaultPriorityClass(obj.(*schedulingv1.PriorityClass))
}

// PrepareForUpdate applies defaults.
func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	DefaultPriorityClass(obj.(*schedulingv1.PriorityClass))
}

// Validate checks a new priority class.
func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidatePriorityClass(obj.(*schedulingv1.PriorityClass))
}

// ValidateUpdate also keeps value and preemptionPolicy immutable.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	pc, o := obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
	var errs field.ErrorList
	if pc.Value != o.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(pc.PreemptionPolicy, o.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
	return append(errs, validatePreemptionPolicy(pc.PreemptionPolicy)...)
}

var supportedPreemptionPolicies = []string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)}

// ValidatePriorityClass checks the reserved names, the value ceiling and
// the preemption policy.
func ValidatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(pc.Name, SystemPriorityClassPrefix) {
		if err := checkSystemClass(pc); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				fmt.Sprintf("priority class names with '%s' prefix are reserved for system use only. error: %v", SystemPriorityClassPrefix, err)))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %d", HighestUserDefinablePriority)))
	}
	return append(errs, validatePreemptionPolicy(pc.PreemptionPolicy)...)
}

func validatePreemptionPolicy(p *corev1.PreemptionPolicy) field.ErrorList {
	path := field.NewPath("preemptionPolicy")
	switch {
	case p == nil:
		return field.ErrorList{field.Required(path, "")}
	case *p != corev1.PreemptLowerPriority && *p != corev1.PreemptNever:
		return field.ErrorList{field.NotSupported(path, *p, supportedPreemptionPolicies)}
	}
	return nil
}

// checkSystemClass accepts a "system-" class only when it is one of the
// known system classes with its value and globalDefault unchanged.
func checkSystemClass(pc *schedulingv1.PriorityClass) error {
	for _, sys := range SystemPriorityClasses() {
		if sys.Name != pc.Name {
			continue
		}
		if sys.Value != pc.Value {
			return fmt.Errorf("value of %s PriorityClass must be %d", sys.Name, sys.Value)
		}
		if sys.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %s PriorityClass must be %t", sys.Name, sys.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%s is not a known system priority class", pc.Name)
}

// BeforeCreate refuses a second global default.
func (s *Strategy) BeforeCreate(ctx context.Context, obj runtime.Object, dryRun bool) (func(), error) {
	return nil, s.checkSingleDefault(ctx, obj.(*schedulingv1.PriorityClass))
}

// BeforeUpdate refuses to make a class the global default while another is.
func (s *Strategy) BeforeUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (func(), error) {
	return nil, s.checkSingleDefault(ctx, obj.(*schedulingv1.PriorityClass))
}

func (s *Strategy) checkSingleDefault(ctx context.Context, pc *schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault || s.list == nil {
		return nil
	}
	all, err := s.list(ctx)
	if err != nil {
		return fmt.Errorf("list priority classes: %w", err)
	}
	for _, other := range all {
		if other.GlobalDefault && other.Name != pc.Name {
			return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), pc.Name,
				fmt.Errorf("PriorityClass %s is already marked as default. Only one default can exist", other.Name))
		}
	}
	return nil
}

// TableColumns are kubectl's columns for priority classes.
func (s *Strategy) TableColumns() []metav1.TableColumnDefinition {
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Value", Type: "integer", Description: doc["value"]},
		{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "PreemptionPolicy", Type: "string", Description: doc["preemptionPolicy"]},
	}
}

// TableRow renders one priority class.
func (s *Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pc := obj.(*schedulingv1.PriorityClass)
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, registry.Age(pc.CreationTimestamp), policy}, nil
}
