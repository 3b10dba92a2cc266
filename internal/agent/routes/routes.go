// Package routes connects the pod networks of a cluster's nodes, the way
// flannel's host-gw backend does: every node agent watches the Nodes and
// routes each other node's pod CIDR via that node's InternalIP, and
// masquerades traffic from its pods that leaves the cluster's pod network.
// Pods on different nodes so reach each other by their own addresses, with
// no tunnel and no NAT between them.
//
// The decision is pure (Compute, Plan, MasqueradeRules); Manager is the
// thin loop that watches Nodes and programs the kernel: routes through
// netlink, marked with protocol Protocol so that only its own are ever
// listed, replaced or deleted, and the masquerade rule in nftables table
// `ip skiff-routes`.
//
// A node whose InternalIP is on a directly attached network is the
// route's gateway. One that is not (a node in a network namespace reaching
// the others through its host, say) is reached the way the kernel reaches
// its InternalIP: the pod CIDR gets that route's gateway and device. As
// with host-gw, whatever is on that path must route the pod CIDR on.
package routes

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Protocol marks the routes this package owns (rtnetlink's rtm_protocol;
// "proto 83" in `ip route`).
const Protocol = 83

// Table is the nftables table of the masquerade rule.
const Table = "skiff-routes"

// Target is a route a node wants: the other node's pod CIDR via its
// InternalIP.
type Target struct {
	Node   string
	Dst    netip.Prefix
	NodeIP netip.Addr
}

// Compute returns the routes node self wants to the other nodes' IPv4 pod
// CIDRs, sorted by destination. Nodes without a pod CIDR or an IPv4
// InternalIP are skipped, as are CIDRs that overlap self's own (a node
// never routes its own pods away) and a CIDR claimed by two nodes (the
// older Node, by creation time then name, keeps it).
func Compute(self string, nodes []*corev1.Node) []Target {
	var own []netip.Prefix
	for _, n := range nodes {
		if n.Name == self {
			own = podCIDRs(n)
		}
	}
	ordered := slices.Clone(nodes)
	sort.SliceStable(ordered, func(i, j int) bool {
		a, b := ordered[i], ordered[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	var out []Target
	taken := map[netip.Prefix]bool{}
	for _, n := range ordered {
		if n.Name == self {
			continue
		}
		ip, ok := internalIPv4(n)
		if !ok {
			continue
		}
		for _, dst := range podCIDRs(n) {
			if taken[dst] || slices.ContainsFunc(own, dst.Overlaps) {
				continue
			}
			taken[dst] = true
			out = append(out, Target{Node: n.Name, Dst: dst, NodeIP: ip})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dst.String() < out[j].Dst.String() })
	return out
}

func podCIDRs(n *corev1.Node) []netip.Prefix {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	return out
}

func internalIPv4(n *corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Route is one kernel route as this package sees it.
type Route struct {
	Dst       netip.Prefix
	Gateway   netip.Addr
	LinkIndex int
}

func (r Route) String() string {
	return fmt.Sprintf("%s via %s dev #%d", r.Dst, r.Gateway, r.LinkIndex)
}

// Nexthop is how the kernel reaches an address: Gateway is invalid when the
// address is on a directly attached network; Local when it is one of this
// host's own.
type Nexthop struct {
	Gateway   netip.Addr
	LinkIndex int
	Local     bool
}

// Plan turns targets into the routes to replace (add or change) and the
// existing ones of this package to delete. resolve looks up how the kernel
// reaches a node's InternalIP; a node that cannot be resolved, or whose
// InternalIP is local, gets no route (and its old one is deleted) and is
// reported in skipped.
func Plan(targets []Target, existing []Route, resolve func(netip.Addr) (Nexthop, error)) (replace, del []Route, skipped []error) {
	want := map[netip.Prefix]Route{}
	for _, t := range targets {
		hop, err := resolve(t.NodeIP)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("node %s: no route to its InternalIP %s: %w", t.Node, t.NodeIP, err))
			continue
		}
		if hop.Local {
			skipped = append(skipped, fmt.Errorf("node %s: its InternalIP %s is an address of this host", t.Node, t.NodeIP))
			continue
		}
		gw := hop.Gateway
		if !gw.IsValid() {
			gw = t.NodeIP
		}
		want[t.Dst] = Route{Dst: t.Dst, Gateway: gw, LinkIndex: hop.LinkIndex}
	}
	have := map[netip.Prefix]bool{}
	for _, r := range existing {
		w, ok := want[r.Dst]
		if !ok {
			del = append(del, r)
			continue
		}
		if have[r.Dst] {
			del = append(del, r) // a duplicate: keep one
			continue
		}
		have[r.Dst] = true
		if w != r {
			replace = append(replace, w)
		}
	}
	for dst, w := range want {
		if !have[dst] {
			replace = append(replace, w)
		}
	}
	byDst := func(a, b Route) int { return strings.Compare(a.Dst.String(), b.Dst.String()) }
	slices.SortFunc(replace, byDst)
	slices.SortFunc(del, byDst)
	return replace, del, skipped
}

// MasqueradeRules is the nft script that (re)creates the masquerade table
// in one transaction: traffic from the cluster's pod network to anything
// outside it (and not multicast) leaves with the node's address. Traffic
// between pods, on one node or across nodes, keeps its source.
func MasqueradeRules(clusterCIDR netip.Prefix) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table ip %s\n", Table)
	fmt.Fprintf(&b, "delete table ip %s\n", Table)
	fmt.Fprintf(&b, "table ip %s {\n", Table)
	b.WriteString("\tchain postrouting {\n")
	b.WriteString("\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	fmt.Fprintf(&b, "\t\tip saddr %s ip daddr != %s ip daddr != 224.0.0.0/4 masquerade fully-random\n", clusterCIDR.Masked(), clusterCIDR.Masked())
	b.WriteString("\t}\n")
	b.WriteString("}\n")
	return b.String()
}

// CleanupRules removes the masquerade table (nothing if it is absent).
func CleanupRules() string {
	return fmt.Sprintf("add table ip %s\ndelete table ip %s\n", Table, Table)
}
