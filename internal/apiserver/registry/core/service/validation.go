package service

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	supportedTypes = []string{
		string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeExternalName),
		string(corev1.ServiceTypeLoadBalancer), string(corev1.ServiceTypeNodePort),
	}
	supportedProtocols       = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}
	supportedAffinity        = []string{string(corev1.ServiceAffinityClientIP), string(corev1.ServiceAffinityNone)}
	supportedTrafficPolicies = []string{"Cluster", "Local"}
	supportedFamilyPolicies  = []string{
		string(corev1.IPFamilyPolicyPreferDualStack), string(corev1.IPFamilyPolicyRequireDualStack),
		string(corev1.IPFamilyPolicySingleStack),
	}
	supportedFamilies = []string{string(corev1.IPv4Protocol), string(corev1.IPv6Protocol)}
)

// maxClientIPTimeoutSeconds bounds sessionAffinityConfig.clientIP.timeoutSeconds.
const maxClientIPTimeoutSeconds = 86400

// Validate checks a service (after defaults) for a cluster whose service
// CIDR is of family.
func Validate(svc *corev1.Service, family corev1.IPFamily) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	headless := isHeadless(svc)

	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}

	switch spec.Type {
	case "":
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), corev1.ClusterIPNone,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(spec.ClusterIPs) > 0 || spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		name := strings.TrimSuffix(spec.ExternalName, ".")
		if name == "" {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(specPath.Child("externalName"), spec.ExternalName, msg))
			}
		}
	case corev1.ServiceTypeClusterIP:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("type"), spec.Type, supportedTypes))
	}

	errs = append(errs, validatePorts(svc, specPath.Child("ports"))...)
	errs = append(errs, validateSessionAffinity(svc, specPath)...)
	errs = append(errs, validateClusterIPs(svc, specPath)...)

	for i, ip := range spec.ExternalIPs {
		errs = append(errs, validation.IsValidIP(specPath.Child("externalIPs").Index(i), ip)...)
	}
	errs = append(errs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)

	if len(spec.LoadBalancerSourceRanges) > 0 && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(specPath.Child("loadBalancerSourceRanges"), "may only be used when `type` is 'LoadBalancer'"))
	}
	for i, r := range spec.LoadBalancerSourceRanges {
		if _, err := netip.ParsePrefix(strings.TrimSpace(r)); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("loadBalancerSourceRanges").Index(i), r,
				"must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
		}
	}

	errs = append(errs, validateTrafficPolicies(svc, specPath)...)

	if spec.Type == corev1.ServiceTypeLoadBalancer {
		if spec.AllocateLoadBalancerNodePorts == nil {
			errs = append(errs, field.Required(specPath.Child("allocateLoadBalancerNodePorts"), ""))
		}
	} else if spec.AllocateLoadBalancerNodePorts != nil {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.LoadBalancerClass != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(specPath.Child("loadBalancerClass"), "may only be used when service type is 'LoadBalancer'"))
	}

	errs = append(errs, validateIPFamilies(svc, family, specPath)...)
	return errs
}

func validatePorts(svc *corev1.Service, portsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	ports := svc.Spec.Ports
	requireName := len(ports) > 1
	names := map[string]bool{}
	type portKey struct {
		Port     int32
		Protocol corev1.Protocol
	}
	seenPorts := map[portKey]bool{}
	seenNodePorts := map[portKey]bool{}
	for i := range ports {
		p := &ports[i]
		idx := portsPath.Index(i)
		if requireName && p.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		} else if p.Name != "" {
			for _, msg := range validation.IsDNS1123Label(p.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), p.Name, msg))
			}
			if names[p.Name] {
				errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(p.Port)) {
			errs = append(errs, field.Invalid(idx.Child("port"), p.Port, msg))
		}
		errs = append(errs, validateProtocol(p.Protocol, idx.Child("protocol"))...)
		errs = append(errs, validatePortNumOrName(p.TargetPort, idx.Child("targetPort"))...)
		if p.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
				errs = append(errs, field.Invalid(idx.Child("appProtocol"), *p.AppProtocol, msg))
			}
		}

		key := portKey{Port: p.Port, Protocol: p.Protocol}
		if seenPorts[key] {
			errs = append(errs, field.Duplicate(idx, key))
		}
		seenPorts[key] = true

		if p.NodePort != 0 {
			switch svc.Spec.Type {
			case corev1.ServiceTypeClusterIP:
				errs = append(errs, field.Forbidden(idx.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			case corev1.ServiceTypeExternalName:
				errs = append(errs, field.Forbidden(idx.Child("nodePort"), "may not be used when `type` is 'ExternalName'"))
			}
			for _, msg := range validation.IsValidPortNum(int(p.NodePort)) {
				errs = append(errs, field.Invalid(idx.Child("nodePort"), p.NodePort, msg))
			}
			nk := portKey{Port: p.NodePort, Protocol: p.Protocol}
			if seenNodePorts[nk] {
				errs = append(errs, field.Duplicate(idx.Child("nodePort"), p.NodePort))
			}
			seenNodePorts[nk] = true
		}
	}
	return errs
}

func validateProtocol(p corev1.Protocol, path *field.Path) field.ErrorList {
	switch p {
	case "":
		return field.ErrorList{field.Required(path, "")}
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, p, supportedProtocols)}
}

// validatePortNumOrName checks a targetPort: a port number or an IANA
// service name.
func validatePortNumOrName(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(v.IntVal)) {
			errs = append(errs, field.Invalid(path, v.IntVal, msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(v.StrVal) {
			errs = append(errs, field.Invalid(path, v.StrVal, msg))
		}
	default:
		errs = append(errs, field.Invalid(path, v, "must be an integer or string"))
	}
	return errs
}

func validateSessionAffinity(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	switch spec.SessionAffinity {
	case "":
		errs = append(errs, field.Required(specPath.Child("sessionAffinity"), ""))
	case corev1.ServiceAffinityClientIP:
		cfgPath := specPath.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds")
		if spec.SessionAffinityConfig == nil || spec.SessionAffinityConfig.ClientIP == nil || spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			errs = append(errs, field.Required(cfgPath, ""))
		} else if t := *spec.SessionAffinityConfig.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPTimeoutSeconds {
			errs = append(errs, field.Invalid(cfgPath, t, fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPTimeoutSeconds)))
		}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Invalid(specPath.Child("sessionAffinityConfig"), spec.SessionAffinityConfig,
				fmt.Sprintf("must not be set when `sessionAffinity` is %s", corev1.ServiceAffinityNone)))
		}
	default:
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity, supportedAffinity))
	}
	return errs
}

func validateClusterIPs(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	ipsPath := specPath.Child("clusterIPs")
	if len(spec.ClusterIPs) > 0 && spec.ClusterIP != spec.ClusterIPs[0] {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "first value must match `clusterIP`"))
	}
	if len(spec.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "may only hold up to 2 values"))
	}
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			if i > 0 || len(spec.ClusterIPs) > 1 {
				errs = append(errs, field.Invalid(ipsPath, spec.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			errs = append(errs, field.Invalid(ipsPath.Index(i), ip, "must be empty, 'None', or a valid IP address"))
		}
	}
	return errs
}

func validateTrafficPolicies(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	etpPath := specPath.Child("externalTrafficPolicy")
	if !externallyAccessible(svc) {
		if spec.ExternalTrafficPolicy != "" {
			errs = append(errs, field.Invalid(etpPath, spec.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		errs = append(errs, field.Required(etpPath, ""))
	} else if spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(etpPath, spec.ExternalTrafficPolicy, supportedTrafficPolicies))
	}
	if spec.HealthCheckNodePort != 0 {
		if !needsHealthCheckNodePort(svc) {
			errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		} else {
			for _, msg := range validation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
				errs = append(errs, field.Invalid(specPath.Child("healthCheckNodePort"), spec.HealthCheckNodePort, msg))
			}
		}
	}
	itpPath := specPath.Child("internalTrafficPolicy")
	if spec.Type != corev1.ServiceTypeExternalName {
		if spec.InternalTrafficPolicy == nil {
			errs = append(errs, field.Required(itpPath, ""))
		} else if p := *spec.InternalTrafficPolicy; p != corev1.ServiceInternalTrafficPolicyCluster && p != corev1.ServiceInternalTrafficPolicyLocal {
			errs = append(errs, field.NotSupported(itpPath, p, supportedTrafficPolicies))
		}
	}
	return errs
}

func validateIPFamilies(svc *corev1.Service, family corev1.IPFamily, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	spec := &svc.Spec
	if spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	policyPath := specPath.Child("ipFamilyPolicy")
	if spec.IPFamilyPolicy == nil {
		errs = append(errs, field.Required(policyPath, ""))
	} else {
		switch p := *spec.IPFamilyPolicy; p {
		case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack:
		case corev1.IPFamilyPolicyRequireDualStack:
			if !(isHeadless(svc) && len(spec.Selector) == 0) {
				errs = append(errs, field.Invalid(policyPath, p, "this cluster is not configured for dual-stack services"))
			}
		default:
			errs = append(errs, field.NotSupported(policyPath, p, supportedFamilyPolicies))
		}
	}
	famPath := specPath.Child("ipFamilies")
	if len(spec.IPFamilies) > 2 {
		errs = append(errs, field.Invalid(famPath, spec.IPFamilies, "may only hold up to 2 values"))
	}
	if len(spec.IPFamilies) > 1 && spec.IPFamilyPolicy != nil && *spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack {
		errs = append(errs, field.Invalid(famPath, spec.IPFamilies, "must contain exactly one entry for single-stack services"))
	}
	seen := map[corev1.IPFamily]bool{}
	for i, f := range spec.IPFamilies {
		switch {
		case f != corev1.IPv4Protocol && f != corev1.IPv6Protocol:
			errs = append(errs, field.NotSupported(famPath.Index(i), f, supportedFamilies))
		case seen[f]:
			errs = append(errs, field.Duplicate(famPath.Index(i), f))
		case f != family:
			errs = append(errs, field.Invalid(famPath.Index(i), f, "not configured on this cluster"))
		}
		seen[f] = true
	}
	if len(spec.IPFamilies) > 0 && len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != corev1.ClusterIPNone {
		if a, err := netip.ParseAddr(spec.ClusterIPs[0]); err == nil && familyOf(a) != spec.IPFamilies[0] {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), spec.ClusterIPs[0],
				fmt.Sprintf("expected an %s value as indicated by `ipFamilies[0]`", spec.IPFamilies[0])))
		}
	}
	return errs
}

// ValidateUpdate checks svc against old: everything Validate checks, plus
// that the primary ClusterIP and IP family do not change (except to or from
// ExternalName).
func ValidateUpdate(svc, old *corev1.Service, family corev1.IPFamily) field.ErrorList {
	errs := Validate(svc, family)
	ipsPath := field.NewPath("spec", "clusterIPs")
	if svc.Spec.Type != corev1.ServiceTypeExternalName && old.Spec.Type != corev1.ServiceTypeExternalName &&
		!(isHeadless(svc) && isHeadless(old)) {
		newIPs, oldIPs := svc.Spec.ClusterIPs, old.Spec.ClusterIPs
		switch {
		case len(newIPs) == len(oldIPs):
			for i := range oldIPs {
				if oldIPs[i] != newIPs[i] {
					errs = append(errs, field.Invalid(ipsPath.Index(i), newIPs, "may not change once set"))
				}
			}
		case len(newIPs) < len(oldIPs):
			if len(newIPs) == 0 {
				errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "primary clusterIP can not be unset"))
			} else if newIPs[0] != oldIPs[0] {
				errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "may not change once set"))
			}
		default:
			if len(oldIPs) > 0 && oldIPs[0] != newIPs[0] {
				errs = append(errs, field.Invalid(ipsPath.Index(0), newIPs, "may not change once set"))
			}
		}
		if len(old.Spec.IPFamilies) > 0 && len(svc.Spec.IPFamilies) > 0 && old.Spec.IPFamilies[0] != svc.Spec.IPFamilies[0] {
			errs = append(errs, field.Invalid(field.NewPath("spec", "ipFamilies").Index(0), svc.Spec.IPFamilies, "may not change once set"))
		}
	}
	return errs
}

// ValidateStatus checks the load balancer ingress addresses.
func ValidateStatus(svc *corev1.Service) field.ErrorList {
	var errs field.ErrorList
	ingPath := field.NewPath("status", "loadBalancer", "ingress")
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		idx := ingPath.Index(i)
		if ing.IP != "" {
			errs = append(errs, validation.IsValidIP(idx.Child("ip"), ing.IP)...)
		}
		if ing.Hostname != "" {
			for _, msg := range validation.IsDNS1123Subdomain(ing.Hostname) {
				errs = append(errs, field.Invalid(idx.Child("hostname"), ing.Hostname, msg))
			}
			if _, err := netip.ParseAddr(ing.Hostname); err == nil {
				errs = append(errs, field.Invalid(idx.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return errs
}
