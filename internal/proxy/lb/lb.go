// Package lb gives Services of type LoadBalancer an address, the way
// k3s's servicelb does, so that they do not stay <pending> in a cluster
// with no cloud: it writes status.loadBalancer.ingress from a pool, and
// the service proxy on every node sends traffic for that address to the
// Service's endpoints.
//
// It must run once per cluster, so `skiff server` runs it (not the
// agents). Plan is the pure core; Allocator is the loop.
package lb

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// lastAddr is the last address of a prefix (every host bit set).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ParseRange reads "10.0.0.0/24" (every address but the network and
// broadcast ones when the prefix is shorter than /31; for IPv6 every
// address but the network one, below /127), "first-last" or a single
// address, IPv4 or IPv6.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		p = p.Masked()
		first, last := p.Addr(), lastAddr(p)
		switch {
		case first.Is4() && p.Bits() < 31:
			first, last = first.Next(), last.Prev()
		case first.Is6() && p.Bits() < 127:
			first = first.Next()
		}
		return Range{first, last}, nil
	}
	if a, b, ok := strings.Cut(s, "-"); ok {
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 == nil && err2 == nil && first.Is4() == last.Is4() && !last.Less(first) {
			return Range{first, last}, nil
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return Range{a, a}, nil
	}
	return Range{}, fmt.Errorf("invalid load-balancer range %q: want a CIDR, first-last or one address", s)
}

// ParseRanges reads one range, or an IPv4 and an IPv6 range separated by a
// comma (a dual-stack pool: a Service gets an address of each family it
// has).
func ParseRanges(s string) ([]Range, error) {
	var out []Range
	for _, part := range strings.Split(s, ",") {
		r, err := ParseRange(part)
		if err != nil {
			return nil, err
		}
		for _, o := range out {
			if o.v6() == r.v6() {
				return nil, fmt.Errorf("invalid load-balancer range %q: at most one range of each IP family", s)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (r Range) v6() bool { return r.First.Is6() }

func (r Range) family() v1.IPFamily {
	if r.v6() {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// Contains says whether a is in the range.
func (r Range) Contains(a netip.Addr) bool {
	return a.IsValid() && a.Is6() == r.v6() && !a.Less(r.First) && !r.Last.Less(a)
}

// families are the IP families of a Service (IPv4 when it names none).
func families(s *v1.Service) []v1.IPFamily {
	if len(s.Spec.IPFamilies) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return s.Spec.IPFamilies
}

func hasFamily(s *v1.Service, f v1.IPFamily) bool {
	for _, g := range families(s) {
		if g == f {
			return true
		}
	}
	return false
}

func managed(s *v1.Service) bool {
	return s.Spec.Type == v1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
}

func portKeys(s *v1.Service) []string {
	var out []string
	for _, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, fmt.Sprintf("%s/%d", proto, p.Port))
	}
	return out
}

// currentIP is the Service's load-balancer address of the family
// (IPv4 for currentIP).
func currentIP(s *v1.Service) string { return currentIPOf(s, false) }

func currentIPOf(s *v1.Service, v6 bool) string {
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil && a.Is6() == v6 {
			return ing.IP
		}
	}
	return ""
}

// Plan decides, for the pool's IP family, the address of every Service
// that should change: key ns/name → new IP ("" clears that family's
// address). Several Services may share an address when their ports do not
// clash (so that a range of one address, such as the node's, serves many).
// Services keep their address when they can; older Services are placed
// first. Services without the pool's family are left alone.
func Plan(services []*v1.Service, pool Range) map[string]string {
	v6 := pool.v6()
	svcs := append([]*v1.Service(nil), services...)
	sort.Slice(svcs, func(i, j int) bool {
		a, b := svcs[i], svcs[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	used := map[netip.Addr]map[string]bool{}
	fits := func(ip netip.Addr, s *v1.Service) bool {
		for _, k := range portKeys(s) {
			if used[ip][k] {
				return false
			}
		}
		return true
	}
	take := func(ip netip.Addr, s *v1.Service) {
		if used[ip] == nil {
			used[ip] = map[string]bool{}
		}
		for _, k := range portKeys(s) {
			used[ip][k] = true
		}
	}
	out := map[string]string{}
	var pending []*v1.Service
	// First pass: keep what is assigned and valid.
	for _, s := range svcs {
		key := s.Namespace + "/" + s.Name
		cur := currentIPOf(s, v6)
		ip, err := netip.ParseAddr(cur)
		switch {
		case !managed(s) || !hasFamily(s, pool.family()):
			if s.Spec.Type != v1.ServiceTypeLoadBalancer && cur != "" && err == nil && pool.Contains(ip) {
				out[key] = "" // no longer a LoadBalancer: release
			}
		case cur != "" && err == nil && pool.Contains(ip) && fits(ip, s):
			take(ip, s)
		default:
			pending = append(pending, s)
		}
	}
	for _, s := range pending {
		key := s.Namespace + "/" + s.Name
		var chosen netip.Addr
		if want, err := netip.ParseAddr(s.Spec.LoadBalancerIP); err == nil && pool.Contains(want) && fits(want, s) {
			chosen = want
		} else {
			for a := pool.First; pool.Contains(a); a = a.Next() {
				if fits(a, s) {
					chosen = a
					break
				}
				if a == pool.Last {
					break
				}
			}
		}
		if chosen.IsValid() {
			take(chosen, s)
			if currentIPOf(s, v6) != chosen.String() {
				out[key] = chosen.String()
			}
		} else {
			out[key] = "" // released, or stays pending
		}
	}
	return out
}

// Allocator is the loop that applies Plan.
type Allocator struct {
	client kubernetes.Interface
	pools  []Range
	ready  chan struct{}
}

// New builds an Allocator for pools (one per IP family).
func New(client kubernetes.Interface, pools ...Range) *Allocator {
	return &Allocator{client: client, pools: pools, ready: make(chan struct{})}
}

// ingress is the status a Service should have: for each of its families,
// the planned address if the plan changes it, else its current one; in
// the order of its families. ok is false when a family with a pool has no
// address.
func (a *Allocator) ingress(s *v1.Service, plans map[v1.IPFamily]map[string]string) (ips []string, ok bool) {
	key := s.Namespace + "/" + s.Name
	ok = true
	for _, f := range families(s) {
		plan, hasPool := plans[f]
		if !hasPool {
			continue
		}
		ip, changed := plan[key]
		if !changed {
			ip = currentIPOf(s, f == v1.IPv6Protocol)
		}
		if ip == "" {
			ok = false
			continue
		}
		ips = append(ips, ip)
	}
	return ips, ok
}

// Ready closes once the Service cache has synced.
func (a *Allocator) Ready() <-chan struct{} { return a.ready }

// Start allocates until ctx ends.
func (a *Allocator) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("service-lb")
	factory := informers.NewSharedInformerFactory(a.client, 0)
	defer factory.Shutdown()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early error cannot hang here.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := factory.Core().V1().Services()
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "service-lb-controller"})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	close(a.ready)
	reported := map[string]bool{}
	for {
		svcs, _ := inf.Lister().List(labels.Everything())
		failed := false
		plans := map[v1.IPFamily]map[string]string{}
		keys := map[string]bool{}
		for _, pool := range a.pools {
			plans[pool.family()] = Plan(svcs, pool)
			for k := range plans[pool.family()] {
				keys[k] = true
			}
		}
		for key := range keys {
			ns, name, _ := strings.Cut(key, "/")
			s, err := inf.Lister().Services(ns).Get(name)
			if err != nil {
				continue
			}
			ips, complete := a.ingress(s, plans)
			if !managed(s) {
				ips = nil
			}
			if managed(s) && !complete && !reported[key] {
				reported[key] = true
				recorder.Eventf(s, v1.EventTypeWarning, "AllocationFailed", "No address of %v is free for ports %v", a.pools, portKeys(s))
			}
			var cur []string
			for _, ing := range s.Status.LoadBalancer.Ingress {
				cur = append(cur, ing.IP)
			}
			if fmt.Sprint(cur) == fmt.Sprint(ips) {
				continue
			}
			s = s.DeepCopy()
			s.Status.LoadBalancer.Ingress = nil
			for _, ip := range ips {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip, IPMode: ptrIPMode(v1.LoadBalancerIPModeVIP)})
			}
			ip := strings.Join(ips, ", ")
			if _, err := a.client.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
				logger.V(2).Info("Updating load-balancer status", "service", key, "err", err)
				failed = true
				continue
			}
			if complete {
				delete(reported, key)
			}
			if ip != "" {
				recorder.Eventf(s, v1.EventTypeNormal, "IPAllocated", "Assigned load-balancer address %s", ip)
			}
		}
		var retry <-chan time.Time
		if failed {
			retry = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
		case <-retry:
		}
	}
}

func ptrIPMode(m v1.LoadBalancerIPMode) *v1.LoadBalancerIPMode { return &m }
