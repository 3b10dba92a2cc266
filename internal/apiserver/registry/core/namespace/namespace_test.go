package namespace

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestPrepareForCreate(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []corev1.FinalizerName
		want       []corev1.FinalizerName
	}{
		{name: "none", want: []corev1.FinalizerName{"kubernetes"}},
		{name: "other", finalizers: []corev1.FinalizerName{"example.com/x"}, want: []corev1.FinalizerName{"example.com/x", "kubernetes"}},
		{name: "already", finalizers: []corev1.FinalizerName{"kubernetes"}, want: []corev1.FinalizerName{"kubernetes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
				Spec:       corev1.NamespaceSpec{Finalizers: tc.finalizers},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
			}
			Strategy{}.PrepareForCreate(context.Background(), ns)
			want := &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"kubernetes.io/metadata.name": "team-a"}},
				Spec:       corev1.NamespaceSpec{Finalizers: tc.want},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			}
			if diff := cmp.Diff(want, ns); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateRules(t *testing.T) {
	old := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "a"}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	upd := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	Strategy{}.PrepareForUpdate(context.Background(), upd, old)
	if diff := cmp.Diff(old.Spec, upd.Spec); diff != "" {
		t.Errorf("spec changed by update: %s", diff)
	}
	if upd.Status.Phase != corev1.NamespaceActive || upd.Labels["kubernetes.io/metadata.name"] != "a" || upd.Labels["x"] != "y" {
		t.Errorf("update: %+v", upd)
	}

	st := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	Strategy{}.PrepareForStatusUpdate(context.Background(), st, old)
	if diff := cmp.Diff(old.Spec, st.Spec); diff != "" {
		t.Errorf("spec changed by status update: %s", diff)
	}
	if got := errorStrings(Strategy{}.ValidateStatusUpdate(context.Background(), st, old)); len(got) != 1 {
		t.Errorf("Terminating without deletionTimestamp accepted: %v", got)
	}
}

func TestFinalize(t *testing.T) {
	old := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes", "example.com/x"}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
	req := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"changed": "yes"}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/x"}}}
	got, errs := Finalize(old, req)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := old.DeepCopy()
	want.Spec.Finalizers = []corev1.FinalizerName{"example.com/x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	_, errs = Finalize(old, &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"bogus"}}})
	if diff := cmp.Diff([]string{"FieldValueInvalid spec.finalizers[0]"}, errorStrings(errs)); diff != "" {
		t.Errorf("invalid finalizer: %s", diff)
	}
}

func TestMarkForDeletion(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	ns := &corev1.Namespace{Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	if !MarkForDeletion(ns, now) || ns.DeletionTimestamp == nil || !ns.DeletionTimestamp.Equal(&now) || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("first delete: %+v", ns)
	}
	if !MarkForDeletion(ns, metav1.NewTime(time.Unix(2000, 0))) || !ns.DeletionTimestamp.Equal(&now) {
		t.Errorf("second delete with finalizers: %+v", ns)
	}
	ns.Spec.Finalizers = nil
	if MarkForDeletion(ns, now) {
		t.Errorf("delete without finalizers kept the namespace")
	}
}

func TestValidateName(t *testing.T) {
	if len(Strategy{}.ValidateName("a.b", false)) == 0 {
		t.Errorf("dotted name accepted")
	}
	if len(Strategy{}.ValidateName("team-a", false)) != 0 {
		t.Errorf("label name refused")
	}
}

func TestTableRow(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: metav1.NewTime(time.Now().Add(-3 * time.Minute))}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	got, err := Strategy{}.TableRow(ns)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"a", "Active", "3m"}, got); diff != "" {
		t.Error(diff)
	}
}
