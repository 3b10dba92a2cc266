// Package binding holds the core/v1 bindings resource: create-only, a
// Binding POSTed to /api/v1/namespaces/{ns}/bindings assigns the pod it
// names to its target node, exactly as pods/{name}/binding does (the form
// older schedulers use). Nothing is stored under bindings.
package binding

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists core/v1 bindings (beside the core group's other
// resources in package core).
func Resources(deps registry.Deps) []registry.Resource {
	return []registry.Resource{Resource(deps.BindPod)}
}

// Resource describes core/v1 bindings; bind does the binding (nil: the
// resource answers 503).
func Resource(bind func(ctx context.Context, b *corev1.Binding) error) registry.Resource {
	return registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "bindings",
		Kind:         "Binding",
		SingularName: "binding",
		Namespaced:   true,
		New:          func() runtime.Object { return &corev1.Binding{} },
		Strategy:     Strategy{bind: bind},
	}
}

// Strategy is the bindings strategy: create only.
type Strategy struct {
	registry.DefaultStrategy
	bind func(ctx context.Context, b *corev1.Binding) error
}

var (
	_ registry.VirtualCreater = Strategy{}
	_ registry.VerbLister     = Strategy{}
)

// Verbs: create only.
func (Strategy) Verbs() []string { return []string{"create"} }

// CreateVirtual binds the pod metadata.name names; the answer is a
// Success Status, as for pods/binding.
func (s Strategy) CreateVirtual(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	b := obj.(*corev1.Binding)
	if b.Name == "" {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if s.bind == nil {
		return nil, apierrors.NewServiceUnavailable("bindings are not served")
	}
	if err := s.bind(ctx, b); err != nil {
		return nil, err
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess, Code: http.StatusCreated,
	}, nil
}
