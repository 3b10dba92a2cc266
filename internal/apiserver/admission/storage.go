package admission

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// The finalizers StorageObjectInUseProtection adds; the pvc-protection
// and pv-protection controllers remove them once nothing uses the object.
const (
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
)

var storageClassesGVR = storagev1.SchemeGroupVersion.WithResource("storageclasses")

// DefaultStorageClass gives a new PersistentVolumeClaim that names no
// class the default StorageClass (annotated
// storageclass.kubernetes.io/is-default-class, or its beta form; the
// newest when several are), as upstream's plugin of that name does.
type DefaultStorageClass struct{ r registry.Reader }

var _ Mutator = DefaultStorageClass{}

// NewDefaultStorageClass reads StorageClasses through r.
func NewDefaultStorageClass(r registry.Reader) DefaultStorageClass { return DefaultStorageClass{r: r} }

// Name is the upstream name.
func (DefaultStorageClass) Name() string { return "DefaultStorageClass" }

// Handles creates.
func (DefaultStorageClass) Handles(op Operation) bool { return op == Create }

// Admit sets spec.storageClassName.
func (d DefaultStorageClass) Admit(ctx context.Context, a *Attributes) error {
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || a.Subresource != "" || pvc.Spec.StorageClassName != nil {
		return nil
	}
	if _, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return nil
	}
	list := &storagev1.StorageClassList{}
	if err := d.r.List(ctx, storageClassesGVR, "", false, list); err != nil {
		return forbidden(a, err)
	}
	var defaults []*storagev1.StorageClass
	for i := range list.Items {
		an := list.Items[i].Annotations
		if an["storageclass.kubernetes.io/is-default-class"] == "true" || an["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
			defaults = append(defaults, &list.Items[i])
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	sort.Slice(defaults, func(i, j int) bool {
		ti, tj := defaults[i].CreationTimestamp, defaults[j].CreationTimestamp
		if ti.Equal(&tj) {
			return defaults[i].Name < defaults[j].Name
		}
		return ti.After(tj.Time)
	})
	name := defaults[0].Name
	pvc.Spec.StorageClassName = &name
	return nil
}

// StorageObjectInUseProtection adds the kubernetes.io/pvc-protection
// finalizer to new PersistentVolumeClaims and kubernetes.io/pv-protection
// to new PersistentVolumes, as upstream's plugin of that name does, so
// that a claim a pod uses, or a volume a claim is bound to, stays until
// it is no longer used. (VolumeAttributesClasses' vac-protection is not
// added.)
type StorageObjectInUseProtection struct{}

var _ Mutator = StorageObjectInUseProtection{}

// Name is the upstream name.
func (StorageObjectInUseProtection) Name() string { return "StorageObjectInUseProtection" }

// Handles creates.
func (StorageObjectInUseProtection) Handles(op Operation) bool { return op == Create }

// Admit adds the finalizer.
func (StorageObjectInUseProtection) Admit(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	switch o := a.Object.(type) {
	case *corev1.PersistentVolumeClaim:
		o.Finalizers = addFinalizer(o.Finalizers, PVCProtectionFinalizer)
	case *corev1.PersistentVolume:
		o.Finalizers = addFinalizer(o.Finalizers, PVProtectionFinalizer)
	}
	return nil
}

func addFinalizer(fs []string, f string) []string {
	for _, x := range fs {
		if x == f {
			return fs
		}
	}
	return append(fs, f)
}
