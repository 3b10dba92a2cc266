package dra

import (
	"context"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// ResourceClaimResource describes resource.k8s.io/v1 resourceclaims: the
// devices a pod asks for (spec, immutable) and, in status, the allocation
// the scheduler made and the pods that use it.
func ResourceClaimResource() registry.Resource {
	return registry.Resource{
		GroupVersion:        groupVersion,
		Resource:            "resourceclaims",
		Kind:                "ResourceClaim",
		ListKind:            "ResourceClaimList",
		SingularName:        "resourceclaim",
		Namespaced:          true,
		StoragePrefix:       "resourceclaims",
		ReturnDeletedObject: true, // as upstream
		New:                 func() runtime.Object { return &resourcev1.ResourceClaim{} },
		NewList:             func() runtime.Object { return &resourcev1.ResourceClaimList{} },
		Strategy:            ResourceClaimStrategy{},
		Subresources:        map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// ResourceClaimStrategy is the resourceclaims strategy.
type ResourceClaimStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ResourceClaimStrategy{}

// DefaultClaimSpec applies upstream's v1 defaults: allocationMode
// ExactCount and count 1 for exact requests and subrequests.
func DefaultClaimSpec(spec *resourcev1.ResourceClaimSpec) {
	for i := range spec.Devices.Requests {
		r := &spec.Devices.Requests[i]
		if r.Exactly != nil {
			defaultMode(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			defaultMode(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

func defaultMode(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

// PrepareForCreate clears the status and applies defaults.
func (ResourceClaimStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	c := obj.(*resourcev1.ResourceClaim)
	c.Status = resourcev1.ResourceClaimStatus{}
	DefaultClaimSpec(&c.Spec)
}

// PrepareForUpdate keeps the status.
func (ResourceClaimStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	c := obj.(*resourcev1.ResourceClaim)
	c.Status = old.(*resourcev1.ResourceClaim).Status
	DefaultClaimSpec(&c.Spec)
}

// PrepareForStatusUpdate keeps the spec.
func (ResourceClaimStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*resourcev1.ResourceClaim).Spec = old.(*resourcev1.ResourceClaim).Spec
}

// Validate checks the requested devices.
func (ResourceClaimStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateClaimSpec(&obj.(*resourcev1.ResourceClaim).Spec, field.NewPath("spec"))
}

// ValidateUpdate: the spec is immutable.
func (ResourceClaimStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	return immutable(c.Spec, o.Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate: reservedFor holds unique, complete consumers and
// needs an allocation; no consumer is added once the claim is being
// deleted; an allocation, once made, is not changed (only removed), and a
// new one names requests of the claim.
func (ResourceClaimStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
	path := field.NewPath("status")
	var errs field.ErrorList
	rp := path.Child("reservedFor")
	if len(c.Status.ReservedFor) > resourcev1.ResourceClaimReservedForMaxSize {
		errs = append(errs, field.TooMany(rp, len(c.Status.ReservedFor), resourcev1.ResourceClaimReservedForMaxSize))
	}
	uids := sets.New[types.UID]()
	for i, ref := range c.Status.ReservedFor {
		p := rp.Index(i)
		if ref.Resource == "" {
			errs = append(errs, field.Required(p.Child("resource"), ""))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		if ref.UID == "" {
			errs = append(errs, field.Required(p.Child("uid"), ""))
		}
		if uids.Has(ref.UID) {
			errs = append(errs, field.Duplicate(p, ref))
		}
		uids.Insert(ref.UID)
	}
	if len(c.Status.ReservedFor) > 0 {
		if c.Status.Allocation == nil {
			errs = append(errs, field.Forbidden(rp, "may not be specified when `allocated` is not set"))
		} else if c.DeletionTimestamp != nil {
			was := sets.New(o.Status.ReservedFor...)
			if len(sets.New(c.Status.ReservedFor...).Difference(was)) > 0 {
				errs = append(errs, field.Forbidden(rp, "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"))
			}
		}
	}
	ap := path.Child("allocation")
	switch {
	case o.Status.Allocation != nil && c.Status.Allocation != nil:
		errs = append(errs, immutable(c.Status.Allocation, o.Status.Allocation, ap)...)
	case c.Status.Allocation != nil:
		errs = append(errs, validateAllocation(c, ap)...)
	}
	return errs
}

func validateAllocation(c *resourcev1.ResourceClaim, path *field.Path) field.ErrorList {
	requests := sets.New[string]()
	for _, r := range c.Spec.Devices.Requests {
		requests.Insert(r.Name)
		for _, s := range r.FirstAvailable {
			requests.Insert(r.Name + "/" + s.Name)
		}
	}
	var errs field.ErrorList
	rp := path.Child("devices", "results")
	if n := len(c.Status.Allocation.Devices.Results); n > resourcev1.AllocationResultsMaxSize {
		errs = append(errs, field.TooMany(rp, n, resourcev1.AllocationResultsMaxSize))
	}
	for i, r := range c.Status.Allocation.Devices.Results {
		p := rp.Index(i)
		if !requests.Has(r.Request) {
			errs = append(errs, field.Invalid(p.Child("request"), r.Request, "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"))
		}
		errs = append(errs, validateDriverName(r.Driver, p.Child("driver"))...)
		errs = append(errs, validatePoolName(r.Pool, p.Child("pool"))...)
		errs = append(errs, validateDNSLabel(r.Device, p.Child("device"))...)
	}
	return errs
}

// TableColumns are kubectl's: NAME STATE AGE.
func (ResourceClaimStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "State", Type: "string", Description: "A summary of the current state (allocated, pending, reserved, etc.)."},
		ageColumn(),
	}
}

// TableRow renders one claim.
func (ResourceClaimStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, fmt.Errorf("resourceclaim table: unexpected object %T", obj)
	}
	return []interface{}{c.Name, ClaimState(c), registry.Age(c.CreationTimestamp)}, nil
}

// ClaimState summarises a claim as kubectl does: "pending",
// "allocated,reserved", "deleted,allocated", ...
func ClaimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}
