package netpol

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/proxy/nft"
)

// The enforcer's own table.
const (
	Family = "ip"
	Table  = "skiff-netpol"
)

const (
	forwardChain = "forward"
	inputChain   = "input"
	ingressMap   = "ingress-pods"
	egressMap    = "egress-pods"
	dnsSet       = "dns-allow"
	denyChain    = "deny"
)

// Dest is an address, protocol and port always allowed for egress: the
// cluster DNS.
type Dest struct {
	IP       netip.Addr
	Protocol v1.Protocol
	Port     int32
}

// Input is one snapshot.
type Input struct {
	// NodeName: only pods on this node get chains ("" means every pod).
	NodeName   string
	Pods       []*v1.Pod
	Namespaces []*v1.Namespace
	Policies   []*networkingv1.NetworkPolicy
	// AlwaysAllowed destinations (the cluster DNS), whatever egress
	// policies say.
	AlwaysAllowed []Dest
}

type pod struct {
	p  *v1.Pod
	ip netip.Addr
}

// index is the snapshot made searchable.
type index struct {
	pods     []pod
	nsLabels map[string]labels.Set
}

func podIP(p *v1.Pod) (netip.Addr, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return netip.Addr{}, false
	}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []v1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s.IP); err == nil && ip.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// selectPods are the pods a peer's selectors pick, seen from a policy in
// namespace ns.
func (x *index) selectPods(ns string, podSel, nsSel *metav1.LabelSelector) []pod {
	var ps, nss labels.Selector = labels.Everything(), nil
	if podSel != nil {
		s, err := metav1.LabelSelectorAsSelector(podSel)
		if err != nil {
			return nil
		}
		ps = s
	}
	if nsSel != nil {
		s, err := metav1.LabelSelectorAsSelector(nsSel)
		if err != nil {
			return nil
		}
		nss = s
	}
	var out []pod
	for _, p := range x.pods {
		if nss == nil {
			if p.p.Namespace != ns {
				continue
			}
		} else if !nss.Matches(x.nsLabels[p.p.Namespace]) {
			continue
		}
		if ps.Matches(labels.Set(p.p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func chainName(prefix string, p *v1.Pod) string {
	key := p.Namespace + "/" + p.Name
	sum := sha256.Sum256([]byte(key + "/" + string(p.UID)))
	if len(key) > 180 {
		key = key[:180]
	}
	return prefix + "-" + base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + key
}

// namedPort resolves a named port on a pod's containers.
func namedPort(p *v1.Pod, name string, proto v1.Protocol) (int32, bool) {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			pr := cp.Protocol
			if pr == "" {
				pr = v1.ProtocolTCP
			}
			if cp.Name == name && pr == proto {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

func l4(proto v1.Protocol) string { return strings.ToLower(string(proto)) }

// portMatch renders one NetworkPolicyPort; named ports resolve against
// pod (nil: unresolvable). ok is false when it matches nothing.
func portMatch(np networkingv1.NetworkPolicyPort, p *v1.Pod) (string, bool) {
	proto := v1.ProtocolTCP
	if np.Protocol != nil {
		proto = *np.Protocol
	}
	if np.Port == nil {
		return "meta l4proto " + l4(proto), true
	}
	port := np.Port.IntVal
	if np.Port.StrVal != "" {
		if p == nil {
			return "", false
		}
		var ok bool
		if port, ok = namedPort(p, np.Port.StrVal, proto); !ok {
			return "", false
		}
		return fmt.Sprintf("meta l4proto %s th dport %d", l4(proto), port), true
	}
	if np.EndPort != nil && *np.EndPort > port {
		return fmt.Sprintf("meta l4proto %s th dport %d-%d", l4(proto), port, *np.EndPort), true
	}
	return fmt.Sprintf("meta l4proto %s th dport %d", l4(proto), port), true
}

func ipSet(ps []pod) string {
	ips := make([]string, 0, len(ps))
	seen := map[netip.Addr]bool{}
	for _, p := range ps {
		if !seen[p.ip] {
			seen[p.ip] = true
			ips = append(ips, p.ip.String())
		}
	}
	sort.Slice(ips, func(i, j int) bool {
		return netip.MustParseAddr(ips[i]).Less(netip.MustParseAddr(ips[j]))
	})
	return "{ " + strings.Join(ips, ", ") + " }"
}

func ipBlock(dir string, b *networkingv1.IPBlock) (string, bool) {
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !pfx.Addr().Is4() {
		return "", false
	}
	s := fmt.Sprintf("ip %s %s", dir, pfx.Masked())
	var ex []string
	for _, e := range b.Except {
		if p, err := netip.ParsePrefix(e); err == nil && p.Addr().Is4() {
			ex = append(ex, p.Masked().String())
		}
	}
	if len(ex) > 0 {
		s += fmt.Sprintf(" ip %s != { %s }", dir, strings.Join(ex, ", "))
	}
	return s, true
}

// Compute is the pure core: the enforcer's table for a snapshot.
func Compute(in Input) *nft.Ruleset {
	r := nft.New(Family, Table)
	x := &index{nsLabels: map[string]labels.Set{}}
	for _, ns := range in.Namespaces {
		x.nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	for _, p := range in.Pods {
		if ip, ok := podIP(p); ok {
			x.pods = append(x.pods, pod{p: p, ip: ip})
		}
	}
	sort.Slice(x.pods, func(i, j int) bool {
		a, b := x.pods[i].p, x.pods[j].p
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	policies := append([]*networkingv1.NetworkPolicy(nil), in.Policies...)
	sort.Slice(policies, func(i, j int) bool {
		return policies[i].Namespace+"/"+policies[i].Name < policies[j].Namespace+"/"+policies[j].Name
	})

	r.Chain(forwardChain, "type filter hook forward priority 0; policy accept;")
	r.Chain(inputChain, "type filter hook input priority 0; policy accept;")
	r.Set(ingressMap, true, "type ipv4_addr : verdict;", true)
	r.Set(egressMap, true, "type ipv4_addr : verdict;", true)
	r.Set(dnsSet, false, "type ipv4_addr . inet_proto . inet_service;", true)
	r.Add(forwardChain, "ct state established,related accept")
	r.Add(forwardChain, "ip saddr vmap @%s", egressMap)
	r.Add(forwardChain, "ip daddr vmap @%s", ingressMap)
	r.Add(inputChain, "ct state established,related accept")
	r.Add(inputChain, "ip saddr vmap @%s", egressMap)
	// Denied traffic is rejected, not dropped, so that clients fail at
	// once; TCP gets a reset (ICMP errors are rate-limited per host).
	r.Add(denyChain, "meta l4proto tcp reject with tcp reset")
	r.Add(denyChain, "reject with icmp type admin-prohibited")
	seenDNS := map[string]bool{}
	for _, d := range in.AlwaysAllowed {
		e := fmt.Sprintf("%s . %s . %d", d.IP, l4(d.Protocol), d.Port)
		if !seenDNS[e] {
			seenDNS[e] = true
			r.Elem(dnsSet, "%s", e)
		}
	}

	for _, p := range x.pods {
		if in.NodeName != "" && p.p.Spec.NodeName != in.NodeName {
			continue
		}
		var ingress, egress []*networkingv1.NetworkPolicy
		for _, np := range policies {
			if np.Namespace != p.p.Namespace {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(p.p.Labels)) {
				continue
			}
			i, e := policyTypes(np)
			if i {
				ingress = append(ingress, np)
			}
			if e {
				egress = append(egress, np)
			}
		}
		if len(ingress) > 0 {
			c := chainName("ingress", p.p)
			r.Chain(c, "")
			for _, rule := range dedupe(ingressRules(x, p, ingress)) {
				r.Add(c, "%s", strings.TrimSpace(rule+" accept"))
			}
			r.Add(c, "goto %s", denyChain)
			r.Elem(ingressMap, "%s : goto %s", p.ip, c)
		}
		if len(egress) > 0 {
			c := chainName("egress", p.p)
			r.Chain(c, "")
			r.Add(c, "ip daddr . meta l4proto . th dport @%s return", dnsSet)
			for _, rule := range dedupe(egressRules(x, egress)) {
				r.Add(c, "%s", strings.TrimSpace(rule+" return"))
			}
			r.Add(c, "goto %s", denyChain)
			r.Elem(egressMap, "%s : jump %s", p.ip, c)
		}
	}
	return r
}

func dedupe(rules []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rules {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

func join(parts ...string) string {
	var nonEmpty []string
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	return strings.Join(nonEmpty, " ")
}

// ingressRules are the match expressions that allow traffic into p.
func ingressRules(x *index, p pod, policies []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, np := range policies {
		for _, rule := range np.Spec.Ingress {
			ports := []string{""}
			if len(rule.Ports) > 0 {
				ports = nil
				for _, pp := range rule.Ports {
					if m, ok := portMatch(pp, p.p); ok {
						ports = append(ports, m)
					}
				}
			}
			srcs := []string{""}
			if len(rule.From) > 0 {
				srcs = nil
				for _, peer := range rule.From {
					if peer.IPBlock != nil {
						if s, ok := ipBlock("saddr", peer.IPBlock); ok {
							srcs = append(srcs, s)
						}
						continue
					}
					if pods := x.selectPods(np.Namespace, peer.PodSelector, peer.NamespaceSelector); len(pods) > 0 {
						srcs = append(srcs, "ip saddr "+ipSet(pods))
					}
				}
			}
			for _, s := range srcs {
				for _, pm := range ports {
					out = append(out, join(s, pm))
				}
			}
		}
	}
	return out
}

// egressRules are the match expressions that allow traffic out of a pod.
// Named ports resolve against each destination pod.
func egressRules(x *index, policies []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, np := range policies {
		for _, rule := range np.Spec.Egress {
			type dst struct {
				match string
				pods  []pod // nil for ipBlock or "anywhere"
				any   bool
			}
			var dsts []dst
			if len(rule.To) == 0 {
				dsts = []dst{{any: true}}
			}
			for _, peer := range rule.To {
				if peer.IPBlock != nil {
					if s, ok := ipBlock("daddr", peer.IPBlock); ok {
						dsts = append(dsts, dst{match: s})
					}
					continue
				}
				if pods := x.selectPods(np.Namespace, peer.PodSelector, peer.NamespaceSelector); len(pods) > 0 {
					dsts = append(dsts, dst{match: "ip daddr " + ipSet(pods), pods: pods})
				}
			}
			for _, d := range dsts {
				if len(rule.Ports) == 0 {
					out = append(out, join(d.match))
					continue
				}
				for _, pp := range rule.Ports {
					if pp.Port == nil || pp.Port.StrVal == "" {
						m, _ := portMatch(pp, nil)
						out = append(out, join(d.match, m))
						continue
					}
					// A named port: group the destination pods by what the
					// name means on each.
					candidates := d.pods
					if d.any {
						candidates = x.pods
					}
					byPort := map[string][]pod{}
					var keys []string
					for _, dp := range candidates {
						if m, ok := portMatch(pp, dp.p); ok {
							if _, seen := byPort[m]; !seen {
								keys = append(keys, m)
							}
							byPort[m] = append(byPort[m], dp)
						}
					}
					for _, m := range keys {
						out = append(out, join("ip daddr "+ipSet(byPort[m]), m))
					}
				}
			}
		}
	}
	return out
}
