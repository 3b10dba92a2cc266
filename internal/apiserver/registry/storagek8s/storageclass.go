package storagek8s

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// IsDefaultClassAnnotation marks the cluster's default StorageClass; kubectl
// shows "(default)" after its name. The beta spelling is still honoured.
const (
	IsDefaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	betaIsDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// maxParametersSize is the largest total size of a StorageClass's
// parameters (keys plus values) that upstream accepts.
const maxParametersSize = 256 * 1024

// StorageClassResource describes storage.k8s.io/v1 storageclasses.
func StorageClassResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        storagev1.SchemeGroupVersion,
		Resource:            "storageclasses",
		Kind:                "StorageClass",
		ListKind:            "StorageClassList",
		SingularName:        "storageclass",
		ShortNames:          []string{"sc"},
		StoragePrefix:       "storageclasses",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &storagev1.StorageClass{} },
		NewList:             func() runtime.Object { return &storagev1.StorageClassList{} },
		Strategy:            StorageClassStrategy{},
	}
}

// StorageClassStrategy is the storageclasses strategy.
type StorageClassStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = StorageClassStrategy{}

// DefaultStorageClass applies upstream's v1 defaults: reclaimPolicy Delete
// and volumeBindingMode Immediate.
func DefaultStorageClass(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		p := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &p
	}
	if sc.VolumeBindingMode == nil {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	}
}

// PrepareForCreate applies defaults.
func (StorageClassStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	DefaultStorageClass(obj.(*storagev1.StorageClass))
}

// PrepareForUpdate applies defaults.
func (StorageClassStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	DefaultStorageClass(obj.(*storagev1.StorageClass))
}

// Validate checks a new storage class.
func (StorageClassStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateStorageClass(obj.(*storagev1.StorageClass))
}

// ValidateUpdate also keeps provisioner, parameters, reclaimPolicy and
// volumeBindingMode immutable.
func (StorageClassStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	sc, o := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
	errs := ValidateStorageClass(sc)
	if !apiequality.Semantic.DeepEqual(sc.Parameters, o.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != o.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, o.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
	}
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(sc.VolumeBindingMode, o.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return errs
}

var (
	supportedReclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	supportedBindingModes    = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// ValidateStorageClass checks a (defaulted) storage class.
func ValidateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateProvisioner(sc.Provisioner, field.NewPath("provisioner"))...)
	errs = append(errs, validateParameters(sc.Parameters, field.NewPath("parameters"))...)
	if sc.ReclaimPolicy == nil {
		errs = append(errs, field.Required(field.NewPath("reclaimPolicy"), ""))
	} else if !sets.New(supportedReclaimPolicies...).Has(string(*sc.ReclaimPolicy)) {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *sc.ReclaimPolicy, supportedReclaimPolicies))
	}
	if sc.VolumeBindingMode == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if !sets.New(supportedBindingModes...).Has(string(*sc.VolumeBindingMode)) {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *sc.VolumeBindingMode, supportedBindingModes))
	}
	errs = append(errs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
	return errs
}

func validateProvisioner(p string, path *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(strings.ToLower(p)) {
		errs = append(errs, field.Invalid(path, p, msg))
	}
	return errs
}

func validateParameters(params map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(path, k, "field can not be empty."))
		}
		size += len(k) + len(v)
	}
	if size > maxParametersSize {
		errs = append(errs, field.TooLong(path, "", maxParametersSize))
	}
	return errs
}

func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, term := range terms {
		tp := path.Index(i)
		if len(term.MatchLabelExpressions) == 0 {
			errs = append(errs, field.Required(tp.Child("matchLabelExpressions"), "must contain at least one requirement"))
			continue
		}
		keys := sets.New[string]()
		for j, req := range term.MatchLabelExpressions {
			rp := tp.Child("matchLabelExpressions").Index(j)
			for _, msg := range validation.IsQualifiedName(req.Key) {
				errs = append(errs, field.Invalid(rp.Child("key"), req.Key, msg))
			}
			if keys.Has(req.Key) {
				errs = append(errs, field.Duplicate(rp.Child("key"), req.Key))
			}
			keys.Insert(req.Key)
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must specify as least one value"))
			}
			values := sets.New[string]()
			for k, v := range req.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(rp.Child("values").Index(k), v))
				}
				values.Insert(v)
			}
		}
	}
	return errs
}

// TableColumns are kubectl's columns for storage classes.
func (StorageClassStrategy) TableColumns() []metav1.TableColumnDefinition {
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Provisioner", Type: "string", Description: doc["provisioner"]},
		{Name: "ReclaimPolicy", Type: "string", Description: doc["reclaimPolicy"]},
		{Name: "VolumeBindingMode", Type: "string", Description: doc["volumeBindingMode"]},
		{Name: "AllowVolumeExpansion", Type: "string", Description: doc["allowVolumeExpansion"]},
		ageColumn(),
	}
}

// TableRow renders one storage class; the default class is marked
// "(default)".
func (StorageClassStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	sc := obj.(*storagev1.StorageClass)
	name := sc.Name
	if IsDefaultClass(sc) {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	mode := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	return []interface{}{name, sc.Provisioner, reclaim, mode, expand, registry.Age(sc.CreationTimestamp)}, nil
}

// IsDefaultClass reports whether sc carries the default-class annotation
// set to "true".
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[IsDefaultClassAnnotation] == "true" || sc.Annotations[betaIsDefaultClassAnnotation] == "true"
}
