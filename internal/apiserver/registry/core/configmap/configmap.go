// Package configmap holds the registry rules of core/v1 config maps: key
// names, the 1 MiB size limit, `immutable: true`, and the table kubectl
// prints.
package configmap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// MaxSize is the largest total size of a config map's data and binaryData.
const MaxSize = 1 << 20

// ImmutableMessage is upstream's detail for a change to an immutable field
// of a config map or secret marked `immutable: true`.
const ImmutableMessage = "field is immutable when `immutable` is set"

// Resource describes core/v1 configmaps.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "configmaps",
		Kind:          "ConfigMap",
		ListKind:      "ConfigMapList",
		SingularName:  "configmap",
		ShortNames:    []string{"cm"},
		Namespaced:    true,
		StoragePrefix: "configmaps",
		New:           func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:       func() runtime.Object { return &corev1.ConfigMapList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the registry strategy of config maps.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// Validate checks keys and size.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*corev1.ConfigMap))
}

// ValidateUpdate also refuses changes to an immutable config map.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	cm, oldCM := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
	errs := validate(cm)
	if oldCM.Immutable != nil && *oldCM.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), ImmutableMessage))
		}
		if !equalMaps(cm.Data, oldCM.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), ImmutableMessage))
		}
		if !equalBinary(cm.BinaryData, oldCM.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), ImmutableMessage))
		}
	}
	return errs
}

func validate(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	dataPath, binPath := field.NewPath("data"), field.NewPath("binaryData")
	for key, value := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, "duplicate of key present in binaryData"))
		}
		size += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(binPath.Key(key), key, msg))
		}
		size += len(value)
	}
	if size > MaxSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", MaxSize))
	}
	return errs
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			return false
		}
	}
	return true
}

func equalBinary(a, b map[string][]byte) bool {
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

// TableColumns are the columns of `kubectl get configmaps`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// TableRow renders one config map: DATA counts data and binaryData keys.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("configmap table: unexpected object %T", obj)
	}
	return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), registry.Age(cm.CreationTimestamp)}, nil
}
