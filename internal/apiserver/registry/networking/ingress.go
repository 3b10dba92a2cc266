package networking

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// IngressResource describes networking.k8s.io/v1 ingresses. Upstream keeps
// them under /registry/ingress, a name left from extensions/v1beta1.
func IngressResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  networkingv1.SchemeGroupVersion,
		Resource:      "ingresses",
		Kind:          "Ingress",
		ListKind:      "IngressList",
		SingularName:  "ingress",
		ShortNames:    []string{"ing"},
		Namespaced:    true,
		StoragePrefix: "ingress",
		New:           func() runtime.Object { return &networkingv1.Ingress{} },
		NewList:       func() runtime.Object { return &networkingv1.IngressList{} },
		Strategy:      IngressStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// IngressStrategy is the ingresses strategy.
type IngressStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = IngressStrategy{}

// PrepareForCreate clears the status and sets generation 1.
func (IngressStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	ing := obj.(*networkingv1.Ingress)
	ing.Status = networkingv1.IngressStatus{}
	ing.Generation = 1
}

// PrepareForUpdate keeps the status and bumps generation on spec changes.
func (IngressStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	ing, o := obj.(*networkingv1.Ingress), old.(*networkingv1.Ingress)
	ing.Status = o.Status
	ing.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(ing.Spec, o.Spec) {
		ing.Generation = o.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec.
func (IngressStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*networkingv1.Ingress).Spec = old.(*networkingv1.Ingress).Spec
}

// Validate checks a new ingress.
func (IngressStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateIngressSpec(&obj.(*networkingv1.Ingress).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks an updated ingress.
func (IngressStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateIngressSpec(&obj.(*networkingv1.Ingress).Spec, field.NewPath("spec"))
}

// ValidateStatusUpdate checks the load balancer addresses.
func (IngressStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateIngressStatus(&obj.(*networkingv1.Ingress).Status, field.NewPath("status"))
}

// ValidateIngressSpec checks the backends, rules, TLS hosts and class name.
func ValidateIngressSpec(spec *networkingv1.IngressSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.DefaultBackend == nil && len(spec.Rules) == 0 {
		errs = append(errs, field.Invalid(path, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(spec.DefaultBackend, path.Child("defaultBackend"))...)
	}
	for i, rule := range spec.Rules {
		rp := path.Child("rules").Index(i)
		if rule.Host != "" {
			errs = append(errs, validateHost(rule.Host, rp.Child("host"))...)
		}
		if rule.HTTP != nil {
			errs = append(errs, validateHTTPRule(rule.HTTP, rp.Child("http"))...)
		}
	}
	for i, tls := range spec.TLS {
		tp := path.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			errs = append(errs, dnsErrors(host, tp.Child("hosts").Index(j))...)
		}
		if tls.SecretName != "" {
			for _, msg := range validation.IsDNS1123Subdomain(tls.SecretName) {
				errs = append(errs, field.Invalid(tp.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*spec.IngressClassName) {
			errs = append(errs, field.Invalid(path.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return errs
}

// dnsErrors validates a host that may carry a leading wildcard.
func dnsErrors(host string, path *field.Path) field.ErrorList {
	var msgs []string
	if strings.Contains(host, "*") {
		msgs = validation.IsWildcardDNS1123Subdomain(host)
	} else {
		msgs = validation.IsDNS1123Subdomain(host)
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, host, msg))
	}
	return errs
}

func validateHost(host string, path *field.Path) field.ErrorList {
	if _, err := netip.ParseAddr(host); err == nil {
		return field.ErrorList{field.Invalid(path, host, "must be a DNS name, not an IP address")}
	}
	return dnsErrors(host, path)
}

var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
	supportedPathTypes   = []string{
		string(networkingv1.PathTypeExact), string(networkingv1.PathTypePrefix), string(networkingv1.PathTypeImplementationSpecific),
	}
)

func validateHTTPRule(http *networkingv1.HTTPIngressRuleValue, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(http.Paths) == 0 {
		errs = append(errs, field.Required(path.Child("paths"), ""))
	}
	for i, p := range http.Paths {
		pp := path.Child("paths").Index(i)
		errs = append(errs, validatePath(p, pp)...)
		errs = append(errs, validateBackend(&p.Backend, pp.Child("backend"))...)
	}
	return errs
}

func validatePath(p networkingv1.HTTPIngressPath, path *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(path.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(path.Child("path"), p.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(p.Path, seq) {
				errs = append(errs, field.Invalid(path.Child("path"), p.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suf := range invalidPathSuffixes {
			if strings.HasSuffix(p.Path, suf) {
				errs = append(errs, field.Invalid(path.Child("path"), p.Path, fmt.Sprintf("cannot end with '%s'", suf)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(path.Child("path"), p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("pathType"), *p.PathType, supportedPathTypes))
	}
	return errs
}

func validateBackend(b *networkingv1.IngressBackend, path *field.Path) field.ErrorList {
	switch {
	case b.Service != nil && b.Resource != nil:
		return field.ErrorList{field.Invalid(path, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		var errs field.ErrorList
		if b.Resource.APIGroup != nil && *b.Resource.APIGroup != "" {
			for _, msg := range validation.IsDNS1123Subdomain(*b.Resource.APIGroup) {
				errs = append(errs, field.Invalid(path.Child("resource", "apiGroup"), *b.Resource.APIGroup, msg))
			}
		}
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(path.Child("resource", "kind"), "kind is required"))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(path.Child("resource", "name"), "name is required"))
		}
		return errs
	case b.Service != nil:
		var errs field.ErrorList
		sp := path.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			for _, msg := range validation.IsDNS1035Label(b.Service.Name) {
				errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Name, msg))
			}
		}
		port := b.Service.Port
		hasName, hasNumber := port.Name != "", port.Number != 0
		switch {
		case hasName && hasNumber:
			errs = append(errs, field.Invalid(sp.Child("port"), port, "cannot set both port name & port number"))
		case hasName:
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), port.Name, msg))
			}
		case hasNumber:
			for _, msg := range validation.IsValidPortNum(int(port.Number)) {
				errs = append(errs, field.Invalid(sp.Child("port", "number"), port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(sp.Child("port"), "port name or number is required"))
		}
		return errs
	}
	return field.ErrorList{field.Invalid(path, "", "resource or service backend is required")}
}

// ValidateIngressStatus checks the load balancer entries.
func ValidateIngressStatus(st *networkingv1.IngressStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, in := range st.LoadBalancer.Ingress {
		ip := path.Child("loadBalancer", "ingress").Index(i)
		if in.IP != "" {
			errs = append(errs, validation.IsValidIP(ip.Child("ip"), in.IP)...)
		}
		if in.Hostname != "" {
			if _, err := netip.ParseAddr(in.Hostname); err == nil {
				errs = append(errs, field.Invalid(ip.Child("hostname"), in.Hostname, "must be a DNS name, not an IP address"))
			} else {
				for _, msg := range validation.IsDNS1123Subdomain(in.Hostname) {
					errs = append(errs, field.Invalid(ip.Child("hostname"), in.Hostname, msg))
				}
			}
		}
	}
	return errs
}

// TableColumns are kubectl's columns for ingresses.
func (IngressStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Class", Type: "string", Description: "The name of the IngressClass resource that should be used for additional configuration"},
		{Name: "Hosts", Type: "string", Description: "Hosts that incoming requests are matched against before the ingress rule"},
		{Name: "Address", Type: "string", Description: "Address is a list containing ingress points for the load-balancer"},
		{Name: "Ports", Type: "string", Description: "Ports of TLS configurations that open"},
		ageColumn(),
	}
}

// TableRow renders one ingress: class (or <none>), up to three hosts (or
// "*"), the load balancer addresses and 80 or "80, 443" with TLS.
func (IngressStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	ing := obj.(*networkingv1.Ingress)
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	ports := "80"
	if len(ing.Spec.TLS) != 0 {
		ports = "80, 443"
	}
	return []interface{}{ing.Name, class, ingressHosts(ing.Spec.Rules), ingressAddress(ing.Status.LoadBalancer), ports, registry.Age(ing.CreationTimestamp)}, nil
}

func ingressHosts(rules []networkingv1.IngressRule) string {
	const shown = 3
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == shown {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	out := strings.Join(hosts, ",")
	if more {
		out = fmt.Sprintf("%s + %d more...", out, len(rules)-shown)
	}
	return out
}

func ingressAddress(lb networkingv1.IngressLoadBalancerStatus) string {
	seen := map[string]bool{}
	var addrs []string
	for _, in := range lb.Ingress {
		a := in.IP
		if a == "" {
			a = in.Hostname
		}
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	sort.Strings(addrs)
	return strings.Join(addrs, ",")
}
