package allocator

import (
	"net/netip"
	"sort"

	"k8s.io/klog/v2"
)

// ServiceCIDR is what the allocator needs of a networking.k8s.io/v1
// ServiceCIDR.
type ServiceCIDR struct {
	Name  string
	CIDRs []string
	// Usable: new addresses may come from it. Upstream's rule: its Ready
	// condition is True (or it has none yet) and it is not being deleted.
	Usable bool
}

// IPView is the cluster's state of ClusterIPs as this API server's caches
// see it (upstream's allocator reads the same through informers): the
// ServiceCIDRs, and the addresses that have an IPAddress object. The view
// may lag behind the store; the claim (IPClaimer) stays the arbiter.
type IPView interface {
	// ServiceCIDRs lists every ServiceCIDR.
	ServiceCIDRs() ([]ServiceCIDR, error)
	// ClaimedIPs is the set of addresses that have an IPAddress; nil
	// when it cannot be read.
	ClaimedIPs() map[string]bool
	// IsClaimed reports whether ip has an IPAddress.
	IsClaimed(ip string) bool
}

// extraRange is the bitmap of a ServiceCIDR other than the server's own
// range.
type extraRange struct {
	ips    *IPs
	usable bool
}

// syncRanges brings the extra ranges in line with the ServiceCIDRs of the
// view: a new range is built and marked with the addresses already
// claimed in it, a range no ServiceCIDR names any more is dropped.
// Callers hold s.mu.
func (s *Services) syncRanges() {
	if s.View == nil {
		return
	}
	cidrs, err := s.View.ServiceCIDRs()
	if err != nil {
		return // keep the ranges known: the claims still arbitrate
	}
	usable := map[netip.Prefix]bool{}
	for _, sc := range cidrs {
		for _, c := range sc.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil || p.Addr().Is6() != s.IPs.Is6() {
				continue
			}
			p = p.Masked()
			if p == s.IPs.Prefix() {
				continue // the server's own range, always usable
			}
			usable[p] = usable[p] || sc.Usable
		}
	}
	var claimed map[string]bool
	for p, ok := range usable {
		if r, known := s.extra[p]; known {
			r.usable = ok
			continue
		}
		ips, err := NewIPs(p.String())
		if err != nil {
			klog.Background().V(2).Info("ServiceCIDR range not used for ClusterIPs", "cidr", p, "err", err)
			continue
		}
		if claimed == nil {
			claimed = s.View.ClaimedIPs()
		}
		for ip := range claimed {
			_ = ips.Allocate(ip) // others are outside the range
		}
		s.extra[p] = &extraRange{ips: ips, usable: ok}
	}
	for p := range s.extra {
		if _, ok := usable[p]; !ok {
			delete(s.extra, p)
		}
	}
}

// usableRanges lists the ranges new addresses come from: the server's own
// first, then the other ServiceCIDRs' in address order. Callers hold
// s.mu.
func (s *Services) usableRanges() []*IPs {
	out := []*IPs{s.IPs}
	var extra []*IPs
	for _, r := range s.extra {
		if r.usable {
			extra = append(extra, r.ips)
		}
	}
	sort.Slice(extra, func(i, j int) bool {
		a, b := extra[i].Prefix(), extra[j].Prefix()
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	return append(out, extra...)
}

// each calls fn with every known range that contains ip (usable or not).
// Callers hold s.mu.
func (s *Services) each(ip string, fn func(*IPs)) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	if s.IPs.Contains(addr) {
		fn(s.IPs)
	}
	for _, r := range s.extra {
		if r.ips.Contains(addr) {
			fn(r.ips)
		}
	}
}

// rangeFor is the first usable range containing ip, or
// ErrMismatchedNetwork. Callers hold s.mu.
func (s *Services) rangeFor(ip string) (*IPs, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, err
	}
	for _, r := range s.usableRanges() {
		if r.Contains(addr) {
			return r, nil
		}
	}
	return nil, ErrMismatchedNetwork
}

// takeIP marks ip taken in every known range holding it, after checking
// that a usable one does. A mark that the view does not back (an address
// freed through another API server) does not make it taken: the claim
// decides.
func (s *Services) takeIP(ip string, dryRun bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncRanges()
	r, err := s.rangeFor(ip)
	if err != nil {
		return err
	}
	if err := r.Check(ip); err != nil {
		if err != ErrIPAllocated || s.View == nil || s.View.IsClaimed(ip) {
			return err
		}
	}
	if !dryRun {
		s.each(ip, func(r *IPs) { _ = r.Allocate(ip) })
	}
	return nil
}

// takeNextIP takes a free address from the first usable range that has
// one, and marks it in the other ranges holding it too.
func (s *Services) takeNextIP() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncRanges()
	for _, r := range s.usableRanges() {
		ip, err := r.AllocateNext()
		if err == ErrFull {
			continue
		}
		if err != nil {
			return "", err
		}
		s.each(ip, func(o *IPs) { _ = o.Allocate(ip) })
		return ip, nil
	}
	return "", ErrFull
}

// peekNextIP is takeNextIP for a dry run: nothing is taken, addresses in
// exclude are skipped.
func (s *Services) peekNextIP(exclude map[string]bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncRanges()
	for _, r := range s.usableRanges() {
		if ip, err := r.PeekNext(exclude); err == nil {
			return ip, nil
		}
	}
	return "", ErrFull
}

// markIP marks ip taken wherever it falls (restore and undo).
func (s *Services) markIP(ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.each(ip, func(r *IPs) { _ = r.Allocate(ip) })
}

// freeIP clears ip in every range holding it.
func (s *Services) freeIP(ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.each(ip, func(r *IPs) { r.Release(ip) })
}

// resync frees, in every range, the marks of addresses that have no
// IPAddress any more (freed through another API server). It reports
// whether anything was freed.
func (s *Services) resync() bool {
	if s.View == nil {
		return false
	}
	claimed := s.View.ClaimedIPs()
	if claimed == nil {
		return false // the view could not be read: clear nothing
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	freed := s.IPs.Resync(claimed)
	for _, r := range s.extra {
		freed += r.ips.Resync(claimed)
	}
	return freed > 0
}
