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

// Range is an inclusive range of IPv4 addresses.
type Range struct{ First, Last netip.Addr }

// ParseRange reads "10.0.0.0/24" (every address but the network and
// broadcast ones when the prefix is shorter than /31), "a.b.c.d-a.b.c.e"
// or a single address.
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
		p = p.Masked()
		first := p.Addr()
		last := first
		for a := first; p.Contains(a); a = a.Next() {
			last = a
		}
		if p.Bits() < 31 {
			first, last = first.Next(), last.Prev()
		}
		return Range{first, last}, nil
	}
	if a, b, ok := strings.Cut(s, "-"); ok {
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if err1 == nil && err2 == nil && first.Is4() && last.Is4() && !last.Less(first) {
			return Range{first, last}, nil
		}
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return Range{a, a}, nil
	}
	return Range{}, fmt.Errorf("invalid load-balancer range %q: want a CIDR, first-last or one IPv4 address", s)
}

// Contains says whether a is in the range.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() && !a.Less(r.First) && !r.Last.Less(a)
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

func currentIP(s *v1.Service) string {
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			return ing.IP
		}
	}
	return ""
}

// Plan decides the address of every Service that should change: key
// ns/name → new IP ("" clears the status). Several Services may share an
// address when their ports do not clash (so that a range of one address,
// such as the node's, serves many). Services keep their address when
// they can; older Services are placed first.
func Plan(services []*v1.Service, pool Range) map[string]string {
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
		cur := currentIP(s)
		ip, err := netip.ParseAddr(cur)
		switch {
		case !managed(s):
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
			if currentIP(s) != chosen.String() {
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
	pool   Range
	ready  chan struct{}
}

// New builds an Allocator for pool.
func New(client kubernetes.Interface, pool Range) *Allocator {
	return &Allocator{client: client, pool: pool, ready: make(chan struct{})}
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
		for key, ip := range Plan(svcs, a.pool) {
			ns, name, _ := strings.Cut(key, "/")
			s, err := inf.Lister().Services(ns).Get(name)
			if err != nil {
				continue
			}
			if ip == "" && currentIP(s) == "" {
				if managed(s) && !reported[key] {
					reported[key] = true
					recorder.Eventf(s, v1.EventTypeWarning, "AllocationFailed", "No address of %s-%s is free for ports %v", a.pool.First, a.pool.Last, portKeys(s))
				}
				continue
			}
			s = s.DeepCopy()
			s.Status.LoadBalancer.Ingress = nil
			if ip != "" {
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip, IPMode: ptrIPMode(v1.LoadBalancerIPModeVIP)}}
			}
			if _, err := a.client.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
				logger.V(2).Info("Updating load-balancer status", "service", key, "err", err)
				failed = true
				continue
			}
			delete(reported, key)
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
