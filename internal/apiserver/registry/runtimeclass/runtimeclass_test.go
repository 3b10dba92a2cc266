package runtimeclass

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		rc   nodev1.RuntimeClass
		want []string
	}{
		{name: "valid", rc: nodev1.RuntimeClass{Handler: "runc"}},
		{name: "no handler", rc: nodev1.RuntimeClass{}, want: []string{"handler: Invalid value"}},
		{name: "handler not a label", rc: nodev1.RuntimeClass{Handler: "run.c"}, want: []string{"handler: Invalid value"}},
		{name: "negative overhead", rc: nodev1.RuntimeClass{Handler: "kata", Overhead: &nodev1.Overhead{
			PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}}},
			want: []string{"overhead.podFixed[cpu]: Invalid value"}},
		{name: "scheduling", rc: nodev1.RuntimeClass{Handler: "kata", Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"bad key!": "x"},
			Tolerations: []corev1.Toleration{
				{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
				{Operator: corev1.TolerationOpEqual},
				{Key: "k", Operator: "Maybe"},
				{Key: "k", TolerationSeconds: ptr.To[int64](5), Effect: corev1.TaintEffectNoSchedule},
			}}},
			want: []string{
				"scheduling.nodeSelector: Invalid value",
				"scheduling.tolerations[0].operator: Invalid value",
				"scheduling.tolerations[1].operator: Invalid value",
				"scheduling.tolerations[2].operator: Unsupported value",
				"scheduling.tolerations[3].effect: Invalid value",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, &tc.rc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdateAndTable(t *testing.T) {
	old := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}
	next := old.DeepCopy()
	next.Handler = "runc"
	if diff := cmp.Diff([]string{"handler: Invalid value"}, errStrings(Strategy{}.ValidateUpdate(ctx, next, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
	var cols []string
	for _, c := range (Strategy{}).TableColumns() {
		cols = append(cols, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Handler", "Age"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	row, err := Strategy{}.TableRow(old)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"gvisor", "runsc", "<unknown>"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
