package proxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Table is the nftables table the proxy owns (family ip).
const (
	Family = "ip"
	Table  = "skiff-proxy"
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

// Chain is one nftables chain: Base is the hook declaration of a base chain
// ("type nat hook prerouting priority dstnat; policy accept;"), empty for a
// regular chain.
type Chain struct {
	Name  string
	Base  string
	Rules []string
}

// Set is a named set or map. Decl is its body ("type ipv4_addr;"). Managed
// containers are emptied and refilled with Elements on every sync; others
// (affinity sets) are created once and keep what the kernel puts in them.
type Set struct {
	Name     string
	Map      bool
	Decl     string
	Managed  bool
	Elements []string
}

// Ruleset is the whole desired content of the proxy's table.
type Ruleset struct {
	Chains map[string]*Chain
	Sets   map[string]*Set
}

func newRuleset() *Ruleset {
	return &Ruleset{Chains: map[string]*Chain{}, Sets: map[string]*Set{}}
}

func (r *Ruleset) chain(name, base string) *Chain {
	c, ok := r.Chains[name]
	if !ok {
		c = &Chain{Name: name, Base: base}
		r.Chains[name] = c
	}
	return c
}

func (r *Ruleset) add(chain string, rule string, args ...any) {
	r.chain(chain, "").Rules = append(r.chain(chain, "").Rules, fmt.Sprintf(rule, args...))
}

func (r *Ruleset) set(name string, isMap bool, decl string, managed bool) *Set {
	s, ok := r.Sets[name]
	if !ok {
		s = &Set{Name: name, Map: isMap, Decl: decl, Managed: managed}
		r.Sets[name] = s
	}
	return s
}

func (r *Ruleset) elem(set, format string, args ...any) {
	s := r.Sets[set]
	s.Elements = append(s.Elements, fmt.Sprintf(format, args...))
}

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

// Compute is the pure core: the table content for a snapshot.
func Compute(in Input) *Ruleset {
	r := newRuleset()
	base := func(name, typ, hook, prio string) {
		r.chain(name, fmt.Sprintf("type %s hook %s priority %s; policy accept;", typ, hook, prio))
	}
	// Priorities as numbers (dstnat -100, srcnat 100, filter 0): nft
	// accepts the names only on some hooks.
	base(natPrerouting, "nat", "prerouting", "-100")
	base(natOutput, "nat", "output", "-100")
	base(natPostrouting, "nat", "postrouting", "100")
	base(filterInput, "filter", "input", "0")
	base(filterForward, "filter", "forward", "0")
	base(filterOutput, "filter", "output", "0")
	r.add(natPrerouting, "jump %s", servicesChain)
	r.add(natOutput, "jump %s", servicesChain)
	r.add(natPostrouting, "jump %s", masqueradingChain)
	r.add(filterInput, "ct state new jump %s", nodePortEndpointsCheck)
	r.add(filterInput, "ct state new jump %s", serviceEndpointsCheck)
	for _, c := range []string{filterForward, filterOutput} {
		r.add(c, "ct state new jump %s", serviceEndpointsCheck)
		r.add(c, "ct state new jump %s", clusterIPsCheck)
	}

	r.set(clusterIPsSet, false, "type ipv4_addr;", true)
	r.set(serviceIPsMap, true, "type ipv4_addr . inet_proto . inet_service : verdict;", true)
	r.set(serviceNodePortsMap, true, "type inet_proto . inet_service : verdict;", true)
	r.set(noEndpointServicesMap, true, "type ipv4_addr . inet_proto . inet_service : verdict;", true)
	r.set(noEndpointNodePortsMap, true, "type inet_proto . inet_service : verdict;", true)
	r.set(hairpinSet, false, "type ipv4_addr . ipv4_addr . inet_proto . inet_service;", true)

	r.add(markMasqChain, "mark set mark or %s", MasqueradeMark)
	r.add(masqueradingChain, "mark and %s != 0 mark set mark xor %s masquerade fully-random", MasqueradeMark, MasqueradeMark)
	r.add(masqueradingChain, "ct status dnat ip saddr . ip daddr . meta l4proto . th dport @%s masquerade fully-random", hairpinSet)

	if in.ClusterCIDR.IsValid() {
		r.add(servicesChain, "ip daddr @%s ip saddr != %s jump %s", clusterIPsSet, in.ClusterCIDR, markMasqChain)
	}
	r.add(servicesChain, "ip daddr . meta l4proto . th dport vmap @%s", serviceIPsMap)
	r.add(servicesChain, "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @%s", serviceNodePortsMap)
	r.add(serviceEndpointsCheck, "ip daddr . meta l4proto . th dport vmap @%s", noEndpointServicesMap)
	r.add(nodePortEndpointsCheck, "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @%s", noEndpointNodePortsMap)
	r.add(clusterIPsCheck, "ip daddr @%s goto %s", clusterIPsSet, rejectChain)
	if in.ServiceCIDR.IsValid() {
		r.add(clusterIPsCheck, "ip daddr %s drop", in.ServiceCIDR)
	}
	// TCP gets a reset rather than upstream's ICMP port-unreachable: the
	// kernel rate-limits ICMP errors per destination (a client that just
	// got a redirect or another error would wait for its connect timeout),
	// and never rate-limits resets.
	r.add(rejectChain, "meta l4proto tcp reject with tcp reset")
	r.add(rejectChain, "reject")

	ports := append([]ServicePort(nil), in.Ports...)
	sort.Slice(ports, func(i, j int) bool { return portKey(ports[i]) < portKey(ports[j]) })
	clusterIPs := map[netip.Addr]bool{}
	hairpins := map[string]bool{}
	for _, p := range ports {
		computePort(r, in, p, clusterIPs, hairpins)
	}
	return r
}

func computePort(r *Ruleset, in Input, p ServicePort, clusterIPs map[netip.Addr]bool, hairpins map[string]bool) {
	key := portKey(p)
	pr := proto(p)
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
		r.elem(clusterIPsSet, "%s", p.ClusterIP)
	}
	if hasInternal {
		r.elem(serviceIPsMap, "%s . %s . %d : goto %s", p.ClusterIP, pr, p.Port, internalChain)
	} else {
		r.elem(noEndpointServicesMap, "%s . %s . %d : %s", p.ClusterIP, pr, p.Port, internalVerdict)
	}
	for _, ip := range append(append([]netip.Addr(nil), p.ExternalIPs...), p.LoadBalancerIPs...) {
		if hasEndpoints {
			r.elem(serviceIPsMap, "%s . %s . %d : goto %s", ip, pr, p.Port, externalChain)
		}
		if !hasExternal {
			r.elem(noEndpointServicesMap, "%s . %s . %d : %s", ip, pr, p.Port, externalVerdict)
		}
	}
	if p.NodePort != 0 {
		if hasEndpoints {
			r.elem(serviceNodePortsMap, "%s . %d : goto %s", pr, p.NodePort, externalChain)
		}
		if !hasExternal {
			r.elem(noEndpointNodePortsMap, "%s . %d : %s", pr, p.NodePort, externalVerdict)
		}
	}
	if !hasEndpoints {
		return
	}

	for _, ep := range p.Endpoints {
		h := fmt.Sprintf("%s . %s . %s . %d", ep.IP, ep.IP, pr, ep.Port)
		if !hairpins[h] {
			hairpins[h] = true
			r.elem(hairpinSet, "%s", h)
		}
	}

	if external {
		if !p.ExternalLocal {
			r.add(externalChain, "jump %s", markMasqChain)
		} else {
			if in.ClusterCIDR.IsValid() {
				// Pod traffic to an external address is not subject to
				// the policy, as if it went out to a load balancer and
				// came back in.
				r.add(externalChain, "ip saddr %s goto %s", in.ClusterCIDR, clusterChain)
			}
			r.add(externalChain, "fib saddr type local jump %s", markMasqChain)
			r.add(externalChain, "fib saddr type local goto %s", clusterChain)
		}
		if hasExternal {
			r.add(externalChain, "goto %s", externalPolicy)
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
		writeEndpoints(r, p, clusterChain, clusterEps, affinity)
	}
	if usesLocal {
		for _, ep := range localEps {
			reachable[ep.String()] = ep
		}
		writeEndpoints(r, p, localChain, localEps, affinity)
	}
	if affinity {
		for _, ep := range reachable {
			r.set(affinitySet(p, ep), false,
				fmt.Sprintf("type ipv4_addr; flags dynamic,timeout; timeout %ds;", p.AffinitySeconds), false)
			epChain := endpointChain(p, ep)
			if _, ok := r.Chains[epChain]; ok {
				continue
			}
			r.add(epChain, "update @%s { ip saddr }", affinitySet(p, ep))
			r.add(epChain, "meta l4proto %s dnat to %s", pr, ep)
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
func writeEndpoints(r *Ruleset, p ServicePort, chain string, eps []Endpoint, affinity bool) {
	pr := proto(p)
	r.chain(chain, "")
	if affinity {
		var elems []string
		for i, ep := range eps {
			r.add(chain, "ip saddr @%s goto %s", affinitySet(p, ep), endpointChain(p, ep))
			elems = append(elems, fmt.Sprintf("%d : goto %s", i, endpointChain(p, ep)))
		}
		r.add(chain, "numgen random mod %d vmap { %s }", len(eps), strings.Join(elems, ", "))
		return
	}
	if len(eps) == 1 {
		r.add(chain, "meta l4proto %s dnat to %s", pr, eps[0])
		return
	}
	elems := make([]string, len(eps))
	for i, ep := range eps {
		elems[i] = fmt.Sprintf("%d : %s . %d", i, ep.IP, ep.Port)
	}
	r.add(chain, "meta l4proto %s dnat ip addr . port to numgen random mod %d map { %s }", pr, len(eps), strings.Join(elems, ", "))
}

// Existing names what the kernel's table holds (from `nft list table`):
// chain names, and set names with true for maps.
type Existing struct {
	Chains map[string]bool
	Sets   map[string]bool
}

// Transaction renders the nft script that takes the table from prev (the
// last Ruleset applied successfully, nil if unknown) and existing (what nft
// listed, nil if unknown) to r, in one atomic transaction. Chains whose
// rules did not change since prev are left alone; managed sets and maps
// are refilled; chains and sets no longer wanted are removed.
func (r *Ruleset) Transaction(prev *Ruleset, existing *Existing) string {
	var b strings.Builder
	t := Family + " " + Table
	fmt.Fprintf(&b, "add table %s\n", t)
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		kind := "set"
		if s.Map {
			kind = "map"
		}
		fmt.Fprintf(&b, "add %s %s %s { %s }\n", kind, t, name, s.Decl)
	}
	for _, name := range sortedKeys(r.Chains) {
		c := r.Chains[name]
		if c.Base != "" {
			fmt.Fprintf(&b, "add chain %s %s { %s }\n", t, name, c.Base)
		} else {
			fmt.Fprintf(&b, "add chain %s %s\n", t, name)
		}
	}
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		if !s.Managed {
			continue
		}
		kind := "set"
		if s.Map {
			kind = "map"
		}
		fmt.Fprintf(&b, "flush %s %s %s\n", kind, t, name)
	}
	for _, name := range sortedKeys(r.Chains) {
		c := r.Chains[name]
		if prev != nil {
			if old, ok := prev.Chains[name]; ok && equalRules(old.Rules, c.Rules) {
				continue
			}
		}
		fmt.Fprintf(&b, "flush chain %s %s\n", t, name)
		for _, rule := range c.Rules {
			fmt.Fprintf(&b, "add rule %s %s %s\n", t, name, rule)
		}
	}
	for _, name := range sortedKeys(r.Sets) {
		s := r.Sets[name]
		if !s.Managed {
			continue
		}
		for i := 0; i < len(s.Elements); i += 500 {
			end := min(i+500, len(s.Elements))
			fmt.Fprintf(&b, "add element %s %s { %s }\n", t, name, strings.Join(s.Elements[i:end], ", "))
		}
	}
	// Stale objects: everything known to exist that r does not want.
	staleChains, staleSets := map[string]bool{}, map[string]bool{}
	if prev != nil {
		for n := range prev.Chains {
			staleChains[n] = true
		}
		for n, s := range prev.Sets {
			staleSets[n] = s.Map
		}
	}
	if existing != nil {
		for n := range existing.Chains {
			staleChains[n] = true
		}
		for n, isMap := range existing.Sets {
			staleSets[n] = isMap
		}
	}
	for n := range r.Chains {
		delete(staleChains, n)
	}
	for n := range r.Sets {
		delete(staleSets, n)
	}
	for _, n := range sortedKeys(staleChains) {
		fmt.Fprintf(&b, "flush chain %s %s\n", t, n)
	}
	for _, n := range sortedKeys(staleChains) {
		fmt.Fprintf(&b, "delete chain %s %s\n", t, n)
	}
	for _, n := range sortedKeys(staleSets) {
		kind := "set"
		if staleSets[n] {
			kind = "map"
		}
		fmt.Fprintf(&b, "delete %s %s %s\n", kind, t, n)
	}
	return b.String()
}

func equalRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CleanupScript removes the proxy's table (and nothing else).
func CleanupScript() string {
	return fmt.Sprintf("add table %s %s\ndelete table %s %s\n", Family, Table, Family, Table)
}
