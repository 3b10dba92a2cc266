package networking

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// NetworkPolicyResource describes networking.k8s.io/v1 networkpolicies.
func NetworkPolicyResource() registry.Resource {
	return registry.Resource{
		GroupVersion:  networkingv1.SchemeGroupVersion,
		Resource:      "networkpolicies",
		Kind:          "NetworkPolicy",
		ListKind:      "NetworkPolicyList",
		SingularName:  "networkpolicy",
		ShortNames:    []string{"netpol"},
		Namespaced:    true,
		StoragePrefix: "networkpolicies",
		New:           func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList:       func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Strategy:      NetworkPolicyStrategy{},
	}
}

// NetworkPolicyStrategy is the networkpolicies strategy.
type NetworkPolicyStrategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = NetworkPolicyStrategy{}

// DefaultNetworkPolicy applies upstream's v1 defaults: ports default to
// TCP, and policyTypes, when empty, is Ingress plus Egress if egress rules
// are given.
func DefaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	defaultPorts := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) != 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

// PrepareForCreate applies defaults and sets generation 1.
func (NetworkPolicyStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	np := obj.(*networkingv1.NetworkPolicy)
	np.Generation = 1
	DefaultNetworkPolicy(np)
}

// PrepareForUpdate applies defaults and bumps generation on spec changes.
func (NetworkPolicyStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	np, o := obj.(*networkingv1.NetworkPolicy), old.(*networkingv1.NetworkPolicy)
	DefaultNetworkPolicy(np)
	np.Generation = o.Generation
	if !apiequality.Semantic.DeepEqual(np.Spec, o.Spec) {
		np.Generation = o.Generation + 1
	}
}

// Validate checks a new network policy.
func (NetworkPolicyStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateNetworkPolicySpec(&obj.(*networkingv1.NetworkPolicy).Spec, field.NewPath("spec"))
}

// ValidateUpdate checks an updated network policy.
func (NetworkPolicyStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateNetworkPolicySpec(&obj.(*networkingv1.NetworkPolicy).Spec, field.NewPath("spec"))
}

var supportedPolicyTypes = []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}

// ValidateNetworkPolicySpec checks selectors, ports, peers and policy types.
func ValidateNetworkPolicySpec(spec *networkingv1.NetworkPolicySpec, path *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(&spec.PodSelector, opts, path.Child("podSelector"))
	for i, rule := range spec.Ingress {
		rp := path.Child("ingress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validatePolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.From {
			errs = append(errs, validatePeer(&rule.From[j], rp.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		rp := path.Child("egress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validatePolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.To {
			errs = append(errs, validatePeer(&rule.To[j], rp.Child("to").Index(j))...)
		}
	}
	for i, pt := range spec.PolicyTypes {
		if pt != networkingv1.PolicyTypeIngress && pt != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(path.Child("policyTypes").Index(i), pt, supportedPolicyTypes))
		}
	}
	if len(spec.PolicyTypes) > 2 {
		errs = append(errs, field.Invalid(path.Child("policyTypes"), spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	return errs
}

var supportedProtocols = []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}

func validatePolicyPort(p *networkingv1.NetworkPolicyPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolSCTP {
		errs = append(errs, field.NotSupported(path.Child("protocol"), *p.Protocol, supportedProtocols))
	}
	if p.Port == nil {
		if p.EndPort != nil {
			errs = append(errs, field.Forbidden(path.Child("endPort"), "may not be specified when `port` is not specified"))
		}
		return errs
	}
	if p.Port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(int(p.Port.IntVal)) {
			errs = append(errs, field.Invalid(path.Child("port"), p.Port.IntVal, msg))
		}
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal {
				errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range validation.IsValidPortNum(int(*p.EndPort)) {
				errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, msg))
			}
		}
		return errs
	}
	if p.EndPort != nil {
		errs = append(errs, field.Forbidden(path.Child("endPort"), "may not be specified when `port` is non-numeric"))
	}
	for _, msg := range validation.IsValidPortName(p.Port.StrVal) {
		errs = append(errs, field.Invalid(path.Child("port"), p.Port.StrVal, msg))
	}
	return errs
}

func validatePeer(peer *networkingv1.NetworkPolicyPeer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, path.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, path.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, validateIPBlock(peer.IPBlock, path.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(path, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(path, "may not specify both ipBlock and another peer"))
	}
	return errs
}

func validateIPBlock(b *networkingv1.IPBlock, path *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(path.Child("cidr"), "")}
	}
	errs := validation.IsValidCIDR(path.Child("cidr"), b.CIDR)
	cidr, cidrErr := netip.ParsePrefix(b.CIDR)
	for i, e := range b.Except {
		ep := path.Child("except").Index(i)
		eerrs := validation.IsValidCIDR(ep, e)
		errs = append(errs, eerrs...)
		if len(eerrs) != 0 || cidrErr != nil {
			continue
		}
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			continue
		}
		if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// TableColumns are kubectl's columns for network policies.
func (NetworkPolicyStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		{Name: "Pod-Selector", Type: "string", Description: networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]},
		ageColumn(),
	}
}

// TableRow renders one network policy.
func (NetworkPolicyStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	np := obj.(*networkingv1.NetworkPolicy)
	return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), registry.Age(np.CreationTimestamp)}, nil
}
