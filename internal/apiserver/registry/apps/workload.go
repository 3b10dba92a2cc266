package apps

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// validateWorkloadSelector checks a daemon set's or stateful set's
// selector: required, well formed and not empty ("empty selector is
// invalid for <kind>").
func validateWorkloadSelector(sel *metav1.LabelSelector, kind string, path *field.Path) (labels.Selector, field.ErrorList) {
	if sel == nil {
		return nil, field.ErrorList{field.Required(path, "")}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(path, sel, "empty selector is invalid for "+kind))
	}
	parsed, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, errs
	}
	return parsed, errs
}

// validateWorkloadTemplate checks the pod template of a controller whose
// pods always restart: the selector matches its labels, the template is
// valid, restartPolicy is Always and activeDeadlineSeconds is unset.
func validateWorkloadTemplate(t *corev1.PodTemplateSpec, sel labels.Selector, kind string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel != nil && !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(path.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, pod.ValidatePodTemplateSpec(t, path)...)
	specPath := path.Child("spec")
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(specPath.Child("restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(specPath.Child("activeDeadlineSeconds"), fmt.Sprintf("activeDeadlineSeconds in %s is not Supported", kind)))
	}
	return errs
}

// validateNotOver100Percent reports a percentage above 100%.
func validateNotOver100Percent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if v == nil || v.Type != intstr.String {
		return nil
	}
	if intOrPercentValue(v) > 100 {
		return field.ErrorList{field.Invalid(path, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

// newScale builds the autoscaling/v1 Scale of a workload.
func newScale(meta *metav1.ObjectMeta, replicas *int32, current int32, selector string) *autoscalingv1.Scale {
	s := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv1.SchemeGroupVersion.String(), Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              meta.Name,
			Namespace:         meta.Namespace,
			UID:               meta.UID,
			ResourceVersion:   meta.ResourceVersion,
			CreationTimestamp: meta.CreationTimestamp,
		},
		Status: autoscalingv1.ScaleStatus{Replicas: current, Selector: selector},
	}
	if replicas != nil {
		s.Spec.Replicas = *replicas
	}
	return s
}

// checkScale returns upstream's 422 for a Scale with negative replicas.
func checkScale(s *autoscalingv1.Scale) error {
	if errs := ValidateScale(s); len(errs) > 0 {
		return apierrors.NewInvalid(scaleKind, s.Name, errs)
	}
	return nil
}
