package autoscaling

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// V1Resource describes autoscaling/v1 horizontalpodautoscalers, stored as
// autoscaling/v2 objects in the same keys as V2Resource.
func V1Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  autoscalingv1.SchemeGroupVersion,
		Resource:      "horizontalpodautoscalers",
		Kind:          "HorizontalPodAutoscaler",
		ListKind:      "HorizontalPodAutoscalerList",
		SingularName:  "horizontalpodautoscaler",
		ShortNames:    []string{"hpa"},
		Categories:    []string{"all"},
		Namespaced:    true,
		StoragePrefix: "horizontalpodautoscalers",
		New:           func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscaler{} },
		NewList:       func() runtime.Object { return &autoscalingv1.HorizontalPodAutoscalerList{} },
		Strategy:      V1Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
		Stored:        StoredAsV2(),
	}
}

// StoredAsV2 keeps autoscaling/v1 HPAs as autoscaling/v2 ones. Reading
// applies v2's defaults first, as upstream's decoding of the stored v2
// object does.
func StoredAsV2() *registry.StoredVersion {
	return &registry.StoredVersion{
		GVK: autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		New: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		ToStored: func(served runtime.Object) (runtime.Object, error) {
			v1, ok := served.(*autoscalingv1.HorizontalPodAutoscaler)
			if !ok {
				return nil, fmt.Errorf("expected autoscaling/v1 HorizontalPodAutoscaler, got %T", served)
			}
			return ToV2(v1)
		},
		FromStored: func(stored, served runtime.Object) error {
			v2, ok := stored.(*autoscalingv2.HorizontalPodAutoscaler)
			if !ok {
				return fmt.Errorf("expected stored autoscaling/v2 HorizontalPodAutoscaler, got %T", stored)
			}
			into, ok := served.(*autoscalingv1.HorizontalPodAutoscaler)
			if !ok {
				return fmt.Errorf("expected autoscaling/v1 HorizontalPodAutoscaler, got %T", served)
			}
			v2 = v2.DeepCopy()
			Default(v2)
			v1, err := ToV1(v2)
			if err != nil {
				return err
			}
			*into = *v1
			return nil
		},
	}
}

// V1Strategy serves autoscaling/v1 HPAs by converting them to v2 and
// applying the v2 rules, as upstream applies its internal (v2-shaped)
// rules to every version; error paths are therefore v2's.
type V1Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = V1Strategy{}

// viaV2 converts obj (and old, if any) to v2, runs fn, and writes the
// result back into obj. A conversion error leaves obj untouched; Validate
// reports it.
func viaV2(obj, old runtime.Object, fn func(n, o *autoscalingv2.HorizontalPodAutoscaler)) {
	n, err := ToV2(obj.(*autoscalingv1.HorizontalPodAutoscaler))
	if err != nil {
		return
	}
	var o *autoscalingv2.HorizontalPodAutoscaler
	if old != nil {
		if o, err = ToV2(old.(*autoscalingv1.HorizontalPodAutoscaler)); err != nil {
			return
		}
	}
	fn(n, o)
	back, err := ToV1(n)
	if err != nil {
		return
	}
	*obj.(*autoscalingv1.HorizontalPodAutoscaler) = *back
}

// PrepareForCreate applies the v2 create rules.
func (V1Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	viaV2(obj, nil, func(n, _ *autoscalingv2.HorizontalPodAutoscaler) { Strategy{}.PrepareForCreate(ctx, n) })
}

// PrepareForUpdate applies the v2 update rules.
func (V1Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	viaV2(obj, old, func(n, o *autoscalingv2.HorizontalPodAutoscaler) { Strategy{}.PrepareForUpdate(ctx, n, o) })
}

// PrepareForStatusUpdate applies the v2 status rules.
func (V1Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	viaV2(obj, old, func(n, o *autoscalingv2.HorizontalPodAutoscaler) { Strategy{}.PrepareForStatusUpdate(ctx, n, o) })
}

// validateV1 converts obj and validates it with fn; a conversion error is
// a field error on the annotation that failed to decode.
func validateV1(obj runtime.Object, fn func(*autoscalingv2.HorizontalPodAutoscaler) field.ErrorList) field.ErrorList {
	v1 := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	v2, err := ToV2(v1)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "", err.Error())}
	}
	return fn(v2)
}

// Validate checks a new v1 HPA.
func (V1Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateV1(obj, func(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
		return ValidateSpec(&h.Spec, field.NewPath("spec"))
	})
}

// ValidateUpdate checks an updated v1 HPA.
func (s V1Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// ValidateStatusUpdate checks a v1 HPA's status.
func (V1Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validateV1(obj, func(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
		return ValidateStatus(&h.Status, field.NewPath("status"))
	})
}

// TableColumns are kubectl's columns for HPAs.
func (V1Strategy) TableColumns() []metav1.TableColumnDefinition { return tableColumns() }

// TableRow renders a v1 HPA through its v2 form.
func (V1Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	v1, ok := obj.(*autoscalingv1.HorizontalPodAutoscaler)
	if !ok {
		return nil, fmt.Errorf("horizontalpodautoscaler table: unexpected object %T", obj)
	}
	v2, err := ToV2(v1)
	if err != nil {
		return nil, err
	}
	return tableRow(v2), nil
}
