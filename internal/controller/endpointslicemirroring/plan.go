package endpointslicemirroring

import (
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// changes is what one sync writes.
type changes struct {
	create, update, delete []*discoveryv1.EndpointSlice
}

// skipped counts the addresses of an Endpoints that were not mirrored.
type skipped struct {
	invalid  int // not an IP address
	overflow int // beyond the per-subset maximum
}

// group is the endpoints of one address type and one port list: one
// mirrored slice.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
}

// desiredGroups turns the subsets of ep into the groups its slices hold,
// by group key. As upstream's mirroring, the subsets are first repacked
// (addresses offering the same ports gathered into one subset, an
// address not ready on any port not ready on all); each subset then
// contributes at most max addresses, ready ones first; addresses that do
// not parse as IPs are skipped.
func desiredGroups(ep *corev1.Endpoints, max int) (map[string]*group, skipped) {
	groups := map[string]*group{}
	var skip skipped
	for _, ss := range repack(ep.Subsets) {
		ports := slicePorts(ss.Ports)
		added := 0
		for _, a := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{ss.Addresses, true}, {ss.NotReadyAddresses, false}} {
			for _, addr := range a.addrs {
				if added >= max {
					skip.overflow++
					continue
				}
				e, at, ok := endpoint(addr, a.ready)
				if !ok {
					skip.invalid++
					continue
				}
				added++
				k := groupKey(at, ports)
				g := groups[k]
				if g == nil {
					g = &group{addressType: at, ports: ports}
					groups[k] = g
				}
				g.endpoints = append(g.endpoints, e)
			}
		}
	}
	for _, g := range groups {
		sortEndpoints(g.endpoints)
	}
	return groups, skip
}

// endpoint is the slice endpoint of one Endpoints address and its
// address type; ok is false when the address is not an IP.
func endpoint(addr corev1.EndpointAddress, ready bool) (discoveryv1.Endpoint, discoveryv1.AddressType, bool) {
	ip := parseIP(addr.IP)
	if ip == nil {
		return discoveryv1.Endpoint{}, "", false
	}
	at := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		at = discoveryv1.AddressTypeIPv6
	}
	e := discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		NodeName:   addr.NodeName,
	}
	if addr.TargetRef != nil {
		e.TargetRef = addr.TargetRef.DeepCopy()
	}
	if addr.Hostname != "" {
		h := addr.Hostname
		e.Hostname = &h
	}
	return e, at, true
}

// parseIP parses an IP address, accepting the leading zeros in IPv4
// octets that older Endpoints may hold (as upstream's ParseIPSloppy).
func parseIP(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	for i, p := range parts {
		t := strings.TrimLeft(p, "0")
		if t == "" && p != "" {
			t = "0"
		}
		parts[i] = t
	}
	return net.ParseIP(strings.Join(parts, "."))
}

// slicePorts are the subset's ports as slice ports, sorted by name, port
// and protocol so that the same ports always give the same group.
func slicePorts(in []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(in))
	for _, p := range in {
		name, port, proto := p.Name, p.Port, p.Protocol
		var app *string
		if p.AppProtocol != nil {
			a := *p.AppProtocol
			app = &a
		}
		out = append(out, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto, AppProtocol: app})
	}
	sort.SliceStable(out, func(i, j int) bool { return portString(out[i]) < portString(out[j]) })
	return out
}

func portString(p discoveryv1.EndpointPort) string {
	s := fmt.Sprintf("%s/%s/%d", deref(p.Name), deref((*string)(p.Protocol)), deref32(p.Port))
	if p.AppProtocol != nil {
		s += "/" + *p.AppProtocol
	}
	return s
}

// groupKey identifies a group by address type and ports (in any order).
func groupKey(at discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	ps := make([]string, 0, len(ports))
	for _, p := range ports {
		ps = append(ps, portString(p))
	}
	sort.Strings(ps)
	return string(at) + "|" + strings.Join(ps, "|")
}

// repack is the canonical form of subsets, as upstream's RepackSubsets:
// every (address, port) pair is expanded, addresses (by IP and target
// UID) are gathered by the exact set of ports they offer, and an address
// not ready on any of its ports is not ready on all of them. Subsets
// without ports keep their addresses.
func repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	type addrKey struct {
		ip  string
		uid types.UID
	}
	addrs := map[addrKey]corev1.EndpointAddress{}
	var order []addrKey
	notReady := map[addrKey]bool{}
	const noPort = -1
	portsOf := map[addrKey]map[corev1.EndpointPort]bool{}
	note := func(a corev1.EndpointAddress, ready bool, ports []corev1.EndpointPort) {
		k := addrKey{ip: a.IP}
		if a.TargetRef != nil {
			k.uid = a.TargetRef.UID
		}
		if _, ok := addrs[k]; !ok {
			addrs[k] = a
			order = append(order, k)
			portsOf[k] = map[corev1.EndpointPort]bool{}
		}
		if !ready {
			notReady[k] = true
		}
		if len(ports) == 0 {
			portsOf[k][corev1.EndpointPort{Port: noPort}] = true
		}
		for _, p := range ports {
			portsOf[k][p] = true
		}
	}
	for _, ss := range subsets {
		for _, a := range ss.Addresses {
			note(a, true, ss.Ports)
		}
		for _, a := range ss.NotReadyAddresses {
			note(a, false, ss.Ports)
		}
	}
	var out []corev1.EndpointSubset
	bySet := map[string]int{}
	for _, k := range order {
		var ports []corev1.EndpointPort
		for p := range portsOf[k] {
			if p.Port != noPort {
				ports = append(ports, p)
			}
		}
		sort.Slice(ports, func(i, j int) bool {
			a, b := ports[i], ports[j]
			if a.Name != b.Name {
				return a.Name < b.Name
			}
			if a.Port != b.Port {
				return a.Port < b.Port
			}
			return a.Protocol < b.Protocol
		})
		set := fmt.Sprint(ports)
		i, ok := bySet[set]
		if !ok {
			i = len(out)
			bySet[set] = i
			out = append(out, corev1.EndpointSubset{Ports: ports})
		}
		if notReady[k] {
			out[i].NotReadyAddresses = append(out[i].NotReadyAddresses, addrs[k])
		} else {
			out[i].Addresses = append(out[i].Addresses, addrs[k])
		}
	}
	return out
}

// plan computes the slices mirroring ep from its groups and the existing
// mirrored slices: one slice a group, updated in place when one with the
// group's address type and ports exists (the rest of those deleted),
// created otherwise; slices of groups that are gone are deleted.
// New slices get deterministic names (the Endpoints' name and a hash of
// the group), so that a sync from a stale cache fails with AlreadyExists
// instead of making a duplicate (upstream generates names and tracks the
// slices it wrote instead). While ep is being deleted nothing is created.
func plan(ep *corev1.Endpoints, existing []*discoveryv1.EndpointSlice, groups map[string]*group) changes {
	var out changes
	byGroup := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		k := groupKey(s.AddressType, s.Ports)
		byGroup[k] = append(byGroup[k], s)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := groups[k]
		name := sliceName(ep.Name, k)
		have := byGroup[k]
		delete(byGroup, k)
		// Keep the slice with our name if there is one, else the first.
		sort.Slice(have, func(i, j int) bool {
			if (have[i].Name == name) != (have[j].Name == name) {
				return have[i].Name == name
			}
			return have[i].Name < have[j].Name
		})
		want := newSlice(ep, name, g)
		if len(have) == 0 {
			if ep.DeletionTimestamp == nil {
				out.create = append(out.create, want)
			}
			continue
		}
		out.delete = append(out.delete, have[1:]...)
		if !sameSlice(have[0], want) {
			next := have[0].DeepCopy()
			next.Labels, next.Annotations, next.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
			next.AddressType, next.Ports, next.Endpoints = want.AddressType, want.Ports, want.Endpoints
			out.update = append(out.update, next)
		}
	}
	stale := make([]string, 0, len(byGroup))
	for k := range byGroup {
		stale = append(stale, k)
	}
	sort.Strings(stale)
	for _, k := range stale {
		out.delete = append(out.delete, byGroup[k]...)
	}
	return out
}

// sliceName is "<endpoints>-<fnv32a of the group, 8 hex>", the name cut
// at 200 characters. The hash covers a prefix of its own, so a name never
// equals one the EndpointSlice controller gives its slices.
func sliceName(endpoints, groupKey string) string {
	h := fnv.New32a()
	h.Write([]byte("mirror|" + groupKey))
	if len(endpoints) > 200 {
		endpoints = endpoints[:200]
	}
	return fmt.Sprintf("%s-%08x", endpoints, h.Sum32())
}

// newSlice is the slice named name mirroring group g of ep: the
// Endpoints' labels and annotations (but its last-change-trigger-time and
// kubectl's last-applied configuration), the service-name and managed-by
// labels, and the Endpoints as its controller owner.
func newSlice(ep *corev1.Endpoints, name string, g *group) *discoveryv1.EndpointSlice {
	labels := map[string]string{}
	for k, v := range ep.Labels {
		labels[k] = v
	}
	labels[discoveryv1.LabelServiceName] = ep.Name
	labels[discoveryv1.LabelManagedBy] = ManagedBy
	annotations := map[string]string{}
	for k, v := range ep.Annotations {
		if k == corev1.EndpointsLastChangeTriggerTime || k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		annotations[k] = v
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ep.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, corev1.SchemeGroupVersion.WithKind("Endpoints"))},
		},
		AddressType: g.addressType,
		Ports:       append([]discoveryv1.EndpointPort{}, g.ports...),
		Endpoints:   append([]discoveryv1.Endpoint{}, g.endpoints...),
	}
}

// sameSlice compares what the controller owns in a slice, treating nil and
// empty alike and the endpoints and ports in any order.
func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	norm := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		c := &discoveryv1.EndpointSlice{AddressType: s.AddressType}
		c.Labels, c.Annotations, c.OwnerReferences = s.Labels, s.Annotations, s.OwnerReferences
		if len(c.Labels) == 0 {
			c.Labels = nil
		}
		if len(c.Annotations) == 0 {
			c.Annotations = nil
		}
		if len(s.Endpoints) > 0 {
			c.Endpoints = append([]discoveryv1.Endpoint(nil), s.Endpoints...)
			sortEndpoints(c.Endpoints)
		}
		if len(s.Ports) > 0 {
			c.Ports = append([]discoveryv1.EndpointPort(nil), s.Ports...)
			sort.SliceStable(c.Ports, func(i, j int) bool { return portString(c.Ports[i]) < portString(c.Ports[j]) })
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(norm(a), norm(b))
}

// sortEndpoints orders endpoints by address, then target UID.
func sortEndpoints(eps []discoveryv1.Endpoint) {
	key := func(e discoveryv1.Endpoint) string {
		k := strings.Join(e.Addresses, ",")
		if e.TargetRef != nil {
			k += "/" + string(e.TargetRef.UID)
		}
		return k
	}
	sort.SliceStable(eps, func(i, j int) bool { return key(eps[i]) < key(eps[j]) })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func deref32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
