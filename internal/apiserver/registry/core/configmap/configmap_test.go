package configmap

import (
	"context"
	"strings"
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

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cm   corev1.ConfigMap
		want []string
	}{
		{name: "valid", cm: corev1.ConfigMap{Data: map[string]string{"app.conf": "x", "KEY_1": "y"}, BinaryData: map[string][]byte{"bin": {1}}}},
		{name: "bad key", cm: corev1.ConfigMap{Data: map[string]string{"a/b": "x"}}, want: []string{"FieldValueInvalid data[a/b]"}},
		{name: "dot dot key", cm: corev1.ConfigMap{BinaryData: map[string][]byte{"..": nil}}, want: []string{"FieldValueInvalid binaryData[..]"}},
		{name: "duplicate across bags", cm: corev1.ConfigMap{Data: map[string]string{"k": "x"}, BinaryData: map[string][]byte{"k": {1}}}, want: []string{"FieldValueInvalid data[k]"}},
		{name: "too big", cm: corev1.ConfigMap{Data: map[string]string{"a": strings.Repeat("x", MaxSize), "b": "y"}}, want: []string{"FieldValueTooLong []"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(Strategy{}.Validate(context.Background(), &tc.cm))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdateImmutable(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name     string
		old, new corev1.ConfigMap
		want     []string
	}{
		{name: "mutable", old: corev1.ConfigMap{Data: map[string]string{"a": "1"}}, new: corev1.ConfigMap{Data: map[string]string{"a": "2"}}},
		{name: "becomes immutable", old: corev1.ConfigMap{}, new: corev1.ConfigMap{Immutable: &yes}},
		{name: "immutable, labels only", old: corev1.ConfigMap{Immutable: &yes, Data: map[string]string{"a": "1"}},
			new: corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"x": "y"}}, Immutable: &yes, Data: map[string]string{"a": "1"}}},
		{name: "immutable data change", old: corev1.ConfigMap{Immutable: &yes, Data: map[string]string{"a": "1"}},
			new:  corev1.ConfigMap{Immutable: &yes, Data: map[string]string{"a": "2"}, BinaryData: map[string][]byte{"b": nil}},
			want: []string{"FieldValueForbidden data", "FieldValueForbidden binaryData"}},
		{name: "unset immutable", old: corev1.ConfigMap{Immutable: &yes}, new: corev1.ConfigMap{Immutable: &no}, want: []string{"FieldValueForbidden immutable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(Strategy{}.ValidateUpdate(context.Background(), &tc.new, &tc.old))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTableRow(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(time.Now().Add(-10 * time.Second))},
		Data: map[string]string{"a": "", "b": ""}, BinaryData: map[string][]byte{"c": nil}}
	got, err := Strategy{}.TableRow(cm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"c", int64(3), "10s"}, got); diff != "" {
		t.Error(diff)
	}
}
