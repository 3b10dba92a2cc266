package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

func TestPriority(t *testing.T) {
	never := corev1.PreemptNever
	lower := corev1.PreemptLowerPriority
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	quiet := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, Value: 10, PreemptionPolicy: &never}
	defaultLow := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-low"}, Value: 5, GlobalDefault: true}
	defaultHigh := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "default-high"}, Value: 50, GlobalDefault: true}

	type result struct {
		Priority  *int32
		ClassName string
		Policy    *corev1.PreemptionPolicy
	}
	tests := []struct {
		name      string
		classes   []*schedulingv1.PriorityClass
		spec      corev1.PodSpec
		want      result
		wantError func(error) bool
	}{
		{"no class, no default: untouched", []*schedulingv1.PriorityClass{high}, corev1.PodSpec{}, result{}, nil},
		{"named class", []*schedulingv1.PriorityClass{high}, corev1.PodSpec{PriorityClassName: "high"},
			result{ptr.To[int32](1000), "high", &lower}, nil},
		{"named class with its preemption policy", []*schedulingv1.PriorityClass{quiet}, corev1.PodSpec{PriorityClassName: "quiet"},
			result{ptr.To[int32](10), "quiet", &never}, nil},
		{"no class: the lowest global default", []*schedulingv1.PriorityClass{defaultHigh, defaultLow}, corev1.PodSpec{},
			result{ptr.To[int32](5), "default-low", &lower}, nil},
		{"missing class", nil, corev1.PodSpec{PriorityClassName: "nope"}, result{}, apierrors.IsForbidden},
		{"priority contradicting the class", []*schedulingv1.PriorityClass{high}, corev1.PodSpec{PriorityClassName: "high", Priority: ptr.To[int32](7)},
			result{}, apierrors.IsForbidden},
		{"policy contradicting the class", []*schedulingv1.PriorityClass{quiet}, corev1.PodSpec{PriorityClassName: "quiet", PreemptionPolicy: &lower},
			result{}, apierrors.IsForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &objects{byGVR: map[schema.GroupVersionResource][]runtime.Object{}}
			for _, c := range tc.classes {
				r.byGVR[priorityClassesGVR] = append(r.byGVR[priorityClassesGVR], c)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: tc.spec}
			err := NewPriority(r).Admit(context.Background(), &Attributes{Operation: Create, Resource: podsGVR, Namespace: "ns", Object: pod})
			if tc.wantError != nil {
				if err == nil || !tc.wantError(err) {
					t.Fatalf("got %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := result{pod.Spec.Priority, pod.Spec.PriorityClassName, pod.Spec.PreemptionPolicy}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("priority (-want +got):\n%s", diff)
			}
		})
	}
}
