package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"github.com/skiff-sh/skiff/internal/proxy/nft"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Table is the nftables table the proxy owns, in family ip (IPv4) and,
// when the proxy has IPv6 networks, in family ip6.
const (
	Family  = "ip"
	Family6 = "ip6"
	Table   = "skiff-proxy"
	// MasqueradeMark is the packet mark bit that asks the masquerading
	// chain to SNAT a connection, upstream's 0x4000.
	MasqueradeMark = "0x4000"
)

// Chains and containers with fixed names, as upstream names them.
const (
	natPrerouting          = "nat-prerouting"
	natOutput              = "nat-output"
	natPostrouting         = "nat-postrouting"
	filterInput            = "filter-input"
	filterForward          = "filter-forward"
	filterOutput           = "filter-output"
	filterPreroutingPre    = "filter-prerouting-pre-dnat"
	filterOutputPre        = "filter-output-pre-dnat"
	firewallCheck          = "firewall-check"
	firewallIPsMap         = "firewall-ips"
	nodePortIPsSet         = "nodeport-ips"
	servicesChain          = "services"
	markMasqChain          = "mark-for-masquerade"
	masqueradingChain      = "masquerading"
	serviceEndpointsCheck  = "service-endpoints-check"
	nodePortEndpointsCheck = "nodeport-endpoints-check"
	clusterIPsCheck        = "cluster-ips-check"
	rejectChain            = "reject-chain"
	clusterIPsSet          = "cluster-ips"
	serviceIPsMap          = "service-ips"
	serviceNodePortsMap    = "service-nodeports"
	noEndpointServicesMap  = "no-endpoint-services"
	noEndpointNodePortsMap = "no-endpoint-nodeports"
	hairpinSet             = "hairpin-connections"
)

// hashName gives upstream-shaped names: prefix-HASH8-readable. The hash
// makes names unique; the readable part (cut to keep names under nft's
// limits) is for people reading `nft list table`.
func hashName(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := base32.StdEncoding.EncodeToString(sum[:])[:8]
	if len(key) > 180 {
		key = key[:180]
	}
	return prefix + "-" + h + "-" + key
}

func portKey(p ServicePort) string {
	name := p.PortName
	if name == "" {
		name = strconv.Itoa(int(p.Port))
	}
	return p.Namespace + "/" + p.Name + "/" + strings.ToLower(string(p.Protocol)) + "/" + name
}

func proto(p ServicePort) string { return strings.ToLower(string(p.Protocol)) }

// fam is what differs between the ip and ip6 tables' rule text.
type fam struct {
	nf       string // table family and address match: "ip" or "ip6"
	addr     string // set key type
	loopback string // NodePorts never answer there
}

func familyOf(in Input) fam {
	if in.IPv6 {
		return fam{nf: Family6, addr: "ipv6_addr", loopback: "::1"}
	}
	return fam{nf: Family, addr: "ipv4_addr", loopback: "127.0.0.0/8"}
}

// Family is the nftables family of the table the input is for.
func (in Input) Family() string { return familyOf(in).nf }

// Compute is the pure core: the table content for a snapshot.
func Compute(in Input) *nft.Ruleset {
	f := familyOf(in)
	r := nft.New(f.nf, Table)
	base := func(name, typ, hook, prio string) {
		r.Chain(name, fmt.Sprintf("type %s hook %s priority %s; policy accept;", typ, hook, prio))
	}
	// Priorities as numbers (dstnat -100, srcnat 100, filter 0): nft
	// accepts the names only on some hooks.
	base(natPrerouting, "nat", "prerouting", "-100")
	base(natOutput, "nat", "output", "-100")
	base(natPostrouting, "nat", "postrouting", "100")
	base(filterInput, "filter", "input", "0")
	base(filterForward, "filter", "forward", "0")
	base(filterOutput, "filter", "output", "0")
	// loadBalancerSourceRanges are checked before DNAT (dstnat - 10), on
	// the load-balancer address the client used.
	base(filterPreroutingPre, "filter", "prerouting", "-110")
	base(filterOutputPre, "filter", "output", "-110")
	r.Add(filterPreroutingPre, "ct state new jump %s", firewallCheck)
	r.Add(filterOutputPre, "ct state new jump %s", firewallCheck)
	r.Add(natPrerouting, "jump %s", servicesChain)
	r.Add(natOutput, "jump %s", servicesChain)
	r.Add(natPostrouting, "jump %s", masqueradingChain)
	r.Add(filterInput, "ct state new jump %s", nodePortEndpointsCheck)
	r.Add(filterInput, "ct state new jump %s", serviceEndpointsCheck)
	for _, c := range []string{filterForward, filterOutput} {
		r.Add(c, "ct state new jump %s", serviceEndpointsCheck)
		r.Add(c, "ct state new jump %s", clusterIPsCheck)
	}

	r.Set(clusterIPsSet, false, "type "+f.addr+";", true)
	r.Set(serviceIPsMap, true, "type "+f.addr+" . inet_proto . inet_service : verdict;", true)
	r.Set(serviceNodePortsMap, true, "type inet_proto . inet_service : verdict;", true)
	r.Set(noEndpointServicesMap, true, "type "+f.addr+" . inet_proto . inet_service : verdict;", true)
	r.Set(noEndpointNodePortsMap, true, "type inet_proto . inet_service : verdict;", true)
	r.Set(hairpinSet, false, "type "+f.addr+" . "+f.addr+" . inet_proto . inet_service;", true)
	r.Set(firewallIPsMap, true, "type "+f.addr+" . inet_proto . inet_service : verdict;", true)
	r.Add(firewallCheck, "%s daddr . meta l4proto . th dport vmap @%s", f.nf, firewallIPsMap)
	// NodePorts answer on every local address but loopback, or with
	// --nodeport-addresses only on the addresses in nodeport-ips.
	nodePortMatch := "fib daddr type local " + f.nf + " daddr != " + f.loopback
	if in.NodePortAddresses != nil {
		r.Set(nodePortIPsSet, false, "type "+f.addr+";", true)
		for _, a := range in.NodePortAddresses {
			r.Elem(nodePortIPsSet, "%s", a)
		}
		nodePortMatch = f.nf + " daddr @" + nodePortIPsSet
	}

	r.Add(markMasqChain, "mark set mark or %s", MasqueradeMark)
	r.Add(masqueradingChain, "mark and %s != 0 mark set mark xor %s masquerade fully-random", MasqueradeMark, MasqueradeMark)
	r.Add(masqueradingChain, "ct status dnat %s saddr . %s daddr . meta l4proto . th dport @%s masquerade fully-random", f.nf, f.nf, hairpinSet)

	if in.ClusterCIDR.IsValid() {
		r.Add(servicesChain, "%s daddr @%s %s saddr != %s jump %s", f.nf, clusterIPsSet, f.nf, in.ClusterCIDR, markMasqChain)
	}
	r.Add(servicesChain, "%s daddr . meta l4proto . th dport vmap @%s", f.nf, serviceIPsMap)
	r.Add(servicesChain, "%s meta l4proto . th dport vmap @%s", nodePortMatch, serviceNodePortsMap)
	r.Add(serviceEndpointsCheck, "%s daddr . meta l4proto . th dport vmap @%s", f.nf, noEndpointServicesMap)
	r.Add(nodePortEndpointsCheck, "%s meta l4proto . th dport vmap @%s", nodePortMatch, noEndpointNodePortsMap)
	r.Add(clusterIPsCheck, "%s daddr @%s goto %s", f.nf, clusterIPsSet, rejectChain)
	if len(in.ServiceCIDRs) > 0 {
		cidrs := make([]string, len(in.ServiceCIDRs))
		for i, c := range in.ServiceCIDRs {
			cidrs[i] = c.String()
		}
		set := cidrs[0]
		if len(cidrs) > 1 {
			set = "{ " + strings.Join(cidrs, ", ") + " }"
		}
		r.Add(clusterIPsCheck, "%s daddr %s drop", f.nf, set)
	}
	// TCP gets a reset rather than upstream's ICMP port-unreachable: the
	// kernel rate-limits ICMP errors per destination (a client that just
	// got a redirect or another error would wait for its connect timeout),
	// and never rate-limits resets.
	r.Add(rejectChain, "meta l4proto tcp reject with tcp reset")
	r.Add(rejectChain, "reject")

	ports := append([]ServicePort(nil), in.Ports...)
	sort.Slice(ports, func(i, j int) bool { return portKey(ports[i]) < portKey(ports[j]) })
	clusterIPs := map[netip.Addr]bool{}
	hairpins := map[string]bool{}
	for _, p := range ports {
		computePort(r, in, p, clusterIPs, hairpins)
	}
	return r
}

func computePort(r *nft.Ruleset, in Input, p ServicePort, clusterIPs map[netip.Addr]bool, hairpins map[string]bool) {
	key := portKey(p)
	pr := proto(p)
	f := familyOf(in)
	clusterEps := usable(p.Endpoints)
	var locals []Endpoint
	for _, ep := range p.Endpoints {
		if ep.Local {
			locals = append(locals, ep)
		}
	}
	localEps := usable(locals)
	hasEndpoints := len(clusterEps) > 0

	clusterChain := hashName("service", key)
	localChain := hashName("local", key)
	externalChain := hashName("external", key)
	external := p.externallyAccessible()
	usesCluster := hasEndpoints && (!p.InternalLocal || (external && !p.ExternalLocal))
	usesLocal := len(localEps) > 0 && (p.InternalLocal || (external && p.ExternalLocal))

	internalChain, hasInternal := clusterChain, hasEndpoints
	if p.InternalLocal {
		internalChain, hasInternal = localChain, len(localEps) > 0
	}
	externalPolicy, hasExternal := clusterChain, hasEndpoints
	if p.ExternalLocal {
		externalPolicy, hasExternal = localChain, len(localEps) > 0
	}
	internalVerdict, externalVerdict := "drop", "drop"
	if !hasEndpoints {
		internalVerdict, externalVerdict = "goto "+rejectChain, "goto "+rejectChain
	}

	if !clusterIPs[p.ClusterIP] {
		clusterIPs[p.ClusterIP] = true
		r.Elem(clusterIPsSet, "%s", p.ClusterIP)
	}
	if hasInternal {
		r.Elem(serviceIPsMap, "%s . %s . %d : goto %s", p.ClusterIP, pr, p.Port, internalChain)
	} else {
		r.Elem(noEndpointServicesMap, "%s . %s . %d : %s", p.ClusterIP, pr, p.Port, internalVerdict)
	}
	if len(p.LoadBalancerIPs) > 0 && len(p.SourceRanges) > 0 {
		// loadBalancerSourceRanges: other sources are dropped before DNAT.
		// The node itself may connect when a range holds its address: its
		// traffic to a local load-balancer address comes from that address.
		fw := hashName("firewall", key)
		var sources []string
		allowNode := false
		for _, c := range p.SourceRanges {
			sources = append(sources, c.String())
			if in.NodeIP.IsValid() && c.Contains(in.NodeIP) {
				allowNode = true
			}
		}
		if allowNode {
			for _, ip := range p.LoadBalancerIPs {
				sources = append(sources, ip.String())
			}
		}
		r.Chain(fw, "")
		r.Add(fw, "%s saddr != { %s } drop", f.nf, strings.Join(sources, ", "))
		for _, ip := range p.LoadBalancerIPs {
			r.Elem(firewallIPsMap, "%s . %s . %d : goto %s", ip, pr, p.Port, fw)
		}
	}
	for _, ip := range append(append([]netip.Addr(nil), p.ExternalIPs...), p.LoadBalancerIPs...) {
		if hasEndpoints {
			r.Elem(serviceIPsMap, "%s . %s . %d : goto %s", ip, pr, p.Port, externalChain)
		}
		if !hasExternal {
			r.Elem(noEndpointServicesMap, "%s . %s . %d : %s", ip, pr, p.Port, externalVerdict)
		}
	}
	if p.NodePort != 0 {
		if hasEndpoints {
			r.Elem(serviceNodePortsMap, "%s . %d : goto %s", pr, p.NodePort, externalChain)
		}
		if !hasExternal {
			r.Elem(noEndpointNodePortsMap, "%s . %d : %s", pr, p.NodePort, externalVerdict)
		}
	}
	if !hasEndpoints {
		return
	}

	for _, ep := range p.Endpoints {
		h := fmt.Sprintf("%s . %s . %s . %d", ep.IP, ep.IP, pr, ep.Port)
		if !hairpins[h] {
			hairpins[h] = true
			r.Elem(hairpinSet, "%s", h)
		}
	}

	if external {
		if !p.ExternalLocal {
			r.Add(externalChain, "jump %s", markMasqChain)
		} else {
			if in.ClusterCIDR.IsValid() {
				// Pod traffic to an external address is not subject to
				// the policy, as if it went out to a load balancer and
				// came back in.
				r.Add(externalChain, "%s saddr %s goto %s", f.nf, in.ClusterCIDR, clusterChain)
			}
			r.Add(externalChain, "fib saddr type local jump %s", markMasqChain)
			r.Add(externalChain, "fib saddr type local goto %s", clusterChain)
		}
		if hasExternal {
			r.Add(externalChain, "goto %s", externalPolicy)
		}
		// The short-circuit rules above may send external traffic to the
		// cluster chain even when the policy itself does not use it.
		if p.ExternalLocal {
			usesCluster = true
		}
	}

	affinity := p.AffinitySeconds > 0
	reachable := map[string]Endpoint{}
	if usesCluster {
		for _, ep := range clusterEps {
			reachable[ep.String()] = ep
		}
		writeEndpoints(r, f, p, clusterChain, clusterEps, affinity)
	}
	if usesLocal {
		for _, ep := range localEps {
			reachable[ep.String()] = ep
		}
		writeEndpoints(r, f, p, localChain, localEps, affinity)
	}
	if affinity {
		for _, ep := range reachable {
			r.Set(affinitySet(p, ep), false,
				fmt.Sprintf("type %s; flags dynamic,timeout; timeout %ds;", f.addr, p.AffinitySeconds), false)
			epChain := endpointChain(p, ep)
			if _, ok := r.Chains[epChain]; ok {
				continue
			}
			r.Add(epChain, "update @%s { %s saddr }", affinitySet(p, ep), f.nf)
			r.Add(epChain, "meta l4proto %s dnat to %s", pr, ep)
		}
	}
}

// affinitySet is per endpoint; the timeout is part of the name so that a
// changed timeout makes a new set instead of a conflicting redefinition.
func affinitySet(p ServicePort, ep Endpoint) string {
	return hashName("affinity", fmt.Sprintf("%s__%s/%d/%ds", portKey(p), ep.IP, ep.Port, p.AffinitySeconds))
}

func endpointChain(p ServicePort, ep Endpoint) string {
	return hashName("endpoint", fmt.Sprintf("%s__%s/%d", portKey(p), ep.IP, ep.Port))
}

// writeEndpoints fills a policy chain: one DNAT through a random choice,
// or with affinity, jumps to per-endpoint chains that remember the client.
func writeEndpoints(r *nft.Ruleset, f fam, p ServicePort, chain string, eps []Endpoint, affinity bool) {
	pr := proto(p)
	r.Chain(chain, "")
	if affinity {
		var elems []string
		for i, ep := range eps {
			r.Add(chain, "%s saddr @%s goto %s", f.nf, affinitySet(p, ep), endpointChain(p, ep))
			elems = append(elems, fmt.Sprintf("%d : goto %s", i, endpointChain(p, ep)))
		}
		r.Add(chain, "numgen random mod %d vmap { %s }", len(eps), strings.Join(elems, ", "))
		return
	}
	if len(eps) == 1 {
		r.Add(chain, "meta l4proto %s dnat to %s", pr, eps[0])
		return
	}
	elems := make([]string, len(eps))
	for i, ep := range eps {
		elems[i] = fmt.Sprintf("%d : %s . %d", i, ep.IP, ep.Port)
	}
	r.Add(chain, "meta l4proto %s dnat %s addr . port to numgen random mod %d map { %s }", pr, f.nf, len(eps), strings.Join(elems, ", "))
}

// Aliases so that callers of the proxy need not import nft.
type (
	Ruleset  = nft.Ruleset
	Existing = nft.Existing
	Runner   = nft.Runner
	NFT      = nft.NFT
)

// CleanupScript removes the proxy's tables (and nothing else).
func CleanupScript() string {
	return nft.CleanupScript(Family, Table) + nft.CleanupScript(Family6, Table)
}
