// Package namespace holds the registry rules of core/v1 namespaces: the
// "kubernetes" finalizer and Active phase given on create, the
// kubernetes.io/metadata.name label, the status and finalize
// subresources, deletion (Terminating while finalizers remain), field
// selectors and the table kubectl prints.
package namespace

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 namespaces.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "namespaces",
		Kind:          "Namespace",
		ListKind:      "NamespaceList",
		SingularName:  "namespace",
		ShortNames:    []string{"ns"},
		Namespaced:    false,
		StoragePrefix: "namespaces",
		New:           func() runtime.Object { return &corev1.Namespace{} },
		NewList:       func() runtime.Object { return &corev1.NamespaceList{} },
		Strategy:      Strategy{},
		// Upstream returns the namespace but documents a Status.
		ReturnDeletedObject:      true,
		DeleteDocumentedAsStatus: true,
		Subresources:             map[string]registry.Subresource{"status": registry.StatusSubresource(), "finalize": registry.FinalizeSubresource()},
	}
}

// Strategy is the registry strategy of namespaces.
type Strategy struct {
	registry.DefaultStrategy
}

// Verbs: upstream serves no deletecollection for this resource.
func (Strategy) Verbs() []string {
	return []string{"create", "delete", "get", "list", "patch", "update", "watch"}
}

var (
	_ registry.Strategy      = Strategy{}
	_ registry.SpecFinalizer = Strategy{}
)

// SpecFinalizersPending: a namespace stays until spec.finalizers is empty
// (the namespace controller empties it through /finalize).
func (Strategy) SpecFinalizersPending(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) > 0
}

// MarkTerminating sets phase Terminating on a namespace marked for
// deletion.
func (Strategy) MarkTerminating(obj runtime.Object) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
}

// Finalize applies an update of namespaces/finalize: only spec.finalizers
// change, and none may be empty.
func (Strategy) Finalize(want, cur runtime.Object) (runtime.Object, field.ErrorList) {
	w, ok := want.(*corev1.Namespace)
	if !ok {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("finalize: unexpected object %T", want))}
	}
	ns := cur.(*corev1.Namespace)
	var errs field.ErrorList
	for i, f := range w.Spec.Finalizers {
		if f == "" {
			errs = append(errs, field.Required(field.NewPath("spec", "finalizers").Index(i), ""))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	ns.Spec.Finalizers = w.Spec.Finalizers
	return ns, nil
}

// ValidateName accepts DNS-1123 labels, as upstream does for namespaces.
func (Strategy) ValidateName(name string, prefix bool) []string {
	return registry.NameIsDNSLabel(name, prefix)
}

// PrepareForCreate sets phase Active, adds the "kubernetes" finalizer to
// spec.finalizers and the kubernetes.io/metadata.name label.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	hasKube := false
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			hasKube = true
			break
		}
	}
	if !hasKube {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	setNameLabel(ns)
}

// setNameLabel sets the immutable label upstream's defaulting puts on every
// namespace.
func setNameLabel(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// PrepareForUpdate keeps the old spec.finalizers (they change through
// finalize only) and status, and restores the name label.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
	ns.Spec.Finalizers = oldNS.Spec.Finalizers
	ns.Status = oldNS.Status
	setNameLabel(ns)
}

// PrepareForStatusUpdate keeps the old spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Spec = old.(*corev1.Namespace).Spec
	setNameLabel(ns)
}

// Validate checks spec.finalizers of a new namespace.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateFinalizers(obj.(*corev1.Namespace).Spec.Finalizers)
}

// ValidateUpdate checks a namespace update.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateFinalizers(obj.(*corev1.Namespace).Spec.Finalizers)
}

// ValidateStatusUpdate checks the phase of a status update: a namespace
// being deleted must stay Terminating.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	path := field.NewPath("status", "phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			return field.ErrorList{field.Invalid(path, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		return field.ErrorList{field.Invalid(path, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}

func validateFinalizers(finalizers []corev1.FinalizerName) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range finalizers {
		errs = append(errs, ValidateFinalizerName(string(f), path.Index(i))...)
	}
	return errs
}

// ValidateFinalizerName checks a finalizer name as upstream's core
// validation does: a qualified name that, without a "/", must be one of
// the standard ones (kubernetes, orphan, foregroundDeletion).
func ValidateFinalizerName(name string, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, path)
	if !strings.Contains(name, "/") {
		switch name {
		case string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents:
		default:
			errs = append(errs, field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// Finalize applies a PUT to namespaces/{name}/finalize: the result is old
// with spec.finalizers replaced by the requested ones and nothing else
// changed. The errors use upstream's field paths.
func Finalize(old, requested *corev1.Namespace) (*corev1.Namespace, field.ErrorList) {
	if errs := validateFinalizers(requested.Spec.Finalizers); len(errs) > 0 {
		return nil, errs
	}
	ns := old.DeepCopy()
	ns.Spec.Finalizers = append([]corev1.FinalizerName(nil), requested.Spec.Finalizers...)
	return ns, nil
}

// MarkForDeletion applies a DELETE to a namespace as upstream does. The
// first delete sets deletionTimestamp and phase Terminating and returns
// true: the handler stores the namespace instead of removing it, and the
// namespace controller empties it and clears spec.finalizers through
// finalize. A later delete returns true (keep it, change nothing) while
// spec.finalizers remain, and false once the namespace may be removed
// (metadata.finalizers are then the generic handler's business).
func MarkForDeletion(ns *corev1.Namespace, now metav1.Time) (pending bool) {
	if ns.DeletionTimestamp == nil {
		ns.DeletionTimestamp = &now
		ns.Status.Phase = corev1.NamespaceTerminating
		return true
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
	return len(ns.Spec.Finalizers) > 0
}

// FieldSet adds status.phase to the selectable fields.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"status.phase": string(obj.(*corev1.Namespace).Status.Phase)}
}

// TableColumns are the columns of `kubectl get namespaces`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one namespace.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, fmt.Errorf("namespace table: unexpected object %T", obj)
	}
	return []interface{}{ns.Name, string(ns.Status.Phase), registry.Age(ns.CreationTimestamp)}, nil
}
