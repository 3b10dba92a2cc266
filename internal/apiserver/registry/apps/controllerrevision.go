package apps

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// ControllerRevisionResource describes apps/v1 controllerrevisions.
func ControllerRevisionResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  appsv1.SchemeGroupVersion,
		Resource:      "controllerrevisions",
		Kind:          "ControllerRevision",
		ListKind:      "ControllerRevisionList",
		SingularName:  "controllerrevision",
		Namespaced:    true,
		StoragePrefix: "controllerrevisions",
		New:           func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:       func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Strategy:      ControllerRevisionStrategy{},
	}
}

// ControllerRevisionStrategy is the controllerrevisions strategy: data is
// required and immutable, revision is not negative.
type ControllerRevisionStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ControllerRevisionStrategy{}

// Validate checks a new controller revision.
func (ControllerRevisionStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateControllerRevision(obj.(*appsv1.ControllerRevision))
}

// ValidateUpdate also keeps data immutable.
func (ControllerRevisionStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	cr, o := obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
	errs := validateControllerRevision(cr)
	if !apiequality.Semantic.DeepEqual(cr.Data.Raw, o.Data.Raw) {
		errs = append(errs, field.Invalid(field.NewPath("data"), string(cr.Data.Raw), msgImmutable))
	}
	return errs
}

func validateControllerRevision(cr *appsv1.ControllerRevision) field.ErrorList {
	var errs field.ErrorList
	if cr.Data.Raw == nil && cr.Data.Object == nil {
		errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
	}
	errs = append(errs, validateNonNegative(cr.Revision, field.NewPath("revision"))...)
	return errs
}

// TableColumns are kubectl's columns for controllerrevisions.
func (ControllerRevisionStrategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Controller", Type: "string", Description: "Controller of the object"},
		{Name: "Revision", Type: "integer", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one controller revision; CONTROLLER reads
// "<kind>.<group>/<name>" of its controller owner, or "<none>".
func (ControllerRevisionStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return nil, fmt.Errorf("controllerrevision table: unexpected object %T", obj)
	}
	controller := "<none>"
	if ref := metav1.GetControllerOf(cr); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("controllerrevision %s owner: %w", cr.Name, err)
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
		controller = strings.ToLower(gk.String()) + "/" + ref.Name
	}
	return []interface{}{cr.Name, controller, cr.Revision, registry.Age(cr.CreationTimestamp)}, nil
}
