package limitrange

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var ctx = context.Background()

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Detail)
	}
	return out
}

func TestDefaults(t *testing.T) {
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: list("cpu", "2", "memory", "1Gi"), Min: list("cpu", "100m"), Default: list("memory", "512Mi")},
		{Type: corev1.LimitTypePod, Max: list("cpu", "4")},
	}}}
	Strategy{}.PrepareForCreate(ctx, lr)
	want := []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: list("cpu", "2", "memory", "1Gi"), Min: list("cpu", "100m"),
			Default: list("cpu", "2", "memory", "512Mi"), DefaultRequest: list("cpu", "2", "memory", "512Mi")},
		{Type: corev1.LimitTypePod, Max: list("cpu", "4")},
	}
	if diff := cmp.Diff(want, lr.Spec.Limits); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		items []corev1.LimitRangeItem
		want  []string
	}{
		{name: "valid", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: list("cpu", "1"), Min: list("cpu", "100m")}}},
		{name: "min over max", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: list("cpu", "1"), Min: list("cpu", "2")}},
			want: []string{"spec.limits[0].min[cpu]: min value 2 is greater than max value 1"}},
		{name: "default over max", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: list("memory", "1Gi"), Default: list("memory", "2Gi"), DefaultRequest: list("memory", "1Gi")}},
			want: []string{"spec.limits[0].default[memory]: default value 2Gi is greater than max value 1Gi"}},
		{name: "pod with default", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Default: list("cpu", "1")}},
			want: []string{"spec.limits[0].default: may not be specified when `type` is 'Pod'"}},
		{name: "ratio below 1", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: list("cpu", "500m")}},
			want: []string{"spec.limits[0].maxLimitRequestRatio[cpu]: ratio 500m is less than 1"}},
		{name: "duplicate type", items: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod}, {Type: corev1.LimitTypePod}},
			want: []string{"spec.limits[1].type: "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: tc.items}}
			if diff := cmp.Diff(tc.want, errStrings(Strategy{}.Validate(ctx, lr))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTable(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC))
	row, err := Strategy{}.TableRow(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults", CreationTimestamp: created}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"defaults", "2025-03-04T05:06:07Z"}, row); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
