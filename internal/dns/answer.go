package dns

import (
	"net"
	"net/netip"
	"sort"
	"strings"

	mdns "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SchemaVersion is the version of upstream's DNS specification answered
// at dns-version.<zone> TXT.
const SchemaVersion = "1.1.0"

// Zone describes the cluster domain the resolver is authoritative for.
type Zone struct {
	// Domain is the cluster domain, e.g. "cluster.local".
	Domain string
	// TTL of every record (default 5 s, as CoreDNS's kubernetes plugin).
	TTL uint32
	// NameserverIP is the address the zone's NS record (ns.dns.<zone>)
	// points at: the kube-dns ClusterIP.
	NameserverIP netip.Addr
	// ServiceCIDR and ClusterCIDR: reverse lookups of addresses in them
	// that match nothing are NXDOMAIN here instead of being forwarded.
	ServiceCIDR, ClusterCIDR netip.Prefix
	// ServiceCIDR6 and ClusterCIDR6 are the IPv6 networks of a dual-stack
	// cluster, the same way (invalid: none).
	ServiceCIDR6, ClusterCIDR6 netip.Prefix
}

// Resolver is the pure core: it answers questions about the cluster zone
// from a Source.
type Resolver struct {
	zone   Zone
	fqdn   string // "cluster.local."
	src    Source
	soaRR  *mdns.SOA
	serial uint32
}

// NewResolver builds a Resolver; serial is the SOA serial (e.g. the
// start time).
func NewResolver(z Zone, src Source, serial uint32) *Resolver {
	if z.TTL == 0 {
		z.TTL = 5
	}
	fqdn := mdns.Fqdn(strings.ToLower(z.Domain))
	r := &Resolver{zone: z, fqdn: fqdn, src: src, serial: serial}
	r.soaRR = &mdns.SOA{
		Hdr:     mdns.RR_Header{Name: fqdn, Rrtype: mdns.TypeSOA, Class: mdns.ClassINET, Ttl: z.TTL},
		Ns:      "ns.dns." + fqdn,
		Mbox:    "hostmaster." + fqdn,
		Serial:  serial,
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: z.TTL,
	}
	return r
}

// Answer is what the resolver decided for one question.
type Answer struct {
	// Forward: the question is not the resolver's; ask upstream.
	Forward bool
	Rcode   int
	Answer  []mdns.RR
	Ns      []mdns.RR
	Extra   []mdns.RR
}

// Authoritative says whether name is in the zone or a reverse zone the
// resolver answers.
func (r *Resolver) inZone(name string) bool {
	return name == r.fqdn || strings.HasSuffix(name, "."+r.fqdn)
}

// Resolve answers one question.
func (r *Resolver) Resolve(q mdns.Question) Answer {
	name := strings.ToLower(mdns.Fqdn(q.Name))
	if strings.HasSuffix(name, ".in-addr.arpa.") || strings.HasSuffix(name, ".ip6.arpa.") {
		return r.reverse(q, name)
	}
	if !r.inZone(name) {
		return Answer{Forward: true}
	}
	rest := strings.TrimSuffix(strings.TrimSuffix(name, r.fqdn), ".")
	var labels []string
	if rest != "" {
		labels = strings.Split(rest, ".")
	}
	n := len(labels)
	switch {
	case n == 0:
		switch q.Qtype {
		case mdns.TypeSOA:
			return Answer{Answer: []mdns.RR{r.soa()}}
		case mdns.TypeNS:
			return Answer{Answer: []mdns.RR{&mdns.NS{Hdr: r.hdr(q.Name, mdns.TypeNS), Ns: "ns.dns." + r.fqdn}},
				Extra: r.addrs("ns.dns."+r.fqdn, []string{r.zone.NameserverIP.String()}, mdns.TypeA)}
		}
		return r.nodata()
	case n == 1 && labels[0] == "dns-version":
		if q.Qtype == mdns.TypeTXT {
			return Answer{Answer: []mdns.RR{&mdns.TXT{Hdr: r.hdr(q.Name, mdns.TypeTXT), Txt: []string{SchemaVersion}}}}
		}
		return r.nodata()
	case n == 2 && labels[0] == "ns" && labels[1] == "dns":
		return r.records(q, []string{r.zone.NameserverIP.String()})
	case n == 1 && labels[0] == "dns":
		return r.nodata()
	case labels[n-1] == "svc":
		return r.service(q, labels[:n-1])
	case labels[n-1] == "pod":
		return r.pod(q, labels[:n-1])
	}
	return r.nxdomain()
}

func (r *Resolver) hdr(name string, t uint16) mdns.RR_Header {
	return mdns.RR_Header{Name: name, Rrtype: t, Class: mdns.ClassINET, Ttl: r.zone.TTL}
}

func (r *Resolver) soa() mdns.RR { return mdns.Copy(r.soaRR) }

func (r *Resolver) nxdomain() Answer {
	return Answer{Rcode: mdns.RcodeNameError, Ns: []mdns.RR{r.soa()}}
}

func (r *Resolver) nodata() Answer { return Answer{Ns: []mdns.RR{r.soa()}} }

// addrs are A or AAAA records of name for the IPs of that family.
func (r *Resolver) addrs(name string, ips []string, qtype uint16) []mdns.RR {
	var out []mdns.RR
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			if qtype == mdns.TypeA {
				out = append(out, &mdns.A{Hdr: r.hdr(name, mdns.TypeA), A: v4})
			}
		} else if qtype == mdns.TypeAAAA {
			out = append(out, &mdns.AAAA{Hdr: r.hdr(name, mdns.TypeAAAA), AAAA: ip})
		}
	}
	return out
}

// records answers A/AAAA (and ANY) for a name that has these addresses;
// other types get NODATA.
func (r *Resolver) records(q mdns.Question, ips []string) Answer {
	var rrs []mdns.RR
	switch q.Qtype {
	case mdns.TypeA, mdns.TypeAAAA:
		rrs = r.addrs(q.Name, ips, q.Qtype)
	case mdns.TypeANY:
		rrs = append(r.addrs(q.Name, ips, mdns.TypeA), r.addrs(q.Name, ips, mdns.TypeAAAA)...)
	}
	if len(rrs) == 0 {
		return r.nodata()
	}
	return Answer{Answer: rrs}
}

// service answers names under svc.<zone>; labels exclude "svc".
func (r *Resolver) service(q mdns.Question, labels []string) Answer {
	switch len(labels) {
	case 0:
		return r.nodata()
	case 1:
		if r.src.HasNamespace(labels[0]) {
			return r.nodata()
		}
		return r.nxdomain()
	case 2:
		return r.serviceName(q, labels[1], labels[0])
	case 3:
		return r.endpointName(q, labels[2], labels[1], labels[0])
	case 4:
		if strings.HasPrefix(labels[0], "_") && strings.HasPrefix(labels[1], "_") {
			return r.srv(q, labels[3], labels[2], labels[0][1:], labels[1][1:])
		}
	}
	return r.nxdomain()
}

func (r *Resolver) svcFQDN(svc *v1.Service) string {
	return svc.Name + "." + svc.Namespace + ".svc." + r.fqdn
}

func headless(svc *v1.Service) bool {
	return svc.Spec.ClusterIP == v1.ClusterIPNone
}

// endpoint is one address of a headless Service's ready endpoints.
type endpoint struct {
	ip, host string
	ports    map[string]int32 // "name/proto" → port
}

// endpoints lists the addresses a headless Service publishes: ready ones,
// or all with publishNotReadyAddresses. Each has its hostname, or the
// address with dashes as the system-assigned one.
func (r *Resolver) endpoints(svc *v1.Service) []endpoint {
	seen := map[string]bool{}
	var out []endpoint
	slices := r.src.EndpointSlices(svc.Namespace, svc.Name)
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	for _, s := range slices {
		ports := map[string]int32{}
		for _, p := range s.Ports {
			name, proto := "", v1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if p.Port != nil {
				ports[strings.ToLower(name+"/"+string(proto))] = *p.Port
			}
		}
		for _, e := range s.Endpoints {
			if !svc.Spec.PublishNotReadyAddresses && e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if seen[a] {
					continue
				}
				seen[a] = true
				host := ""
				if e.Hostname != nil {
					host = strings.ToLower(*e.Hostname)
				}
				if host == "" {
					host = strings.NewReplacer(".", "-", ":", "-").Replace(a)
				}
				out = append(out, endpoint{ip: a, host: host, ports: ports})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ip < out[j].ip })
	return out
}

func (r *Resolver) serviceName(q mdns.Question, ns, name string) Answer {
	svc := r.src.Service(ns, name)
	if svc == nil {
		return r.nxdomain()
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return Answer{Answer: []mdns.RR{&mdns.CNAME{Hdr: r.hdr(q.Name, mdns.TypeCNAME), Target: mdns.Fqdn(svc.Spec.ExternalName)}}}
	}
	if q.Qtype == mdns.TypeSRV {
		// The service name's SRV records: one per named port.
		var a Answer
		for _, p := range svc.Spec.Ports {
			if p.Name == "" {
				continue
			}
			ans := r.srv(mdns.Question{Name: q.Name, Qtype: mdns.TypeSRV, Qclass: q.Qclass}, ns, name, p.Name, strings.ToLower(string(p.Protocol)))
			a.Answer = append(a.Answer, ans.Answer...)
			for _, rr := range ans.Extra {
				dup := false
				for _, have := range a.Extra {
					dup = dup || mdns.IsDuplicate(have, rr)
				}
				if !dup {
					a.Extra = append(a.Extra, rr)
				}
			}
		}
		if len(a.Answer) == 0 {
			return r.nodata()
		}
		return a
	}
	if headless(svc) {
		var ips []string
		for _, e := range r.endpoints(svc) {
			ips = append(ips, e.ip)
		}
		return r.records(q, ips)
	}
	return r.records(q, svc.Spec.ClusterIPs)
}

// endpointName answers <host>.<svc>.<ns>.svc.<zone> for headless Services.
func (r *Resolver) endpointName(q mdns.Question, ns, name, host string) Answer {
	svc := r.src.Service(ns, name)
	if svc == nil || !headless(svc) {
		return r.nxdomain()
	}
	var ips []string
	for _, e := range r.endpoints(svc) {
		if e.host == host {
			ips = append(ips, e.ip)
		}
	}
	if len(ips) == 0 {
		return r.nxdomain()
	}
	return r.records(q, ips)
}

// srv answers _<port>._<proto>.<svc>.<ns>.svc.<zone>.
func (r *Resolver) srv(q mdns.Question, ns, name, port, proto string) Answer {
	svc := r.src.Service(ns, name)
	if svc == nil || svc.Spec.Type == v1.ServiceTypeExternalName {
		return r.nxdomain()
	}
	var sp *v1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Name != "" && strings.EqualFold(p.Name, port) && strings.EqualFold(string(p.Protocol), proto) {
			sp = p
		}
	}
	if sp == nil {
		return r.nxdomain()
	}
	if q.Qtype != mdns.TypeSRV && q.Qtype != mdns.TypeANY {
		return r.nodata()
	}
	target := r.svcFQDN(svc)
	if !headless(svc) {
		return Answer{
			Answer: []mdns.RR{&mdns.SRV{Hdr: r.hdr(q.Name, mdns.TypeSRV), Priority: 0, Weight: 100, Port: uint16(sp.Port), Target: target}},
			Extra:  append(r.addrs(target, svc.Spec.ClusterIPs, mdns.TypeA), r.addrs(target, svc.Spec.ClusterIPs, mdns.TypeAAAA)...),
		}
	}
	eps := r.endpoints(svc)
	var a Answer
	key := strings.ToLower(sp.Name + "/" + string(sp.Protocol))
	for _, e := range eps {
		p, ok := e.ports[key]
		if !ok {
			continue
		}
		t := e.host + "." + target
		a.Answer = append(a.Answer, &mdns.SRV{Hdr: r.hdr(q.Name, mdns.TypeSRV), Priority: 0, Weight: uint16(100 / len(eps)), Port: uint16(p), Target: t})
		a.Extra = append(a.Extra, r.addrs(t, []string{e.ip}, mdns.TypeA)...)
		a.Extra = append(a.Extra, r.addrs(t, []string{e.ip}, mdns.TypeAAAA)...)
	}
	if len(a.Answer) == 0 {
		return r.nodata()
	}
	return a
}

// pod answers <a-b-c-d>.<ns>.pod.<zone> with the address in the name, as
// CoreDNS's "pods insecure" mode (the Corefile Kubernetes ships) does.
func (r *Resolver) pod(q mdns.Question, labels []string) Answer {
	switch len(labels) {
	case 0, 1:
		return r.nodata()
	case 2:
		// a-b-c-d (IPv4) or the IPv6 address with dashes for colons
		// (fd00-42-1--5), as CoreDNS reads pod names.
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		if err != nil || !ip.Is4() {
			ip, err = netip.ParseAddr(strings.ReplaceAll(labels[0], "-", ":"))
			if err != nil || !ip.Is6() || ip.Zone() != "" {
				return r.nxdomain()
			}
		}
		return r.records(q, []string{ip.String()})
	}
	return r.nxdomain()
}

// reverse answers PTR for Service ClusterIPs and headless endpoints.
// Addresses outside the cluster's networks that match nothing are
// forwarded; inside them they are NXDOMAIN.
func (r *Resolver) reverse(q mdns.Question, name string) Answer {
	ip, ok := reverseAddr(name)
	if !ok {
		return Answer{Forward: true}
	}
	ours := r.zone.ServiceCIDR.Contains(ip) || r.zone.ClusterCIDR.Contains(ip) ||
		r.zone.ServiceCIDR6.Contains(ip) || r.zone.ClusterCIDR6.Contains(ip)
	var targets []string
	for _, svc := range r.src.ServicesByIP(ip.String()) {
		targets = append(targets, r.svcFQDN(svc))
	}
	for _, s := range r.src.SlicesByIP(ip.String()) {
		svc := r.src.Service(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
		if svc == nil || !headless(svc) {
			continue
		}
		for _, e := range r.endpoints(svc) {
			if e.ip == ip.String() {
				targets = append(targets, e.host+"."+r.svcFQDN(svc))
			}
		}
	}
	if len(targets) == 0 {
		if ours {
			return r.nxdomain()
		}
		return Answer{Forward: true}
	}
	if q.Qtype != mdns.TypePTR {
		return r.nodata()
	}
	sort.Strings(targets)
	var a Answer
	for i, t := range targets {
		if i > 0 && targets[i-1] == t {
			continue
		}
		a.Answer = append(a.Answer, &mdns.PTR{Hdr: r.hdr(q.Name, mdns.TypePTR), Ptr: t})
	}
	return a
}

// reverseAddr reads the address of a full in-addr.arpa (4 labels) or
// ip6.arpa (32 nibbles) name.
func reverseAddr(name string) (netip.Addr, bool) {
	if v4, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		parts := strings.Split(v4, ".")
		if len(parts) != 4 {
			return netip.Addr{}, false
		}
		ip, err := netip.ParseAddr(parts[3] + "." + parts[2] + "." + parts[1] + "." + parts[0])
		return ip, err == nil && ip.Is4()
	}
	v6, _ := strings.CutSuffix(name, ".ip6.arpa.")
	nibbles := strings.Split(v6, ".")
	if len(nibbles) != 32 {
		return netip.Addr{}, false
	}
	var b strings.Builder
	for i := 31; i >= 0; i-- {
		if len(nibbles[i]) != 1 {
			return netip.Addr{}, false
		}
		b.WriteString(nibbles[i])
		if i%4 == 0 && i > 0 {
			b.WriteByte(':')
		}
	}
	ip, err := netip.ParseAddr(b.String())
	return ip, err == nil && ip.Is6()
}
