// Package apiextensions serves apiextensions.k8s.io/v1
// CustomResourceDefinitions: their defaults, validation (upstream's own
// rules from k8s.io/apiextensions-apiserver, used as a library, so field
// paths and messages match), status rules and table columns. Serving the
// custom resources a CRD declares is internal/apiserver/crd's job.
package apiextensions

import (
	"context"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources are the apiextensions.k8s.io resources.
func Resources(deps registry.Deps) []registry.Resource {
	return []registry.Resource{CRDResource()}
}

// CRDResource is apiextensions.k8s.io/v1 customresourcedefinitions.
func CRDResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  apiextensionsv1.SchemeGroupVersion,
		Resource:      "customresourcedefinitions",
		Kind:          "CustomResourceDefinition",
		ListKind:      "CustomResourceDefinitionList",
		SingularName:  "customresourcedefinition",
		ShortNames:    []string{"crd", "crds"},
		Categories:    []string{"api-extensions"},
		StoragePrefix: "apiextensions.k8s.io/customresourcedefinitions",
		New:           func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} },
		NewList:       func() runtime.Object { return &apiextensionsv1.CustomResourceDefinitionList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy holds the rules of CustomResourceDefinitions.
type Strategy struct{ registry.DefaultStrategy }

// CleanupFinalizer is the finalizer that holds a CRD until its custom
// resources are deleted (upstream's name).
const CleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	crd.Generation = 1
	addStoredVersion(crd)
}

func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	prev := old.(*apiextensionsv1.CustomResourceDefinition)
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	crd.Status = *prev.Status.DeepCopy()
	if !apiequality.Semantic.DeepEqual(prev.Spec, crd.Spec) {
		crd.Generation = prev.Generation + 1
	}
	addStoredVersion(crd)
}

func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	prev := old.(*apiextensionsv1.CustomResourceDefinition)
	status := crd.Status
	prev.DeepCopyInto(crd)
	crd.ObjectMeta = *obj.(*apiextensionsv1.CustomResourceDefinition).ObjectMeta.DeepCopy()
	crd.Spec = *prev.Spec.DeepCopy()
	crd.Status = status
	crd.Labels, crd.Annotations = prev.Labels, prev.Annotations
}

// addStoredVersion records the storage version in status.storedVersions,
// as upstream does on every create and update.
func addStoredVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		for _, s := range crd.Status.StoredVersions {
			if s == v.Name {
				return
			}
		}
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		return
	}
}

// Internal converts a v1 CRD to the internal type upstream's validation
// and schema packages take.
func Internal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsinternal.CustomResourceDefinition, error) {
	out := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func internalOrErr(obj runtime.Object) (*apiextensionsinternal.CustomResourceDefinition, field.ErrorList) {
	in, err := Internal(obj.(*apiextensionsv1.CustomResourceDefinition))
	if err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return in, nil
}

func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	in, errs := internalOrErr(obj)
	if errs != nil {
		return errs
	}
	return validation.ValidateCustomResourceDefinition(ctx, in)
}

func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	in, errs := internalOrErr(obj)
	if errs != nil {
		return errs
	}
	prev, errs := internalOrErr(old)
	if errs != nil {
		return errs
	}
	return validation.ValidateCustomResourceDefinitionUpdate(ctx, in, prev)
}

func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	in, errs := internalOrErr(obj)
	if errs != nil {
		return errs
	}
	prev, errs := internalOrErr(old)
	if errs != nil {
		return errs
	}
	return validation.ValidateUpdateCustomResourceDefinitionStatus(ctx, in, prev)
}

// TableColumns are upstream's for CRDs: the name and when it was created.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
		{Name: "Created At", Type: "date", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."},
	}
}

func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	return []interface{}{crd.Name, crd.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}, nil
}

// Established and NamesAccepted read a CRD's conditions.
func Condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets (or adds) a condition, keeping its transition time when
// the status did not change.
func SetCondition(crd *apiextensionsv1.CustomResourceDefinition, c apiextensionsv1.CustomResourceDefinitionCondition) {
	if cur := Condition(crd, c.Type); cur != nil {
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		return
	}
	crd.Status.Conditions = append(crd.Status.Conditions, c)
}

// A CRD's first delete marks it and adds CleanupFinalizer, as upstream's
// CRD storage does: the CRD controller deletes the custom resources, then
// removes the finalizer, and the CRD goes.
var _ registry.SpecFinalizer = Strategy{}

// SpecFinalizersPending is true until the CRD is marked for deletion.
func (Strategy) SpecFinalizersPending(obj runtime.Object) bool {
	return obj.(*apiextensionsv1.CustomResourceDefinition).DeletionTimestamp == nil
}

// MarkTerminating adds the cleanup finalizer and the Terminating condition.
func (Strategy) MarkTerminating(obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	has := false
	for _, f := range crd.Finalizers {
		has = has || f == CleanupFinalizer
	}
	if !has {
		crd.Finalizers = append(crd.Finalizers, CleanupFinalizer)
	}
	SetCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
		Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
		LastTransitionTime: metav1.Now(),
	})
}

// Finalize is not served for CRDs (no finalize subresource).
func (Strategy) Finalize(want, cur runtime.Object) (runtime.Object, field.ErrorList) {
	return nil, field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "CustomResourceDefinitions have no finalize subresource")}
}
