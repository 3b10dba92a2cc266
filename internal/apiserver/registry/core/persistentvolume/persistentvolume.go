// Package persistentvolume holds the registry rules of core/v1 persistent
// volumes (cluster-scoped): defaults, validation of the one volume source,
// the status subresource with lastPhaseTransitionTime, the status.phase
// field selector and the table kubectl prints.
package persistentvolume

import (
	"context"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolumeclaim"
)

// Resource describes core/v1 persistentvolumes.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "persistentvolumes",
		Kind:                "PersistentVolume",
		ListKind:            "PersistentVolumeList",
		SingularName:        "persistentvolume",
		ShortNames:          []string{"pv"},
		Namespaced:          false,
		StoragePrefix:       "persistentvolumes",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList:             func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Strategy:            Strategy{},
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the registry strategy of persistent volumes.
type Strategy struct {
	registry.DefaultStrategy
	// Now is the clock for lastPhaseTransitionTime; nil means time.Now.
	Now func() time.Time
}

var _ registry.Strategy = Strategy{}

func (s Strategy) now() metav1.Time {
	if s.Now == nil {
		return metav1.Now()
	}
	return metav1.NewTime(s.Now())
}

// Default applies upstream's defaults: reclaim policy Retain and
// volumeMode Filesystem.
func Default(pv *corev1.PersistentVolume) {
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
}

// PrepareForCreate resets the status to phase Pending, stamped now.
func (s Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pv := obj.(*corev1.PersistentVolume)
	now := s.now()
	pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
	Default(pv)
}

// PrepareForUpdate keeps the status and applies defaults.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pv := obj.(*corev1.PersistentVolume)
	pv.Status = old.(*corev1.PersistentVolume).Status
	Default(pv)
}

// PrepareForStatusUpdate keeps the spec and stamps lastPhaseTransitionTime
// when the phase changes and the client did not set a new time itself.
func (s Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	pv, o := obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume)
	pv.Spec = o.Spec
	if pv.Status.Phase != o.Status.Phase {
		t := pv.Status.LastPhaseTransitionTime
		if t == nil || (o.Status.LastPhaseTransitionTime != nil && t.Equal(o.Status.LastPhaseTransitionTime)) {
			now := s.now()
			pv.Status.LastPhaseTransitionTime = &now
		}
	}
}

// Validate checks a new volume.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.PersistentVolume).Spec, field.NewPath("spec"))
}

// ValidateUpdate also keeps the volume source and volumeMode immutable,
// and nodeAffinity once set.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	pv, o := obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume)
	spec := field.NewPath("spec")
	errs := ValidateSpec(&pv.Spec, spec)
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, o.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(spec.Child("persistentvolumesource"), "spec.persistentvolumesource is immutable after creation"))
	}
	if !apiequality.Semantic.DeepEqual(pv.Spec.VolumeMode, o.Spec.VolumeMode) {
		errs = append(errs, field.Invalid(spec.Child("volumeMode"), pv.Spec.VolumeMode, "field is immutable"))
	}
	if o.Spec.NodeAffinity != nil && !apiequality.Semantic.DeepEqual(pv.Spec.NodeAffinity, o.Spec.NodeAffinity) {
		errs = append(errs, field.Invalid(spec.Child("nodeAffinity"), pv.Spec.NodeAffinity, "field is immutable"))
	}
	return errs
}

// ValidateStatusUpdate checks the phase.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	phase := obj.(*corev1.PersistentVolume).Status.Phase
	valid := []corev1.PersistentVolumePhase{corev1.VolumePending, corev1.VolumeAvailable, corev1.VolumeBound, corev1.VolumeReleased, corev1.VolumeFailed}
	for _, v := range valid {
		if phase == v || phase == "" {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(field.NewPath("status", "phase"), phase, valid)}
}

// ValidateSpec checks a (defaulted) volume spec: access modes, a storage
// capacity, exactly one volume source, reclaim policy and volume mode.
func ValidateSpec(spec *corev1.PersistentVolumeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, persistentvolumeclaim.ValidateAccessModes(spec.AccessModes, path.Child("accessModes"), false)...)
	if len(spec.AccessModes) == 0 {
		errs = append(errs, field.Required(path.Child("accessModes"), ""))
	}
	capPath := path.Child("capacity")
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(capPath, ""))
	}
	for name, q := range spec.Capacity {
		if name != corev1.ResourceStorage {
			errs = append(errs, field.NotSupported(capPath.Key(string(name)), name, []corev1.ResourceName{corev1.ResourceStorage}))
			continue
		}
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(capPath.Key(string(name)), q.String(), "must be greater than zero"))
		}
	}
	switch spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain:
	default:
		errs = append(errs, field.NotSupported(path.Child("persistentVolumeReclaimPolicy"), spec.PersistentVolumeReclaimPolicy,
			[]corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain}))
	}
	errs = append(errs, persistentvolumeclaim.ValidateStorageClassName(&spec.StorageClassName, path.Child("storageClassName"))...)
	errs = append(errs, persistentvolumeclaim.ValidateVolumeMode(spec.VolumeMode, path.Child("volumeMode"))...)
	errs = append(errs, validateSource(spec, path)...)
	return errs
}

// validateSource checks exactly one volume source is set, and the few
// fields of the common ones that a client is likely to miss.
func validateSource(spec *corev1.PersistentVolumeSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	src := reflect.ValueOf(spec.PersistentVolumeSource)
	typ := src.Type()
	count := 0
	for i := 0; i < src.NumField(); i++ {
		if src.Field(i).IsNil() {
			continue
		}
		count++
		if count > 1 {
			name := jsonName(typ.Field(i))
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 volume type"))
		}
	}
	if count == 0 {
		return field.ErrorList{field.Required(path, "must specify a volume type")}
	}
	if hp := spec.HostPath; hp != nil && hp.Path == "" {
		errs = append(errs, field.Required(path.Child("hostPath", "path"), ""))
	}
	if l := spec.Local; l != nil {
		if l.Path == "" {
			errs = append(errs, field.Required(path.Child("local", "path"), ""))
		}
		if spec.NodeAffinity == nil || spec.NodeAffinity.Required == nil {
			errs = append(errs, field.Required(path.Child("nodeAffinity"), "Local volume requires node affinity"))
		}
	}
	if c := spec.CSI; c != nil {
		if c.Driver == "" {
			errs = append(errs, field.Required(path.Child("csi", "driver"), ""))
		}
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(path.Child("csi", "volumeHandle"), ""))
		}
	}
	if n := spec.NFS; n != nil {
		if n.Server == "" {
			errs = append(errs, field.Required(path.Child("nfs", "server"), ""))
		}
		if n.Path == "" {
			errs = append(errs, field.Required(path.Child("nfs", "path"), ""))
		}
	}
	return errs
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' {
			return tag[:i]
		}
	}
	return tag
}

// FieldSet offers status.phase to field selectors, as upstream does.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"status.phase": string(obj.(*corev1.PersistentVolume).Status.Phase)}
}

// StorageClass is the volume's class: the beta annotation, else
// spec.storageClassName.
func StorageClass(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[persistentvolumeclaim.BetaStorageClassAnnotation]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

// TableColumns are the columns of `kubectl get pv`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Capacity", Type: "string", Description: spec["capacity"]},
		{Name: "Access Modes", Type: "string", Description: spec["accessModes"]},
		{Name: "Reclaim Policy", Type: "string", Description: spec["persistentVolumeReclaimPolicy"]},
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Claim", Type: "string", Description: spec["claimRef"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
		{Name: "VolumeAttributesClass", Type: "string", Description: spec["volumeAttributesClassName"]},
		{Name: "Reason", Type: "string", Description: status["reason"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
}

// TableRow renders one volume.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return nil, fmt.Errorf("persistentvolume table: unexpected object %T", obj)
	}
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	storage := pv.Spec.Capacity[corev1.ResourceStorage]
	vac := "<unset>"
	if pv.Spec.VolumeAttributesClassName != nil && *pv.Spec.VolumeAttributesClassName != "" {
		vac = *pv.Spec.VolumeAttributesClassName
	}
	mode := "<unset>"
	if pv.Spec.VolumeMode != nil {
		mode = string(*pv.Spec.VolumeMode)
	}
	return []interface{}{
		pv.Name, storage.String(), persistentvolumeclaim.AccessModesString(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy), phase, claim, StorageClass(pv), vac,
		pv.Status.Reason, registry.Age(pv.CreationTimestamp), mode,
	}, nil
}
