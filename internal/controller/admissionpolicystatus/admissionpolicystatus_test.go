package admissionpolicystatus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

// checker answers fixed warnings and counts its calls.
type checker struct {
	warnings []admissionregistrationv1.ExpressionWarning
	calls    int
}

func (c *checker) Check(*admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	c.calls++
	return c.warnings
}

func TestSync(t *testing.T) {
	warning := admissionregistrationv1.ExpressionWarning{FieldRef: "spec.validations[0].expression", Warning: "apps/v1, Kind=Deployment: ERROR: no such key: replica"}
	cases := []struct {
		name       string
		generation int64
		observed   int64
		warnings   []admissionregistrationv1.ExpressionWarning
		wantStatus admissionregistrationv1.ValidatingAdmissionPolicyStatus
		wantCalls  int
	}{
		{
			name: "type-error", generation: 2, observed: 1,
			warnings:   []admissionregistrationv1.ExpressionWarning{warning},
			wantStatus: admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 2, TypeChecking: &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{warning}}},
			wantCalls:  1,
		},
		{
			name: "no-errors", generation: 1,
			wantStatus: admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 1, TypeChecking: &admissionregistrationv1.TypeChecking{}},
			wantCalls:  1,
		},
		{
			name: "already-checked", generation: 3, observed: 3,
			wantStatus: admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 3},
		},
	}
	// One fake clientset for every case (building its apply support is slow).
	var objects []runtime.Object
	for _, tc := range cases {
		objects = append(objects, &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Generation: tc.generation},
			Status:     admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: tc.observed},
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	chk := &checker{}
	c, err := NewWithChecker(controllercontext.Context{Client: client, Informers: factory, Clock: clocktesting.NewFakeClock(time.Now())}, chk)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		t.Fatal("informer did not sync")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chk.warnings, chk.calls = tc.warnings, 0
			if err := c.Sync(ctx, tc.name); err != nil {
				t.Fatal(err)
			}
			got, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantStatus, got.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if chk.calls != tc.wantCalls {
				t.Errorf("type checks %d, want %d", chk.calls, tc.wantCalls)
			}
		})
	}
}

func TestSyncMissingPolicy(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewWithChecker(controllercontext.Context{Client: client, Informers: factory, Clock: clocktesting.NewFakeClock(time.Now())}, &checker{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(context.Background(), "gone"); err != nil {
		t.Errorf("a deleted policy: %v", err)
	}
}
