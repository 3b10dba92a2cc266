package secret

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	s := &corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "override", "c": "3"}}
	Strategy{}.PrepareForCreate(context.Background(), s)
	want := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a": []byte("1"), "b": []byte("override"), "c": []byte("3")}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		s    corev1.Secret
		want []string
	}{
		{name: "opaque", s: corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"x.y": nil}}},
		{name: "bad key", s: corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"a b": nil}}, want: []string{"FieldValueInvalid data[a b]"}},
		{name: "tls missing key", s: corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil}}, want: []string{"FieldValueRequired data[tls.key]"}},
		{name: "basic auth empty", s: corev1.Secret{Type: corev1.SecretTypeBasicAuth}, want: []string{"FieldValueRequired data[username]", "FieldValueRequired data[password]"}},
		{name: "dockerconfigjson bad json", s: corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{")}},
			want: []string{"FieldValueInvalid data[.dockerconfigjson]"}},
		{name: "sa token needs annotation", s: corev1.Secret{Type: corev1.SecretTypeServiceAccountToken},
			want: []string{"FieldValueRequired metadata.annotations[kubernetes.io/service-account.name]"}},
		{name: "custom type", s: corev1.Secret{Type: "example.com/thing"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(Strategy{}.Validate(context.Background(), &tc.s))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	yes := true
	tests := []struct {
		name     string
		old, new corev1.Secret
		want     []string
	}{
		{name: "data change", old: corev1.Secret{Type: "Opaque", Data: map[string][]byte{"a": []byte("1")}}, new: corev1.Secret{Type: "Opaque", Data: map[string][]byte{"a": []byte("2")}}},
		{name: "type change", old: corev1.Secret{Type: "Opaque"}, new: corev1.Secret{Type: "example.com/x"}, want: []string{"FieldValueInvalid type"}},
		{name: "immutable", old: corev1.Secret{Type: "Opaque", Immutable: &yes, Data: map[string][]byte{"a": []byte("1")}},
			new: corev1.Secret{Type: "Opaque", Data: map[string][]byte{"a": []byte("2")}}, want: []string{"FieldValueForbidden immutable", "FieldValueForbidden data"}},
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

func TestFieldSetAndTable(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: metav1.NewTime(time.Now().Add(-90 * time.Minute))},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil}}
	if diff := cmp.Diff(fields.Set{"type": "kubernetes.io/tls"}, Strategy{}.FieldSet(s)); diff != "" {
		t.Error(diff)
	}
	got, err := Strategy{}.TableRow(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"s", "kubernetes.io/tls", int64(2), "90m"}, got); diff != "" {
		t.Error(diff)
	}
}
