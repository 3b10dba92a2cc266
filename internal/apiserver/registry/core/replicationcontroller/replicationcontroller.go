// Package replicationcontroller holds the registry rules of core/v1
// replication controllers: defaults (selector and labels from the
// template), validation, generation and status rules, the scale
// subresource, the status.replicas field selector and kubectl's table.
package replicationcontroller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

const (
	msgNonNegative  = "must be greater than or equal to 0"
	msgOverReplicas = "cannot be greater than status.replicas"
)

// Resource describes core/v1 replicationcontrollers, kept under
// upstream's "controllers" prefix.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "replicationcontrollers",
		Kind:          "ReplicationController",
		ListKind:      "ReplicationControllerList",
		SingularName:  "replicationcontroller",
		ShortNames:    []string{"rc"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "controllers",
		New:           func() runtime.Object { return &corev1.ReplicationController{} },
		NewList:       func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "scale": registry.ScaleSubresource()},
	}
}

// Strategy is the registry strategy of replication controllers; it also
// serves the scale subresource.
type Strategy struct {
	registry.DefaultStrategy
}

var (
	_ registry.Strategy = Strategy{}
	_ registry.Scaler   = Strategy{}
)

// Default applies upstream's defaults: the selector and (when empty) the
// object's labels come from the template's labels, replicas is 1, and the
// pod spec gets its defaults.
func Default(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil && t.Labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = copyMap(t.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = copyMap(t.Labels)
		}
	}
	if rc.Spec.Replicas == nil {
		one := int32(1)
		rc.Spec.Replicas = &one
	}
	if rc.Spec.Template != nil {
		pod.DefaultPodSpec(&rc.Spec.Template.Spec)
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	rc := obj.(*corev1.ReplicationController)
	rc.Status = corev1.ReplicationControllerStatus{}
	rc.Generation = 1
	Default(rc)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	rc, o := obj.(*corev1.ReplicationController), old.(*corev1.ReplicationController)
	rc.Status = o.Status
	Default(rc)
	rc.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(rc.Spec, o.Spec) {
		rc.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*corev1.ReplicationController).Spec = old.(*corev1.ReplicationController).Spec
}

// Validate checks a new replication controller.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.ReplicationController).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks the new spec (a replication controller's selector
// may change).
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateSpec(&obj.(*corev1.ReplicationController).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate checks the counters.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateStatus(&obj.(*corev1.ReplicationController).Status, field.NewPath("status"))
}

func nonNegative(v int64, path *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, msgNonNegative)}
	}
	return nil
}

// ValidateSpec checks a (defaulted) replication controller spec.
func ValidateSpec(spec *corev1.ReplicationControllerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if len(spec.Selector) == 0 {
		errs = append(errs, field.Required(path.Child("selector"), ""))
	}
	if spec.Replicas == nil {
		errs = append(errs, field.Required(path.Child("replicas"), ""))
	} else {
		errs = append(errs, nonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	tPath := path.Child("template")
	t := spec.Template
	if t == nil {
		return append(errs, field.Required(tPath, ""))
	}
	sel := labels.Set(spec.Selector).AsSelector()
	if !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(tPath.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, pod.ValidatePodTemplateSpec(t, tPath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tPath.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicationController is not Supported"))
	}
	return errs
}

// ValidateStatus checks the counters are non-negative and consistent.
func ValidateStatus(st *corev1.ReplicationControllerStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(int64(st.Replicas), path.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(st.FullyLabeledReplicas), path.Child("fullyLabeledReplicas"))...)
	errs = append(errs, nonNegative(int64(st.ReadyReplicas), path.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(int64(st.AvailableReplicas), path.Child("availableReplicas"))...)
	errs = append(errs, nonNegative(st.ObservedGeneration, path.Child("observedGeneration"))...)
	if st.FullyLabeledReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("fullyLabeledReplicas"), st.FullyLabeledReplicas, msgOverReplicas))
	}
	if st.ReadyReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("readyReplicas"), st.ReadyReplicas, msgOverReplicas))
	}
	if st.AvailableReplicas > st.Replicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), st.AvailableReplicas, msgOverReplicas))
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than readyReplicas"))
	}
	return errs
}

// FieldSet offers status.replicas to field selectors, as upstream does.
func (Strategy) FieldSet(obj runtime.Object) fields.Set {
	return fields.Set{"status.replicas": strconv.Itoa(int(obj.(*corev1.ReplicationController).Status.Replicas))}
}

// ScaleOf is the Scale of a replication controller.
func (Strategy) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return nil, fmt.Errorf("replicationcontroller scale: unexpected object %T", obj)
	}
	s := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: rc.Name, Namespace: rc.Namespace, UID: rc.UID,
			ResourceVersion: rc.ResourceVersion, CreationTimestamp: rc.CreationTimestamp,
		},
		Status: autoscalingv1.ScaleStatus{Replicas: rc.Status.Replicas, Selector: labels.SelectorFromSet(rc.Spec.Selector).String()},
	}
	if rc.Spec.Replicas != nil {
		s.Spec.Replicas = *rc.Spec.Replicas
	}
	return s, nil
}

// ApplyScale sets spec.replicas from a valid Scale.
func (Strategy) ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return fmt.Errorf("replicationcontroller scale: unexpected object %T", obj)
	}
	if errs := nonNegative(int64(s.Spec.Replicas), field.NewPath("spec", "replicas")); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: autoscalingv1.GroupName, Kind: "Scale"}, s.Name, errs)
	}
	replicas := s.Spec.Replicas
	rc.Spec.Replicas = &replicas
	return nil
}

// TableColumns are the columns of `kubectl get rc`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Desired", Type: "integer", Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Current", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Ready", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]},
	}
}

// TableRow renders one replication controller.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	rc, ok := obj.(*corev1.ReplicationController)
	if !ok {
		return nil, fmt.Errorf("replicationcontroller table: unexpected object %T", obj)
	}
	desired := int32(0)
	if rc.Spec.Replicas != nil {
		desired = *rc.Spec.Replicas
	}
	var names, images []string
	if rc.Spec.Template != nil {
		for _, c := range rc.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
			images = append(images, c.Image)
		}
	}
	return []interface{}{
		rc.Name, int64(desired), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
		registry.Age(rc.CreationTimestamp), strings.Join(names, ","), strings.Join(images, ","),
		labels.FormatLabels(rc.Spec.Selector),
	}, nil
}
