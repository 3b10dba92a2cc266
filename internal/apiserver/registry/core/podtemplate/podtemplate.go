// Package podtemplate holds the registry rules of core/v1 pod templates:
// the pod spec's defaults and validation, generation, and the table
// kubectl prints.
package podtemplate

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// Resource describes core/v1 podtemplates.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:        corev1.SchemeGroupVersion,
		Resource:            "podtemplates",
		Kind:                "PodTemplate",
		ListKind:            "PodTemplateList",
		SingularName:        "podtemplate",
		Namespaced:          true,
		StoragePrefix:       "podtemplates",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &corev1.PodTemplate{} },
		NewList:             func() runtime.Object { return &corev1.PodTemplateList{} },
		Strategy:            Strategy{},
	}
}

// Strategy is the registry strategy of pod templates.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate sets generation 1 and applies the pod spec's defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	t := obj.(*corev1.PodTemplate)
	t.Generation = 1
	pod.DefaultPodSpec(&t.Template.Spec)
}

// PrepareForUpdate applies defaults and bumps generation when the template
// changed.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	t, o := obj.(*corev1.PodTemplate), old.(*corev1.PodTemplate)
	pod.DefaultPodSpec(&t.Template.Spec)
	t.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(t.Template, o.Template) {
		t.Generation = o.Generation + 1
	}
}

// Validate checks the template at path "template".
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return pod.ValidatePodTemplateSpec(&obj.(*corev1.PodTemplate).Template, field.NewPath("template"))
}

// ValidateUpdate checks the new template.
func (s Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// TableColumns are the columns of `kubectl get podtemplates`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
		{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."},
	}
}

// TableRow renders one pod template.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	t, ok := obj.(*corev1.PodTemplate)
	if !ok {
		return nil, fmt.Errorf("podtemplate table: unexpected object %T", obj)
	}
	var names, images []string
	for _, c := range t.Template.Spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return []interface{}{t.Name, strings.Join(names, ","), strings.Join(images, ","), labels.FormatLabels(t.Template.Labels)}, nil
}
