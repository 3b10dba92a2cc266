// Package endpoints holds the rules of core/v1 endpoints: port defaults,
// validation of subsets, and kubectl's table (NAME ENDPOINTS AGE).
package endpoints

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 endpoints.
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "endpoints",
		Kind:          "Endpoints",
		ListKind:      "EndpointsList",
		SingularName:  "endpoints",
		ShortNames:    []string{"ep"},
		Namespaced:    true,
		StoragePrefix: "services/endpoints",
		New:           func() runtime.Object { return &corev1.Endpoints{} },
		NewList:       func() runtime.Object { return &corev1.EndpointsList{} },
		Strategy:      Strategy{},
	}
}

// Strategy is the endpoints strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// PrepareForCreate applies defaults.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	Default(obj.(*corev1.Endpoints))
}

// PrepareForUpdate applies defaults.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	Default(obj.(*corev1.Endpoints))
}

// Validate checks the subsets.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return Validate(obj.(*corev1.Endpoints))
}

// ValidateUpdate checks the subsets.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return Validate(obj.(*corev1.Endpoints))
}

// TableColumns are kubectl's columns for endpoints.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one Endpoints object.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ep := obj.(*corev1.Endpoints)
	return []interface{}{ep.Name, Format(ep), registry.Age(ep.CreationTimestamp)}, nil
}

// Default sets port protocols to TCP.
func Default(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

var supportedProtocols = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}

// Validate checks every subset: it has addresses, each address is a valid,
// non-special IP, and ports are valid (named when there are several).
func Validate(ep *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	subsetsPath := field.NewPath("subsets")
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		idx := subsetsPath.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(idx, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateAddress(&ss.Addresses[j], idx.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateAddress(&ss.NotReadyAddresses[j], idx.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validatePort(&ss.Ports[j], len(ss.Ports) > 1, idx.Child("ports").Index(j))...)
		}
	}
	return errs
}

func validateAddress(a *corev1.EndpointAddress, path *field.Path) field.ErrorList {
	ipErrs := validation.IsValidIP(path.Child("ip"), a.IP)
	errs := ipErrs
	if len(ipErrs) == 0 {
		errs = append(errs, ValidateNonSpecialIP(a.IP, path.Child("ip"))...)
	}
	if a.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(a.Hostname) {
			errs = append(errs, field.Invalid(path.Child("hostname"), a.Hostname, msg))
		}
	}
	if a.NodeName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*a.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), *a.NodeName, msg))
		}
	}
	return errs
}

func validatePort(p *corev1.EndpointPort, requireName bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && p.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else if p.Name != "" {
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), p.Name, msg))
		}
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(path.Child("port"), p.Port, msg))
	}
	switch p.Protocol {
	case "":
		errs = append(errs, field.Required(path.Child("protocol"), ""))
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		errs = append(errs, field.NotSupported(path.Child("protocol"), p.Protocol, supportedProtocols))
	}
	if p.AppProtocol != nil {
		for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
			errs = append(errs, field.Invalid(path.Child("appProtocol"), *p.AppProtocol, msg))
		}
	}
	return errs
}

// ValidateNonSpecialIP rejects addresses that cannot be endpoints: the
// unspecified address, loopback, link-local and link-local multicast, as
// upstream does for Endpoints and EndpointSlices.
func ValidateNonSpecialIP(ip string, path *field.Path) field.ErrorList {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return field.ErrorList{field.Invalid(path, ip, "must be a valid IP address")}
	}
	a = a.Unmap()
	var errs field.ErrorList
	if a.IsUnspecified() {
		errs = append(errs, field.Invalid(path, ip, fmt.Sprintf("may not be unspecified (%s)", ip)))
	}
	if a.IsLoopback() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if a.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if a.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

// maxShown is how many endpoints the table lists before "+ N more...".
const maxShown = 3

// Format renders the ENDPOINTS column as kubectl does:
// "10.42.0.5:80,10.42.0.6:80,10.42.0.7:80 + 3 more...", or "<none>"
// without subsets.
func Format(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	more := false
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			// Headless services may have no ports: list bare IPs.
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == maxShown {
					more = true
					break
				}
				list = append(list, a.IP)
			}
		} else {
			for _, p := range ss.Ports {
				count += len(ss.Addresses)
				for _, a := range ss.Addresses {
					if len(list) == maxShown {
						more = true
						break
					}
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
				}
				if more {
					break
				}
			}
		}
		if more {
			break
		}
	}
	s := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", s, count-maxShown)
	}
	return s
}
