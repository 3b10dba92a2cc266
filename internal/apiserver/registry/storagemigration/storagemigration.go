// Package storagemigration holds storagemigration.k8s.io/v1
// storageversionmigrations (GA and on by default in v1.37; v1beta1 is
// off): a request to rewrite every stored object of one resource. Rules
// as upstream.
package storagemigration

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	svmv1 "k8s.io/api/storagemigration/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists storagemigration.k8s.io/v1 storageversionmigrations.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes storagemigration.k8s.io/v1 storageversionmigrations.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  svmv1.SchemeGroupVersion,
		Resource:      "storageversionmigrations",
		Kind:          "StorageVersionMigration",
		ListKind:      "StorageVersionMigrationList",
		SingularName:  "storageversionmigration",
		StoragePrefix: "storageversionmigrations",
		New:           func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		NewList:       func() runtime.Object { return &svmv1.StorageVersionMigrationList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the storageversionmigrations strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate clears the status.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*svmv1.StorageVersionMigration).Status = svmv1.StorageVersionMigrationStatus{}
}

// PrepareForUpdate keeps the status.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*svmv1.StorageVersionMigration).Status = old.(*svmv1.StorageVersionMigration).Status
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*svmv1.StorageVersionMigration).Spec = old.(*svmv1.StorageVersionMigration).Spec
}

// Validate: spec.resource.resource is a DNS-1035 label, the group (may be
// empty for core) a DNS subdomain.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*svmv1.StorageVersionMigration).Spec)
}

func validateSpec(s *svmv1.StorageVersionMigrationSpec) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("spec", "resource")
	if s.Resource.Resource == "" {
		errs = append(errs, field.Required(rp.Child("resource"), "resource is required to be set"))
	} else if msgs := validation.IsDNS1035Label(s.Resource.Resource); len(msgs) > 0 {
		errs = append(errs, field.Invalid(rp.Child("resource"), s.Resource.Resource, strings.Join(msgs, ",")))
	}
	if s.Resource.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(s.Resource.Group); len(msgs) > 0 {
			errs = append(errs, field.Invalid(rp.Child("group"), s.Resource.Group, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// ValidateUpdate: the spec is immutable.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	m, o := obj.(*svmv1.StorageVersionMigration), old.(*svmv1.StorageVersionMigration)
	errs := validateSpec(&m.Spec)
	return append(errs, apimachineryvalidation.ValidateImmutableField(m.Spec, o.Spec, field.NewPath("spec"))...)
}

func conditionTrue(m *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	for _, c := range m.Status.Conditions {
		if c.Type == string(t) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// ValidateStatusUpdate: resourceVersion is a non-negative integer, set
// once; valid conditions; Succeeded and Failed never both true, and never
// false again once true.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	m, o := obj.(*svmv1.StorageVersionMigration), old.(*svmv1.StorageVersionMigration)
	sp := field.NewPath("status")
	var errs field.ErrorList
	if rv := m.Status.ResourceVersion; rv != "" {
		if n, err := strconv.ParseUint(rv, 10, 64); err != nil || n == 0 && rv != "0" {
			errs = append(errs, field.Invalid(sp.Child("resourceVersion"), rv, fmt.Sprintf("resource version %q is not a non-negative integer", rv)))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(m.Status.Conditions, sp.Child("conditions"))...)
	if o.Status.ResourceVersion != "" && o.Status.ResourceVersion != m.Status.ResourceVersion {
		errs = append(errs, field.Invalid(sp.Child("resourceVersion"), m.Status.ResourceVersion, "field is immutable"))
	}
	ok, failed := conditionTrue(m, svmv1.MigrationSucceeded), conditionTrue(m, svmv1.MigrationFailed)
	if ok && failed {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if conditionTrue(o, svmv1.MigrationSucceeded) && !ok {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if conditionTrue(o, svmv1.MigrationFailed) && !failed {
		errs = append(errs, field.Invalid(sp.Child("conditions"), m.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}

// TableColumns are kubectl's: NAME RESOURCE STATUS (no AGE upstream).
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Resource", Type: "string", Description: "GroupResource to migrate"},
		{Name: "Status", Type: "string", Description: "Status of the migration"},
	}
}

// TableRow renders one migration: its resource ("deployments.apps") and
// the last of Running, Failed, Succeeded that is true, else Unknown.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	m, ok := obj.(*svmv1.StorageVersionMigration)
	if !ok {
		return nil, fmt.Errorf("storageversionmigration table: unexpected object %T", obj)
	}
	status := "Unknown"
	for _, c := range m.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch svmv1.MigrationConditionType(c.Type) {
		case svmv1.MigrationRunning, svmv1.MigrationFailed, svmv1.MigrationSucceeded:
			status = c.Type
		}
	}
	return []interface{}{m.Name, m.Spec.Resource.String(), status}, nil
}
