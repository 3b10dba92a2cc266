package storagek8s

import (
	"context"
	"math"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// CSIDriverResource describes storage.k8s.io/v1 csidrivers.
func CSIDriverResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        storagev1.SchemeGroupVersion,
		Resource:            "csidrivers",
		Kind:                "CSIDriver",
		ListKind:            "CSIDriverList",
		SingularName:        "csidriver",
		StoragePrefix:       "csidrivers",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &storagev1.CSIDriver{} },
		NewList:             func() runtime.Object { return &storagev1.CSIDriverList{} },
		Strategy:            CSIDriverStrategy{},
	}
}

// CSIDriverStrategy is the csidrivers strategy.
type CSIDriverStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = CSIDriverStrategy{}

// DefaultCSIDriver applies upstream's v1 defaults.
func DefaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	setBool := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	setBool(&s.AttachRequired, true)
	setBool(&s.PodInfoOnMount, false)
	setBool(&s.StorageCapacity, false)
	setBool(&s.RequiresRepublish, false)
	setBool(&s.SELinuxMount, false)
	if s.FSGroupPolicy == nil {
		p := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
		s.FSGroupPolicy = &p
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
}

// PrepareForCreate applies defaults.
func (CSIDriverStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	DefaultCSIDriver(obj.(*storagev1.CSIDriver))
}

// PrepareForUpdate applies defaults.
func (CSIDriverStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	DefaultCSIDriver(obj.(*storagev1.CSIDriver))
}

// ValidateName accepts CSI driver names: DNS-1123 subdomains of at most 63
// characters.
func (CSIDriverStrategy) ValidateName(name string, prefix bool) []string {
	return nameIsCSIDriverName(name, prefix)
}

// Validate checks a new CSIDriver.
func (CSIDriverStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCSIDriverSpec(&obj.(*storagev1.CSIDriver).Spec, field.NewPath("spec"))
}

// ValidateUpdate keeps attachRequired, fsGroupPolicy and
// volumeLifecycleModes immutable.
func (CSIDriverStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
	path := field.NewPath("spec")
	errs := ValidateCSIDriverSpec(&d.Spec, path)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(d.Spec.AttachRequired, o.Spec.AttachRequired, path.Child("attachRequired"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(d.Spec.FSGroupPolicy, o.Spec.FSGroupPolicy, path.Child("fsGroupPolicy"))...)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, o.Spec.VolumeLifecycleModes, path.Child("volumeLifecycleModes"))...)
	return errs
}

var (
	supportedFSGroupPolicies = []string{
		string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy),
	}
	supportedLifecycleModes = []string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}
)

// ValidateCSIDriverSpec checks a (defaulted) CSIDriver spec.
func ValidateCSIDriverSpec(s *storagev1.CSIDriverSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *bool
	}{
		{"attachRequired", s.AttachRequired}, {"podInfoOnMount", s.PodInfoOnMount},
		{"storageCapacity", s.StorageCapacity}, {"requiresRepublish", s.RequiresRepublish},
	} {
		if f.v == nil {
			errs = append(errs, field.Required(path.Child(f.name), ""))
		}
	}
	if s.FSGroupPolicy != nil && !sets.New(supportedFSGroupPolicies...).Has(string(*s.FSGroupPolicy)) {
		errs = append(errs, field.NotSupported(path.Child("fsGroupPolicy"), *s.FSGroupPolicy, supportedFSGroupPolicies))
	}
	for i, m := range s.VolumeLifecycleModes {
		if !sets.New(supportedLifecycleModes...).Has(string(m)) {
			errs = append(errs, field.NotSupported(path.Child("volumeLifecycleModes").Index(i), m, supportedLifecycleModes))
		}
	}
	audiences := sets.New[string]()
	for i, tr := range s.TokenRequests {
		tp := path.Child("tokenRequests").Index(i)
		if audiences.Has(tr.Audience) {
			errs = append(errs, field.Duplicate(tp.Child("audience"), tr.Audience))
		}
		audiences.Insert(tr.Audience)
		if tr.ExpirationSeconds != nil {
			switch e := *tr.ExpirationSeconds; {
			case e < 600:
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), e, "may not specify a duration less than 10 minutes"))
			case e > math.MaxUint32:
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), e, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		errs = append(errs, field.Invalid(path.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	return errs
}

// TableColumns are kubectl's columns for CSIDrivers.
func (CSIDriverStrategy) TableColumns() []metav1.TableColumnDefinition {
	doc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "AttachRequired", Type: "boolean", Description: doc["attachRequired"]},
		{Name: "PodInfoOnMount", Type: "boolean", Description: doc["podInfoOnMount"]},
		{Name: "StorageCapacity", Type: "boolean", Description: doc["storageCapacity"]},
		{Name: "TokenRequests", Type: "string", Description: doc["tokenRequests"]},
		{Name: "RequiresRepublish", Type: "boolean", Description: doc["requiresRepublish"]},
		{Name: "Modes", Type: "string", Description: doc["volumeLifecycleModes"]},
		ageColumn(),
	}
}

// TableRow renders one CSIDriver.
func (CSIDriverStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	d := obj.(*storagev1.CSIDriver)
	deref := func(p *bool, def bool) bool {
		if p == nil {
			return def
		}
		return *p
	}
	var modes []string
	for _, m := range d.Spec.VolumeLifecycleModes {
		modes = append(modes, string(m))
	}
	modeCell := strings.Join(modes, ",")
	if modeCell == "" {
		modeCell = "<none>"
	}
	tokens := "<unset>"
	if d.Spec.TokenRequests != nil {
		var auds []string
		for _, t := range d.Spec.TokenRequests {
			auds = append(auds, t.Audience)
		}
		tokens = strings.Join(auds, ",")
	}
	return []interface{}{
		d.Name, deref(d.Spec.AttachRequired, true), deref(d.Spec.PodInfoOnMount, false),
		deref(d.Spec.StorageCapacity, false), tokens, deref(d.Spec.RequiresRepublish, false),
		modeCell, registry.Age(d.CreationTimestamp),
	}, nil
}
