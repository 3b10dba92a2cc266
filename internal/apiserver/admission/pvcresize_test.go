package admission

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestPersistentVolumeClaimResize(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	growable := class("growable", t0, false)
	growable.AllowVolumeExpansion = ptr.To(true)
	fixed := class("fixed", t0, false)
	r := newObjects(storageClassesGVR, growable, fixed)
	claim := func(cls, size string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(cls),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	tests := []struct {
		name     string
		old, pvc *corev1.PersistentVolumeClaim
		sub      string
		wantMsg  string // "" means admitted
	}{
		{name: "grow with a class that allows it", old: claim("growable", "1Gi", corev1.ClaimBound), pvc: claim("growable", "2Gi", corev1.ClaimBound)},
		{name: "same size: not a resize", old: claim("fixed", "1Gi", corev1.ClaimBound), pvc: claim("fixed", "1Gi", corev1.ClaimBound)},
		{name: "shrink: left to validation", old: claim("fixed", "2Gi", corev1.ClaimBound), pvc: claim("fixed", "1Gi", corev1.ClaimBound)},
		{name: "grow with a class that does not", old: claim("fixed", "1Gi", corev1.ClaimBound), pvc: claim("fixed", "2Gi", corev1.ClaimBound),
			wantMsg: `persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`},
		{name: "grow an unbound claim", old: claim("growable", "1Gi", corev1.ClaimPending), pvc: claim("growable", "2Gi", corev1.ClaimPending),
			wantMsg: `persistentvolumeclaims "data" is forbidden: Only bound persistent volume claims can be expanded`},
		{name: "grow with a missing class", old: claim("gone", "1Gi", corev1.ClaimBound), pvc: claim("gone", "2Gi", corev1.ClaimBound),
			wantMsg: `persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`},
		{name: "the status subresource is not checked", old: claim("fixed", "1Gi", corev1.ClaimBound), pvc: claim("fixed", "2Gi", corev1.ClaimBound), sub: "status"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: Update, Resource: pvcsRes, Subresource: tc.sub, Namespace: "ns", Name: "data", Object: tc.pvc, OldObject: tc.old}
			err := NewPersistentVolumeClaimResize(r).Validate(context.Background(), a)
			switch {
			case tc.wantMsg == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantMsg != "" && (!apierrors.IsForbidden(err) || err.Error() != tc.wantMsg):
				t.Fatalf("got %v, want 403 %q", err, tc.wantMsg)
			}
		})
	}
}
