package apps

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/persistentvolumeclaim"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
)

// StatefulSetResource describes apps/v1 statefulsets.
func StatefulSetResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  appsv1.SchemeGroupVersion,
		Resource:      "statefulsets",
		Kind:          "StatefulSet",
		ListKind:      "StatefulSetList",
		SingularName:  "statefulset",
		ShortNames:    []string{"sts"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "statefulsets",
		New:           func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList:       func() runtime.Object { return &appsv1.StatefulSetList{} },
		Strategy:      StatefulSetStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource(), "scale": registry.ScaleSubresource()},
	}
}

// StatefulSetStrategy is the statefulsets strategy; it also serves the
// scale subresource.
type StatefulSetStrategy struct {
	registry.DefaultStrategy
}

var (
	_ registry.Strategy = StatefulSetStrategy{}
	_ registry.Scaler   = StatefulSetStrategy{}
)

// DefaultStatefulSet applies upstream's apps/v1 defaults.
func DefaultStatefulSet(sts *appsv1.StatefulSet) {
	spec := &sts.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		ru := spec.UpdateStrategy.RollingUpdate
		if ru.Partition == nil {
			ru.Partition = new(int32)
		}
		if ru.MaxUnavailable == nil {
			v := intstr.FromInt32(1)
			ru.MaxUnavailable = &v
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		one := int32(1)
		spec.Replicas = &one
	}
	if spec.RevisionHistoryLimit == nil {
		v := int32(10)
		spec.RevisionHistoryLimit = &v
	}
	for i := range spec.VolumeClaimTemplates {
		persistentvolumeclaim.Default(&spec.VolumeClaimTemplates[i])
	}
	pod.DefaultPodSpec(&spec.Template.Spec)
}

// PrepareForCreate clears status, sets generation 1 and applies defaults.
func (StatefulSetStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	sts := obj.(*appsv1.StatefulSet)
	sts.Status = appsv1.StatefulSetStatus{}
	sts.Generation = 1
	DefaultStatefulSet(sts)
}

// PrepareForUpdate keeps the status, applies defaults and bumps generation
// when the spec changed.
func (StatefulSetStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	sts, o := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
	sts.Status = o.Status
	DefaultStatefulSet(sts)
	sts.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(sts.Spec, o.Spec) {
		sts.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (StatefulSetStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*appsv1.StatefulSet).Spec = old.(*appsv1.StatefulSet).Spec
}

// Validate checks a new stateful set.
func (StatefulSetStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateStatefulSetSpec(&obj.(*appsv1.StatefulSet).Spec, field.NewPath("spec"))
}

// statefulSetMutableFields is upstream's message for an update that
// touches any other part of the spec.
const statefulSetMutableFields = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

// ValidateUpdate validates the new spec and allows changes only to
// replicas, ordinals, template, updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds.
func (StatefulSetStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	sts, o := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
	errs := ValidateStatefulSetSpec(&sts.Spec, field.NewPath("spec"))
	rest := *o.Spec.DeepCopy()
	rest.Replicas = sts.Spec.Replicas
	rest.Ordinals = sts.Spec.Ordinals
	rest.Template = sts.Spec.Template
	rest.UpdateStrategy = sts.Spec.UpdateStrategy
	rest.RevisionHistoryLimit = sts.Spec.RevisionHistoryLimit
	rest.PersistentVolumeClaimRetentionPolicy = sts.Spec.PersistentVolumeClaimRetentionPolicy
	rest.MinReadySeconds = sts.Spec.MinReadySeconds
	if !apiequality.Semantic.DeepEqual(rest, sts.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), statefulSetMutableFields))
	}
	return errs
}

// ValidateStatusUpdate checks the status counters.
func (StatefulSetStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateStatefulSetStatus(&obj.(*appsv1.StatefulSet).Status, field.NewPath("status"))
}

// templateWithClaims is the pod template as the controller will create it:
// each volumeClaimTemplate becomes a claim volume of the same name (unless
// the template already has a volume of that name), so that volumeMounts
// naming a claim template validate, as upstream validates them.
func templateWithClaims(spec *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(spec.VolumeClaimTemplates) == 0 {
		return &spec.Template
	}
	t := spec.Template.DeepCopy()
	have := make(map[string]bool, len(t.Spec.Volumes))
	for _, v := range t.Spec.Volumes {
		have[v.Name] = true
	}
	for _, c := range spec.VolumeClaimTemplates {
		if have[c.Name] {
			continue
		}
		t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{
			Name: c.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: c.Name,
			}},
		})
	}
	return t
}

// ValidateStatefulSetSpec checks a (defaulted) stateful set spec.
func ValidateStatefulSetSpec(spec *appsv1.StatefulSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(path.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(path.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	errs = append(errs, validateStatefulSetUpdateStrategy(&spec.UpdateStrategy, path.Child("updateStrategy"))...)
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := path.Child("persistentVolumeClaimRetentionPolicy")
		valid := []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}
		for _, c := range []struct {
			name string
			v    appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", p.WhenDeleted}, {"whenScaled", p.WhenScaled}} {
			if c.v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && c.v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(pp.Child(c.name), c.v, valid))
			}
		}
	}
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validateNonNegative(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	if spec.Replicas != nil {
		errs = append(errs, validateNonNegative(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	if spec.Ordinals != nil {
		errs = append(errs, validateNonNegative(int64(spec.Ordinals.Start), path.Child("ordinals", "start"))...)
	}
	errs = append(errs, validateNonNegative(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	sel, selErrs := validateWorkloadSelector(spec.Selector, "statefulset", path.Child("selector"))
	errs = append(errs, selErrs...)
	errs = append(errs, validateWorkloadTemplate(templateWithClaims(spec), sel, "StatefulSet", path.Child("template"))...)
	for i := range spec.VolumeClaimTemplates {
		t := &spec.VolumeClaimTemplates[i]
		tp := path.Child("volumeClaimTemplates").Index(i)
		errs = append(errs, metav1validation.ValidateLabels(t.Labels, tp.Child("metadata", "labels"))...)
		errs = append(errs, persistentvolumeclaim.ValidateSpec(&t.Spec, tp.Child("spec"))...)
	}
	return errs
}

func validateStatefulSetUpdateStrategy(st *appsv1.StatefulSetUpdateStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch st.Type {
	case "":
		errs = append(errs, field.Required(path, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if st.RollingUpdate != nil {
			errs = append(errs, field.Invalid(path.Child("rollingUpdate"), st.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := st.RollingUpdate; ru != nil {
			ruPath := path.Child("rollingUpdate")
			if ru.Partition != nil {
				errs = append(errs, validateNonNegative(int64(*ru.Partition), ruPath.Child("partition"))...)
			}
			if ru.MaxUnavailable != nil {
				mu := ruPath.Child("maxUnavailable")
				errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, mu)...)
				if intOrPercentValue(ru.MaxUnavailable) == 0 {
					errs = append(errs, field.Invalid(mu, ru.MaxUnavailable.String(), "cannot be 0"))
				}
				errs = append(errs, validateNotOver100Percent(ru.MaxUnavailable, mu)...)
			}
		}
	default:
		errs = append(errs, field.Invalid(path, st,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	return errs
}

// ValidateStatefulSetStatus checks the counters are non-negative and
// consistent.
func ValidateStatefulSetStatus(st *appsv1.StatefulSetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNonNegative(int64(st.Replicas), path.Child("replicas"))...)
	errs = append(errs, validateNonNegative(int64(st.ReadyReplicas), path.Child("readyReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.CurrentReplicas), path.Child("currentReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.UpdatedReplicas), path.Child("updatedReplicas"))...)
	errs = append(errs, validateNonNegative(int64(st.AvailableReplicas), path.Child("availableReplicas"))...)
	errs = append(errs, validateNonNegative(st.ObservedGeneration, path.Child("observedGeneration"))...)
	if st.CollisionCount != nil {
		errs = append(errs, validateNonNegative(int64(*st.CollisionCount), path.Child("collisionCount"))...)
	}
	for _, c := range []struct {
		name string
		v    int32
	}{{"readyReplicas", st.ReadyReplicas}, {"currentReplicas", st.CurrentReplicas}, {"updatedReplicas", st.UpdatedReplicas}, {"availableReplicas", st.AvailableReplicas}} {
		if c.v > st.Replicas {
			errs = append(errs, field.Invalid(path.Child(c.name), c.v, msgOverReplicas))
		}
	}
	if st.AvailableReplicas > st.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), st.AvailableReplicas, "cannot be greater than status.readyReplicas"))
	}
	return errs
}

// ScaleOf is the Scale of a stateful set.
func (StatefulSetStrategy) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return nil, fmt.Errorf("statefulset scale: unexpected object %T", obj)
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("scale %s: selector: %w", sts.Name, err)
	}
	return newScale(&sts.ObjectMeta, sts.Spec.Replicas, sts.Status.Replicas, sel.String()), nil
}

// ApplyScale sets spec.replicas from a valid Scale.
func (StatefulSetStrategy) ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return fmt.Errorf("statefulset scale: unexpected object %T", obj)
	}
	if err := checkScale(s); err != nil {
		return err
	}
	replicas := s.Spec.Replicas
	sts.Spec.Replicas = &replicas
	return nil
}

// TableColumns are kubectl's columns for statefulsets.
func (StatefulSetStrategy) TableColumns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	}
}

// TableRow renders one stateful set.
func (StatefulSetStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return nil, fmt.Errorf("statefulset table: unexpected object %T", obj)
	}
	desired := int32(0)
	if sts.Spec.Replicas != nil {
		desired = *sts.Spec.Replicas
	}
	containers, images := containerCells(&sts.Spec.Template.Spec)
	return []interface{}{
		sts.Name,
		fmt.Sprintf("%d/%d", sts.Status.ReadyReplicas, desired),
		registry.Age(sts.CreationTimestamp),
		containers, images,
	}, nil
}
