// Package endpointslice holds the rules of discovery.k8s.io/v1 endpointslices:
// port defaults, validation by address type, generation, and kubectl's
// table (NAME ADDRESSTYPE PORTS ENDPOINTS AGE). The EndpointSlice
// controller labels slices with discoveryv1.LabelServiceName
// ("kubernetes.io/service-name"); like upstream, the API does not require it.
package endpointslice

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/endpoints"
)

// Limits, as upstream.
const (
	MaxEndpoints = 1000
	MaxAddresses = 100
	MaxPorts     = 100
	maxZoneHints = 8
	maxNodeHints = 8
)

// Resources lists the discovery.k8s.io/v1 resources: endpointslices.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes discovery.k8s.io/v1 endpointslices.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  discoveryv1.SchemeGroupVersion,
		Resource:      "endpointslices",
		Kind:          "EndpointSlice",
		ListKind:      "EndpointSliceList",
		SingularName:  "endpointslice",
		Namespaced:    true,
		StoragePrefix: "endpointslices",
		New:           func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:       func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the endpointslices strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate sets generation 1 and applies defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s := obj.(*discoveryv1.EndpointSlice)
	s.Generation = 1
	Default(s)
}

// PrepareForUpdate applies defaults and bumps generation when anything but
// metadata changed, or the labels did.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	s, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	Default(s)
	s.Generation = o.Generation
	changed := s.AddressType != o.AddressType ||
		!apiequality.Semantic.DeepEqual(s.Endpoints, o.Endpoints) ||
		!apiequality.Semantic.DeepEqual(s.Ports, o.Ports) ||
		!apiequality.Semantic.DeepEqual(s.Labels, o.Labels)
	if changed {
		s.Generation = o.Generation + 1
	}
}

// Validate checks a new slice.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return Validate(obj.(*discoveryv1.EndpointSlice))
}

// ValidateUpdate also keeps addressType immutable.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	s, o := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	errs := Validate(s)
	if s.AddressType != o.AddressType {
		errs = append(errs, field.Invalid(field.NewPath("addressType"), s.AddressType, "field is immutable"))
	}
	return errs
}

// Default names unnamed ports "" and sets their protocol to TCP.
func Default(s *discoveryv1.EndpointSlice) {
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

var (
	supportedAddressTypes = []string{string(discoveryv1.AddressTypeFQDN), string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6)}
	supportedProtocols    = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}
)

// Validate checks the address type, the endpoints (count, addresses valid
// for the type, hostname, node name, hints) and the ports.
func Validate(s *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	typePath := field.NewPath("addressType")
	switch s.AddressType {
	case "":
		errs = append(errs, field.Required(typePath, ""))
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
	default:
		errs = append(errs, field.NotSupported(typePath, s.AddressType, supportedAddressTypes))
	}
	errs = append(errs, validateEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	errs = append(errs, validatePorts(s.Ports, field.NewPath("ports"))...)
	return errs
}

func validateEndpoints(eps []discoveryv1.Endpoint, addrType discoveryv1.AddressType, path *field.Path) field.ErrorList {
	if len(eps) > MaxEndpoints {
		return field.ErrorList{field.TooMany(path, len(eps), MaxEndpoints)}
	}
	var errs field.ErrorList
	for i := range eps {
		ep := &eps[i]
		idx := path.Index(i)
		addrPath := idx.Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > MaxAddresses {
			errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), MaxAddresses))
		}
		for j, a := range ep.Addresses {
			ap := addrPath.Index(j)
			switch addrType {
			case discoveryv1.AddressTypeIPv4:
				if ipErrs := validIPOfFamily(ap, a, true); len(ipErrs) > 0 {
					errs = append(errs, ipErrs...)
				} else {
					errs = append(errs, endpoints.ValidateNonSpecialIP(a, ap)...)
				}
			case discoveryv1.AddressTypeIPv6:
				if ipErrs := validIPOfFamily(ap, a, false); len(ipErrs) > 0 {
					errs = append(errs, ipErrs...)
				} else {
					errs = append(errs, endpoints.ValidateNonSpecialIP(a, ap)...)
				}
			case discoveryv1.AddressTypeFQDN:
				errs = append(errs, validation.IsFullyQualifiedDomainName(ap, a)...)
			}
		}
		if ep.Hostname != nil {
			for _, msg := range validation.IsDNS1123Label(*ep.Hostname) {
				errs = append(errs, field.Invalid(idx.Child("hostname"), *ep.Hostname, msg))
			}
		}
		if ep.NodeName != nil {
			for _, msg := range validation.IsDNS1123Subdomain(*ep.NodeName) {
				errs = append(errs, field.Invalid(idx.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, idx.Child("deprecatedTopology"))...)
		if ep.Hints != nil {
			hp := idx.Child("hints")
			if len(ep.Hints.ForZones) > maxZoneHints {
				errs = append(errs, field.TooMany(hp.Child("forZones"), len(ep.Hints.ForZones), maxZoneHints))
			}
			if len(ep.Hints.ForNodes) > maxNodeHints {
				errs = append(errs, field.TooMany(hp.Child("forNodes"), len(ep.Hints.ForNodes), maxNodeHints))
			}
			for j, z := range ep.Hints.ForZones {
				for _, msg := range validation.IsValidLabelValue(z.Name) {
					errs = append(errs, field.Invalid(hp.Child("forZones").Index(j).Child("name"), z.Name, msg))
				}
			}
		}
	}
	return errs
}

// validIPOfFamily checks that a is a valid IP of the slice's family.
func validIPOfFamily(path *field.Path, a string, v4 bool) field.ErrorList {
	if errs := validation.IsValidIP(path, a); len(errs) > 0 {
		return errs
	}
	ip, _ := netip.ParseAddr(a)
	switch {
	case v4 && !ip.Is4():
		return field.ErrorList{field.Invalid(path, a, "must be an IPv4 address")}
	case !v4 && !ip.Is6():
		return field.ErrorList{field.Invalid(path, a, "must be an IPv6 address")}
	}
	return nil
}

func validatePorts(ports []discoveryv1.EndpointPort, path *field.Path) field.ErrorList {
	if len(ports) > MaxPorts {
		return field.ErrorList{field.TooMany(path, len(ports), MaxPorts)}
	}
	var errs field.ErrorList
	names := map[string]bool{}
	for i, p := range ports {
		idx := path.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(idx.Child("name"), name, msg))
			}
		}
		if names[name] {
			errs = append(errs, field.Duplicate(idx.Child("name"), name))
		}
		names[name] = true
		if p.Protocol == nil {
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		} else if pr := *p.Protocol; pr != corev1.ProtocolTCP && pr != corev1.ProtocolUDP && pr != corev1.ProtocolSCTP {
			errs = append(errs, field.NotSupported(idx.Child("protocol"), pr, supportedProtocols))
		}
		if p.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*p.Port)) {
				errs = append(errs, field.Invalid(idx.Child("port"), *p.Port, msg))
			}
		}
		if p.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
				errs = append(errs, field.Invalid(idx.Child("appProtocol"), *p.AppProtocol, msg))
			}
		}
	}
	return errs
}

// TableColumns are kubectl's columns for endpointslices.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "AddressType", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]},
		{Name: "Ports", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]},
		{Name: "Endpoints", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one slice.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	s := obj.(*discoveryv1.EndpointSlice)
	return []interface{}{s.Name, string(s.AddressType), formatPorts(s.Ports), formatEndpoints(s.Endpoints), registry.Age(s.CreationTimestamp)}, nil
}

const maxShown = 3

func formatPorts(ports []discoveryv1.EndpointPort) string {
	var list []string
	for _, p := range ports {
		if len(list) == maxShown {
			break
		}
		v := "*"
		if p.Port != nil {
			v = strconv.Itoa(int(*p.Port))
		} else if p.Name != nil {
			v = *p.Name
		}
		list = append(list, v)
	}
	return withMore(list, len(ports))
}

func formatEndpoints(eps []discoveryv1.Endpoint) string {
	var list []string
	count := 0
	for _, ep := range eps {
		for _, a := range ep.Addresses {
			if len(list) < maxShown {
				list = append(list, a)
			}
			count++
		}
	}
	return withMore(list, count)
}

// withMore joins the shown values and says how many more there are;
// nothing at all is "<unset>".
func withMore(list []string, count int) string {
	s := strings.Join(list, ",")
	if count > maxShown {
		return fmt.Sprintf("%s + %d more...", s, count-maxShown)
	}
	if s == "" {
		return "<unset>"
	}
	return s
}
