package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

func TestServiceAccount(t *testing.T) {
	tests := []struct {
		name    string
		spec    corev1.PodSpec
		wantSA  string
		wantDep string
	}{
		{"none named: default", corev1.PodSpec{}, "default", "default"},
		{"named", corev1.PodSpec{ServiceAccountName: "builder"}, "builder", "builder"},
		{"only the deprecated field", corev1.PodSpec{DeprecatedServiceAccount: "old"}, "old", "old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.spec}
			a := &Attributes{Operation: Create, Resource: podsGVR, Object: pod}
			if err := NewServiceAccount().Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			got := []string{pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount}
			if diff := cmp.Diff([]string{tc.wantSA, tc.wantDep}, got); diff != "" {
				t.Errorf("service account (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceAccountLeavesOtherObjects(t *testing.T) {
	cm := &corev1.ConfigMap{}
	a := &Attributes{Operation: Create, Resource: configMapsGVR, Object: cm}
	if err := NewServiceAccount().Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&corev1.ConfigMap{}, cm); diff != "" {
		t.Errorf("config map changed (-want +got):\n%s", diff)
	}
}
