package apps

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

const (
	msgNonNegative  = "must be greater than or equal to 0"
	msgImmutable    = "field is immutable"
	msgOverReplicas = "cannot be greater than status.replicas"
)

// validateNonNegative reports a negative value at path.
func validateNonNegative(v int64, path *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, msgNonNegative)}
	}
	return nil
}

// validateSelector checks a workload's selector: required, well formed and
// not empty. It returns the parsed selector when valid.
func validateSelector(sel *metav1.LabelSelector, path *field.Path) (labels.Selector, field.ErrorList) {
	if sel == nil {
		return nil, field.ErrorList{field.Required(path, "")}
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		// Upstream says "deployment" for replica sets too.
		errs = append(errs, field.Invalid(path, sel, "empty selector is invalid for deployment"))
	}
	parsed, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		errs = append(errs, field.Invalid(path, sel, "invalid label selector"))
		return nil, errs
	}
	return parsed, errs
}

// validateTemplate checks a pod template owned by a replica set or
// deployment: the selector matches its labels, its metadata and pod spec
// are valid, restartPolicy is Always and activeDeadlineSeconds is unset.
func validateTemplate(t *corev1.PodTemplateSpec, sel labels.Selector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	metaPath := path.Child("metadata")
	if sel != nil && !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(metaPath.Child("labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, metaPath.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, metaPath.Child("annotations"))...)
	specPath := path.Child("spec")
	errs = append(errs, pod.ValidatePodSpec(&t.Spec, specPath)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(specPath.Child("restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(specPath.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

// validateSelectorImmutable reports a changed selector (apps/v1 forbids it).
func validateSelectorImmutable(sel, old *metav1.LabelSelector) field.ErrorList {
	if !apiequality.Semantic.DeepEqual(sel, old) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), sel, msgImmutable)}
	}
	return nil
}

// validateIntOrPercent checks a non-negative int or a "N%" string.
func validateIntOrPercent(v *intstr.IntOrString, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v.StrVal, msg))
		}
	case intstr.Int:
		errs = append(errs, validateNonNegative(int64(v.IntVal), path)...)
	}
	return errs
}

// intOrPercentValue is the number in v (the N of "N%"), or -1 when it does
// not parse.
func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil || !strings.HasSuffix(v.StrVal, "%") {
		return -1
	}
	return n
}

// containerCells are the wide CONTAINERS and IMAGES cells.
func containerCells(spec *corev1.PodSpec) (string, string) {
	names := make([]string, len(spec.Containers))
	images := make([]string, len(spec.Containers))
	for i, c := range spec.Containers {
		names[i] = c.Name
		images[i] = c.Image
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

// selectorString renders a selector as kubectl's SELECTOR column does.
func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "<error>"
	}
	str := s.String()
	if str == "" {
		return "<none>"
	}
	return str
}
