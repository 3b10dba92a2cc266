package admission

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

func TestNamespaceLifecycle(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	namespaces := newObjects(namespacesGVR,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "active"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "terminating"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "marked", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
	)
	tests := []struct {
		name string
		a    Attributes
		// want is the check that the error must pass (nil: no error).
		want func(error) bool
	}{
		{"create in an active namespace", Attributes{Operation: Create, Resource: configMapsGVR, Namespace: "active"}, nil},
		{"create in a missing namespace", Attributes{Operation: Create, Resource: configMapsGVR, Namespace: "missing"}, apierrors.IsNotFound},
		{"create in a terminating namespace", Attributes{Operation: Create, Resource: configMapsGVR, Namespace: "terminating"}, apierrors.IsForbidden},
		{"create in a namespace marked for deletion", Attributes{Operation: Create, Resource: configMapsGVR, Namespace: "marked"}, apierrors.IsForbidden},
		{"update in a terminating namespace", Attributes{Operation: Update, Resource: configMapsGVR, Namespace: "terminating"}, nil},
		{"cluster-scoped create", Attributes{Operation: Create, Resource: corev1.SchemeGroupVersion.WithResource("nodes")}, nil},
		{"create of a namespace", Attributes{Operation: Create, Resource: namespacesGVR, Name: "missing"}, nil},
		{"delete of kube-system", Attributes{Operation: Delete, Resource: namespacesGVR, Name: "kube-system"}, isForbiddenWith(`namespaces "kube-system" is forbidden: this namespace may not be deleted`)},
		{"delete of default", Attributes{Operation: Delete, Resource: namespacesGVR, Name: "default"}, isForbiddenWith(`namespaces "default" is forbidden: this namespace may not be deleted`)},
		{"delete of kube-public", Attributes{Operation: Delete, Resource: namespacesGVR, Name: "kube-public"}, apierrors.IsForbidden},
		{"delete of another namespace", Attributes{Operation: Delete, Resource: namespacesGVR, Name: "active"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewNamespaceLifecycle(namespaces, clocktesting.NewFakePassiveClock(now.Time))
			var err error
			if l.Handles(tc.a.Operation) {
				err = l.Admit(context.Background(), &tc.a)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != nil && (err == nil || !tc.want(err)):
				t.Errorf("got %v, want a refusal of the expected kind", err)
			}
		})
	}
}

// TestNamespaceLifecycleLiveLookup checks that after a namespace's delete
// its lookups skip the cache for LiveLookupWindow, and then use it again.
func TestNamespaceLifecycleLiveLookup(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	namespaces := newObjects(namespacesGVR, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	l := NewNamespaceLifecycle(namespaces, clk)
	ctx := context.Background()
	create := func() {
		t.Helper()
		if err := l.Admit(ctx, &Attributes{Operation: Create, Resource: configMapsGVR, Namespace: "ns"}); err != nil {
			t.Fatal(err)
		}
	}
	create()
	if err := l.Admit(ctx, &Attributes{Operation: Delete, Resource: namespacesGVR, Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	create() // within the window: live
	clk.SetTime(clk.Now().Add(LiveLookupWindow))
	create() // window over: the cache again
	if diff := cmp.Diff([]string{"ns"}, namespaces.live); diff != "" {
		t.Errorf("live lookups (-want +got):\n%s", diff)
	}
}

// isForbiddenWith checks for a 403 with exactly this message.
func isForbiddenWith(msg string) func(error) bool {
	return func(err error) bool { return apierrors.IsForbidden(err) && err.Error() == msg }
}
