package apps

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var scaleKind = schema.GroupKind{Group: autoscalingv1.GroupName, Kind: "Scale"}

// ScaleOf turns a Deployment or ReplicaSet into its autoscaling/v1 Scale:
// spec.replicas, status.replicas and status.selector (the selector as a
// string). The Scale carries the object's name, namespace, UID,
// resourceVersion and creationTimestamp, as upstream's does.
func ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var (
		meta     metav1.ObjectMeta
		replicas *int32
		current  int32
		selector *metav1.LabelSelector
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, replicas, current, selector = o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
	case *appsv1.ReplicaSet:
		meta, replicas, current, selector = o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector
	default:
		return nil, fmt.Errorf("scale: unsupported object %T", obj)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("scale %s: selector: %w", meta.Name, err)
	}
	s := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              meta.Name,
			Namespace:         meta.Namespace,
			UID:               meta.UID,
			ResourceVersion:   meta.ResourceVersion,
			CreationTimestamp: meta.CreationTimestamp,
		},
		Status: autoscalingv1.ScaleStatus{Replicas: current, Selector: sel.String()},
	}
	if replicas != nil {
		s.Spec.Replicas = *replicas
	}
	return s, nil
}

// ValidateScale checks a Scale: spec.replicas must not be negative.
func ValidateScale(s *autoscalingv1.Scale) field.ErrorList {
	return validateNonNegative(int64(s.Spec.Replicas), field.NewPath("spec", "replicas"))
}

// ApplyScale validates s and sets its spec.replicas on the Deployment or
// ReplicaSet obj. An invalid Scale gives a 422 error for kind Scale of
// group autoscaling. The caller then writes obj through the main resource's
// update path (PrepareForUpdate bumps generation), using s's
// resourceVersion, when set, as the precondition.
func ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	if errs := ValidateScale(s); len(errs) > 0 {
		return apierrors.NewInvalid(scaleKind, s.Name, errs)
	}
	replicas := s.Spec.Replicas
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Replicas = &replicas
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &replicas
	default:
		return fmt.Errorf("scale: unsupported object %T", obj)
	}
	return nil
}

// ScaleOf serves deployments/scale.
func (DeploymentStrategy) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	return ScaleOf(obj)
}

// ApplyScale serves updates of deployments/scale.
func (DeploymentStrategy) ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	return ApplyScale(obj, s)
}

// ScaleOf serves replicasets/scale.
func (ReplicaSetStrategy) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	return ScaleOf(obj)
}

// ApplyScale serves updates of replicasets/scale.
func (ReplicaSetStrategy) ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	return ApplyScale(obj, s)
}
