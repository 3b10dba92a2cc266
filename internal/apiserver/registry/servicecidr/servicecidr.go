// Package servicecidr holds the networking.k8s.io/v1 resources of
// upstream's MultiCIDRServiceAllocator: servicecidrs (with status), the
// ranges ClusterIPs come from, and ipaddresses, one object per allocated
// ClusterIP naming the Service that holds it. Rules as upstream v1.37.
package servicecidr

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists servicecidrs and ipaddresses (networking.k8s.io/v1,
// beside the group's other resources in package networking).
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{ServiceCIDRResource(), IPAddressResource()}
}

const immutableMsg = "field is immutable"

// ServiceCIDRResource describes networking.k8s.io/v1 servicecidrs.
func ServiceCIDRResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  networkingv1.SchemeGroupVersion,
		Resource:      "servicecidrs",
		Kind:          "ServiceCIDR",
		ListKind:      "ServiceCIDRList",
		SingularName:  "servicecidr",
		StoragePrefix: "servicecidrs",
		New:           func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		NewList:       func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		Strategy:      ServiceCIDRStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// ServiceCIDRStrategy is the servicecidrs strategy.
type ServiceCIDRStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = ServiceCIDRStrategy{}

// PrepareForCreate clears the status (upstream's
// ServiceCIDRStatusFieldWiping, on in 1.37).
func (ServiceCIDRStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	obj.(*networkingv1.ServiceCIDR).Status = networkingv1.ServiceCIDRStatus{}
}

// PrepareForUpdate keeps the status.
func (ServiceCIDRStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*networkingv1.ServiceCIDR).Status = old.(*networkingv1.ServiceCIDR).Status
}

// PrepareForStatusUpdate keeps the spec.
func (ServiceCIDRStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*networkingv1.ServiceCIDR).Spec = old.(*networkingv1.ServiceCIDR).Spec
}

// Validate: one or two CIDRs, valid, one per IP family.
func (ServiceCIDRStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateCIDRs(&obj.(*networkingv1.ServiceCIDR).Spec, field.NewPath("spec", "cidrs"))
}

func validateCIDRs(spec *networkingv1.ServiceCIDRSpec, path *field.Path) field.ErrorList {
	switch n := len(spec.CIDRs); {
	case n == 0:
		return field.ErrorList{field.Required(path, "at least one CIDR required")}
	case n > 2:
		return field.ErrorList{field.Invalid(path, spec, "may only hold up to 2 values")}
	}
	var errs field.ErrorList
	for i, c := range spec.CIDRs {
		errs = append(errs, validation.IsValidCIDR(path.Index(i), c)...)
	}
	if len(spec.CIDRs) == 2 {
		f0, f1 := netutils.IPFamilyOfCIDRString(spec.CIDRs[0]), netutils.IPFamilyOfCIDRString(spec.CIDRs[1])
		if f0 == f1 && f0 != netutils.IPFamilyUnknown {
			errs = append(errs, field.Invalid(path, spec.CIDRs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// ValidateUpdate: the CIDRs are immutable, except that a single-stack
// range may gain its other family.
func (ServiceCIDRStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	c, o := obj.(*networkingv1.ServiceCIDR), old.(*networkingv1.ServiceCIDR)
	path := field.NewPath("spec", "cidrs")
	var errs field.ErrorList
	switch {
	case len(o.Spec.CIDRs) == len(c.Spec.CIDRs):
		for i := range o.Spec.CIDRs {
			if o.Spec.CIDRs[i] != c.Spec.CIDRs[i] {
				errs = append(errs, field.Invalid(path.Index(i), c.Spec.CIDRs[i], immutableMsg))
			}
		}
	case len(o.Spec.CIDRs) == 1 && len(c.Spec.CIDRs) == 2:
		if c.Spec.CIDRs[0] != o.Spec.CIDRs[0] {
			errs = append(errs, field.Invalid(path.Index(0), c.Spec.CIDRs[0], immutableMsg))
		}
		errs = append(errs, validateCIDRs(&c.Spec, path)...)
	default:
		errs = append(errs, field.Invalid(path, c.Spec.CIDRs, immutableMsg))
	}
	return errs
}

// TableColumns are kubectl's: NAME CIDRS AGE.
func (ServiceCIDRStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "CIDRs", Type: "string", Description: networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one range.
func (ServiceCIDRStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	c, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return nil, fmt.Errorf("servicecidr table: unexpected object %T", obj)
	}
	return []interface{}{c.Name, strings.Join(c.Spec.CIDRs, ","), registry.Age(c.CreationTimestamp)}, nil
}

// IPAddressResource describes networking.k8s.io/v1 ipaddresses (short
// name ip). The name is the address in canonical form.
func IPAddressResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  networkingv1.SchemeGroupVersion,
		Resource:      "ipaddresses",
		Kind:          "IPAddress",
		ListKind:      "IPAddressList",
		SingularName:  "ipaddress",
		ShortNames:    []string{"ip"},
		StoragePrefix: "ipaddresses",
		New:           func() runtime.Object { return &networkingv1.IPAddress{} },
		NewList:       func() runtime.Object { return &networkingv1.IPAddressList{} },
		Strategy:      IPAddressStrategy{},
	}
}

// IPAddressStrategy is the ipaddresses strategy.
type IPAddressStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = IPAddressStrategy{}

// ValidateName accepts an IP address in canonical form ("10.43.0.1",
// "2001:db8::1"), as upstream.
func (IPAddressStrategy) ValidateName(name string, prefix bool) []string {
	var msgs []string
	for _, e := range validation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, e.Detail)
	}
	return msgs
}

// Validate: parentRef is required with a resource and a name.
func (IPAddressStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validateParentRef(obj.(*networkingv1.IPAddress).Spec.ParentRef, field.NewPath("spec"))
}

func validateParentRef(ref *networkingv1.ParentReference, path *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(path.Child("parentRef"), "")}
	}
	path = path.Child("parentRef")
	var errs field.ErrorList
	if ref.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(path.Child("group"), ref.Group, msg))
		}
	}
	segment := func(v, name string, required bool) {
		if v == "" {
			if required {
				errs = append(errs, field.Required(path.Child(name), ""))
			}
			return
		}
		for _, msg := range pathSegmentName(v) {
			errs = append(errs, field.Invalid(path.Child(name), v, msg))
		}
	}
	segment(ref.Resource, "resource", true)
	segment(ref.Name, "name", true)
	segment(ref.Namespace, "namespace", false)
	return errs
}

// pathSegmentName is upstream's path segment rule: not "." or "..", no
// "/" or "%".
func pathSegmentName(v string) []string {
	if v == "." || v == ".." {
		return []string{fmt.Sprintf(`may not be '%s'`, v)}
	}
	var msgs []string
	for _, bad := range []string{"/", "%"} {
		if strings.Contains(v, bad) {
			msgs = append(msgs, fmt.Sprintf(`may not contain '%s'`, bad))
		}
	}
	return msgs
}

// ValidateUpdate: parentRef is immutable.
func (IPAddressStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	a, o := obj.(*networkingv1.IPAddress), old.(*networkingv1.IPAddress)
	if (a.Spec.ParentRef == nil) != (o.Spec.ParentRef == nil) || (a.Spec.ParentRef != nil && *a.Spec.ParentRef != *o.Spec.ParentRef) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "parentRef"), a.Spec.ParentRef, immutableMsg)}
	}
	return nil
}

// TableColumns are kubectl's: NAME PARENTREF (upstream declares no AGE).
func (IPAddressStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "ParentRef", Type: "string", Description: networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]},
	}
}

// TableRow renders one address: its parent as "services/ns/name".
func (IPAddressStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	a, ok := obj.(*networkingv1.IPAddress)
	if !ok {
		return nil, fmt.Errorf("ipaddress table: unexpected object %T", obj)
	}
	parent := "<none>"
	if r := a.Spec.ParentRef; r != nil {
		parent = strings.ToLower(schema.GroupResource{Group: r.Group, Resource: r.Resource}.String())
		if r.Namespace != "" {
			parent += "/" + r.Namespace
		}
		parent += "/" + r.Name
	}
	return []interface{}{a.Name, parent}, nil
}

func nameColumn() metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
}
