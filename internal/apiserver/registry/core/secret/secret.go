// Package secret holds the registry rules of core/v1 secrets: stringData
// merged into data, type defaulting and the per-type required keys, the
// 1 MiB size limit, the immutable type and `immutable: true`, the "type"
// field selector and the table kubectl prints.
package secret

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// MaxSize is the largest total size of a secret's data.
const MaxSize = 1 << 20

const immutableMessage = "field is immutable when `immutable` is set"

// Resource describes core/v1 secrets.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "secrets",
		Kind:          "Secret",
		ListKind:      "SecretList",
		SingularName:  "secret",
		Namespaced:    true,
		StoragePrefix: "secrets",
		New:           func() runtime.Object { return &corev1.Secret{} },
		NewList:       func() runtime.Object { return &corev1.SecretList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the registry strategy of secrets.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate defaults the type to Opaque and merges stringData into
// data.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	normalize(obj.(*corev1.Secret))
}

// PrepareForUpdate does the same as PrepareForCreate.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	normalize(obj.(*corev1.Secret))
}

// normalize does what upstream's defaulting and v1 conversion do: stringData
// is write-only and overrides data keys of the same name.
func normalize(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = make(map[string][]byte, len(s.StringData))
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// Validate checks keys, size and the keys each type requires.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.Secret))
}

// ValidateUpdate also keeps the type and an immutable secret's data.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	s, oldS := obj.(*corev1.Secret), old.(*corev1.Secret)
	errs := validate(s)
	errs = append(errs, apivalidation.ValidateImmutableField(s.Type, oldS.Type, field.NewPath("type"))...)
	if oldS.Immutable != nil && *oldS.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
		}
		if !equalData(s.Data, oldS.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
		}
	}
	return errs
}

func validate(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	dataPath := field.NewPath("data")
	size := 0
	for key, value := range s.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		size += len(value)
	}
	if size > MaxSize {
		errs = append(errs, field.TooLong(dataPath, "", MaxSize))
	}

	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, requireJSON(s.Data, corev1.DockerConfigKey, dataPath)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, requireJSON(s.Data, corev1.DockerConfigJsonKey, dataPath)...)
	case corev1.SecretTypeBasicAuth:
		_, hasUser := s.Data[corev1.BasicAuthUsernameKey]
		_, hasPassword := s.Data[corev1.BasicAuthPasswordKey]
		if !hasUser && !hasPassword {
			errs = append(errs,
				field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSCertKey), ""))
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			errs = append(errs, field.Required(dataPath.Key(corev1.TLSPrivateKeyKey), ""))
		}
	}
	return errs
}

func requireJSON(data map[string][]byte, key string, dataPath *field.Path) field.ErrorList {
	v, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(dataPath.Key(key), "")}
	}
	var out map[string]interface{}
	if err := json.Unmarshal(v, &out); err != nil {
		return field.ErrorList{field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}

func equalData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// FieldSet adds "type" to the selectable fields.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
}

// TableColumns are the columns of `kubectl get secrets`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	doc := corev1.Secret{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Data", Type: "string", Description: doc["data"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one secret.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("secret table: unexpected object %T", obj)
	}
	return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), registry.Age(s.CreationTimestamp)}, nil
}
