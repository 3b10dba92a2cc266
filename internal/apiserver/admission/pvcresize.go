package admission

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// PersistentVolumeClaimResize refuses to grow a claim unless it is bound
// and its StorageClass says allowVolumeExpansion, as upstream's plugin of
// that name does. Shrinking (back towards status.capacity, after a failed
// expansion) is validation's business, not this plugin's.
type PersistentVolumeClaimResize struct{ r registry.Reader }

var _ Validator = PersistentVolumeClaimResize{}

// NewPersistentVolumeClaimResize reads StorageClasses through r.
func NewPersistentVolumeClaimResize(r registry.Reader) PersistentVolumeClaimResize {
	return PersistentVolumeClaimResize{r: r}
}

// Name is the upstream name.
func (PersistentVolumeClaimResize) Name() string { return "PersistentVolumeClaimResize" }

// Handles updates.
func (PersistentVolumeClaimResize) Handles(op Operation) bool { return op == Update }

// Validate refuses a larger storage request the claim's class does not
// allow.
func (p PersistentVolumeClaimResize) Validate(ctx context.Context, a *Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) <= 0 {
		return nil
	}
	if old.Status.Phase != corev1.ClaimBound {
		return forbidden(a, errors.New("Only bound persistent volume claims can be expanded"))
	}
	if !p.allowed(ctx, pvc, old) {
		return forbidden(a, errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	}
	return nil
}

func (p PersistentVolumeClaimResize) allowed(ctx context.Context, pvc, old *corev1.PersistentVolumeClaim) bool {
	class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if class == "" || class != storagehelpers.GetPersistentVolumeClaimClass(old) {
		return false
	}
	sc := &storagev1.StorageClass{}
	if err := p.r.Get(ctx, storageClassesGVR, "", class, false, sc); err != nil {
		return false
	}
	return sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
}
