// Package persistentvolumeclaim holds the registry rules of core/v1
// persistent volume claims: defaults, validation (including which parts of
// the spec may change after creation), status rules, and the table kubectl
// prints. Default, ValidateSpec and the access-mode helpers are shared with
// persistent volumes and stateful set claim templates.
package persistentvolumeclaim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// BetaStorageClassAnnotation is the legacy way to name a claim's or a
// volume's storage class; it wins over spec.storageClassName.
const BetaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// Resource describes core/v1 persistentvolumeclaims.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "persistentvolumeclaims",
		Kind:                "PersistentVolumeClaim",
		ListKind:            "PersistentVolumeClaimList",
		SingularName:        "persistentvolumeclaim",
		ShortNames:          []string{"pvc"},
		Namespaced:          true,
		StoragePrefix:       "persistentvolumeclaims",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList:             func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Strategy:            Strategy{},
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the registry strategy of persistent volume claims.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Default applies upstream's defaults: volumeMode Filesystem and phase
// Pending.
func Default(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &m
	}
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
}

// PrepareForCreate resets the status to Pending and applies defaults.
// (Upstream stores an empty status and lets the volume controller write
// Pending a moment later; a client sees Pending either way.)
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	pvc.Status = corev1.PersistentVolumeClaimStatus{}
	Default(pvc)
}

// PrepareForUpdate keeps the status and applies defaults.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pvc, o := obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
	pvc.Status = o.Status
	Default(pvc)
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*corev1.PersistentVolumeClaim).Spec = old.(*corev1.PersistentVolumeClaim).Spec
}

// Validate checks a new claim.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.PersistentVolumeClaim).Spec, field.NewPath("spec"))
}

// immutableSpec is upstream's message for a change to a claim's spec
// outside what may change.
const immutableSpec = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"

// ValidateUpdate allows, after creation, only: setting volumeName once,
// and for a bound claim changing resources.requests (not below
// status.capacity) and volumeAttributesClassName.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	pvc, o := obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
	errs := ValidateSpec(&pvc.Spec, field.NewPath("spec"))
	rest := o.Spec.DeepCopy()
	if o.Spec.VolumeName == "" {
		rest.VolumeName = pvc.Spec.VolumeName
	}
	if o.Status.Phase == corev1.ClaimBound {
		rest.Resources.Requests = pvc.Spec.Resources.Requests
		rest.VolumeAttributesClassName = pvc.Spec.VolumeAttributesClassName
	}
	if !apiequality.Semantic.DeepEqual(*rest, pvc.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), immutableSpec))
		return errs
	}
	newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], o.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		capacity, ok := o.Status.Capacity[corev1.ResourceStorage]
		if !ok || newSize.Cmp(capacity) < 0 {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
		}
	}
	return errs
}

// ValidateStatusUpdate checks the reported capacity.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	var errs field.ErrorList
	for name, q := range pvc.Status.Capacity {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(field.NewPath("status", "capacity").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	errs = append(errs, ValidateAccessModes(pvc.Status.AccessModes, field.NewPath("status", "accessModes"), false)...)
	return errs
}

var accessModes = []corev1.PersistentVolumeAccessMode{
	corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
}

// ValidateAccessModes checks each mode is known and that ReadWriteOncePod
// stands alone; with required set, at least one mode must be given.
func ValidateAccessModes(modes []corev1.PersistentVolumeAccessMode, path *field.Path, required bool) field.ErrorList {
	var errs field.ErrorList
	if required && len(modes) == 0 {
		errs = append(errs, field.Required(path, "at least 1 access mode is required"))
	}
	rwop := false
	for _, m := range modes {
		known := false
		for _, k := range accessModes {
			known = known || m == k
		}
		if !known {
			errs = append(errs, field.NotSupported(path, m, accessModes))
		}
		rwop = rwop || m == corev1.ReadWriteOncePod
	}
	if rwop && len(modes) > 1 {
		errs = append(errs, field.Forbidden(path, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// ValidateVolumeMode checks volumeMode is Block or Filesystem.
func ValidateVolumeMode(m *corev1.PersistentVolumeMode, path *field.Path) field.ErrorList {
	if m == nil || *m == corev1.PersistentVolumeBlock || *m == corev1.PersistentVolumeFilesystem {
		return nil
	}
	return field.ErrorList{field.NotSupported(path, *m, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem})}
}

// ValidateStorageClassName checks a storage class name is a DNS-1123
// subdomain.
func ValidateStorageClassName(name *string, path *field.Path) field.ErrorList {
	if name == nil || *name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(*name) {
		errs = append(errs, field.Invalid(path, *name, msg))
	}
	return errs
}

// ValidateSpec checks a claim spec (or a claim template's spec).
func ValidateSpec(spec *corev1.PersistentVolumeClaimSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, ValidateAccessModes(spec.AccessModes, path.Child("accessModes"), true)...)
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	}
	storagePath := path.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(storagePath, q.String(), "must be greater than zero"))
	}
	for name, q := range spec.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("resources", "limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	errs = append(errs, ValidateStorageClassName(spec.StorageClassName, path.Child("storageClassName"))...)
	errs = append(errs, ValidateVolumeMode(spec.VolumeMode, path.Child("volumeMode"))...)
	if spec.VolumeAttributesClassName != nil && *spec.VolumeAttributesClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(*spec.VolumeAttributesClassName) {
			errs = append(errs, field.Invalid(path.Child("volumeAttributesClassName"), *spec.VolumeAttributesClassName, msg))
		}
	}
	if ds := spec.DataSource; ds != nil {
		dsPath := path.Child("dataSource")
		if ds.Name == "" {
			errs = append(errs, field.Required(dsPath.Child("name"), ""))
		}
		if ds.Kind == "" {
			errs = append(errs, field.Required(dsPath.Child("kind"), ""))
		}
	}
	return errs
}

// AccessModesString renders access modes as kubectl does: the short
// names among RWO, ROX, RWX, RWOP, in that order, joined by commas.
func AccessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"},
	} {
		if has[m.mode] {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// StorageClass is the claim's class: the beta annotation, else
// spec.storageClassName, else "".
func StorageClass(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[BetaStorageClassAnnotation]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// TableColumns are the columns of `kubectl get pvc`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]},
		{Name: "Volume", Type: "string", Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]},
		{Name: "Capacity", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]},
		{Name: "Access Modes", Type: "string", Description: corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
		{Name: "VolumeAttributesClass", Type: "string", Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeAttributesClassName"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]},
	}
}

// TableRow renders one claim; capacity and access modes come from the
// status once the claim names a volume.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("persistentvolumeclaim table: unexpected object %T", obj)
	}
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = AccessModesString(pvc.Status.AccessModes)
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = q.String()
	}
	return []interface{}{
		pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, StorageClass(pvc),
		unsetOr(pvc.Spec.VolumeAttributesClassName), registry.Age(pvc.CreationTimestamp),
		volumeModeString(pvc.Spec.VolumeMode),
	}, nil
}

func unsetOr(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

func volumeModeString(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}
