package storagemigration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	svmv1 "k8s.io/api/storagemigration/v1"
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

func cond(t svmv1.MigrationConditionType, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: s, Reason: "R", LastTransitionTime: metav1.Now()}
}

func TestStatusRules(t *testing.T) {
	base := &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}
	tests := []struct {
		name     string
		old, new svmv1.StorageVersionMigrationStatus
		want     []string
	}{
		{"running", svmv1.StorageVersionMigrationStatus{}, svmv1.StorageVersionMigrationStatus{ResourceVersion: "42",
			Conditions: []metav1.Condition{cond(svmv1.MigrationRunning, metav1.ConditionTrue)}}, nil},
		{"resourceVersion not a number", svmv1.StorageVersionMigrationStatus{}, svmv1.StorageVersionMigrationStatus{ResourceVersion: "x"},
			[]string{"FieldValueInvalid status.resourceVersion"}},
		{"resourceVersion changed", svmv1.StorageVersionMigrationStatus{ResourceVersion: "42"}, svmv1.StorageVersionMigrationStatus{ResourceVersion: "43"},
			[]string{"FieldValueInvalid status.resourceVersion"}},
		{"succeeded and failed", svmv1.StorageVersionMigrationStatus{}, svmv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{
			cond(svmv1.MigrationSucceeded, metav1.ConditionTrue), cond(svmv1.MigrationFailed, metav1.ConditionTrue)}},
			[]string{"FieldValueInvalid status.conditions"}},
		{"success taken back", svmv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{cond(svmv1.MigrationSucceeded, metav1.ConditionTrue)}},
			svmv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{cond(svmv1.MigrationSucceeded, metav1.ConditionFalse)}},
			[]string{"FieldValueInvalid status.conditions"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, next := base.DeepCopy(), base.DeepCopy()
			old.Status, next.Status = tc.old, tc.new
			if diff := cmp.Diff(tc.want, errorStrings(Strategy{}.ValidateStatusUpdate(context.Background(), next, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	row, err := Strategy{}.TableRow(&svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: base.Spec,
		Status: svmv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{cond(svmv1.MigrationRunning, metav1.ConditionTrue)}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"m", "deployments.apps", "Running"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	bad := base.DeepCopy()
	bad.Spec.Resource.Resource = ""
	if diff := cmp.Diff([]string{"FieldValueRequired spec.resource.resource"}, errorStrings(Strategy{}.Validate(context.Background(), bad))); diff != "" {
		t.Errorf("validate (-want +got):\n%s", diff)
	}
}
