package statefulset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The PVC retention policy works as upstream's, through ownerReferences
// the garbage collector acts on: whenDeleted=Delete makes the set the
// claim's controller owner; whenScaled=Delete makes a scaled-down pod (an
// ordinal beyond the replicas) the claim's controller owner, so the claim
// goes with the condemned pod. Retain owns nothing.

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	del    = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

func retentionPolicy(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return *p
	}
	return appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain}
}

func matchesRef(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == obj.GetName()
}

func hasOwnerRef(target, owner metav1.Object) bool {
	for _, ref := range target.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwnerRef: a reference to an earlier object of the same name.
func hasStaleOwnerRef(claim *corev1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for _, ref := range claim.OwnerReferences {
		if matchesRef(&ref, obj, gvk) {
			return ref.UID != obj.GetUID()
		}
	}
	return false
}

// hasUnexpectedController: another controller (or a stale set or pod)
// owns the claim, so the policy leaves it alone.
func hasUnexpectedController(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	p := retentionPolicy(set)
	if p.WhenScaled == retain && p.WhenDeleted == retain {
		return false
	}
	for _, ref := range claim.OwnerReferences {
		switch {
		case matchesRef(&ref, set, controllerKind):
			if ref.UID != set.UID {
				return true
			}
		case matchesRef(&ref, pod, podKind):
			if ref.UID != pod.UID {
				return true
			}
		case ref.Controller != nil && *ref.Controller:
			return true
		}
	}
	return false
}

func hasNonControllerOwner(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	for _, ref := range claim.OwnerReferences {
		if (ref.UID == set.UID || ref.UID == pod.UID) && (ref.Controller == nil || !*ref.Controller) {
			return true
		}
	}
	return false
}

// claimOwnerUpToDate says whether the claim's references already say what
// the policy wants for this pod.
func claimOwnerUpToDate(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if hasStaleOwnerRef(claim, set, controllerKind) || hasStaleOwnerRef(claim, pod, podKind) {
		return true
	}
	if hasUnexpectedController(claim, set, pod) {
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	}
	if hasNonControllerOwner(claim, set, pod) {
		return false
	}
	p := retentionPolicy(set)
	scaledDown := !inOrdinalRange(pod, set)
	switch {
	case p.WhenScaled == retain && p.WhenDeleted == del:
		return hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	case p.WhenScaled == del && p.WhenDeleted == retain:
		return !hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, pod)
	case p.WhenScaled == del && p.WhenDeleted == del:
		return scaledDown != hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, pod)
	default: // Retain/Retain, or unknown values treated as Retain
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	}
}

// setClaimOwners rewrites the claim's set and pod references for the policy.
func setClaimOwners(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) {
	unexpected := hasUnexpectedController(claim, set, pod)
	var refs []metav1.OwnerReference
	for _, ref := range claim.OwnerReferences {
		if !matchesRef(&ref, set, controllerKind) && !matchesRef(&ref, pod, podKind) {
			refs = append(refs, ref)
		}
	}
	if !unexpected {
		p := retentionPolicy(set)
		scaledDown := !inOrdinalRange(pod, set)
		switch {
		case p.WhenScaled == retain && p.WhenDeleted == del:
			refs = append(refs, *metav1.NewControllerRef(set, controllerKind))
		case p.WhenScaled == del && p.WhenDeleted == retain:
			if scaledDown {
				refs = append(refs, *metav1.NewControllerRef(pod, podKind))
			}
		case p.WhenScaled == del && p.WhenDeleted == del:
			if scaledDown {
				refs = append(refs, *metav1.NewControllerRef(pod, podKind))
			} else {
				refs = append(refs, *metav1.NewControllerRef(set, controllerKind))
			}
		}
	}
	claim.OwnerReferences = refs
}
