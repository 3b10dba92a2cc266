package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Options configure Services. The zero value means the defaults.
type Options struct {
	// ServiceCIDR for ClusterIPs; default DefaultServiceCIDR.
	ServiceCIDR string
	// NodePortRange like "30000-32767"; default DefaultNodePortRange.
	NodePortRange string
}

// Services holds the ClusterIP and NodePort allocators of a cluster.
//
// ClusterIPs come from the server's own range (IPs) and, once it is full,
// from the other usable ServiceCIDRs the view lists (upstream's
// MultiCIDRServiceAllocator; upstream picks among them at random, Skiff
// in address order). A requested address must be in a usable range.
type Services struct {
	// IPs is the server's own range (--service-cluster-ip-range).
	IPs   *IPs
	Ports *Ports
	// Claimer, when set, arbitrates ClusterIPs between API servers
	// (IPAddress objects); see IPClaimer.
	Claimer IPClaimer
	// View, when set, lists the ServiceCIDRs and the claimed addresses;
	// without it only IPs is used.
	View IPView
	// PortClaimer, when set, arbitrates NodePorts between API servers;
	// see PortClaimer.
	PortClaimer PortClaimer

	mu    sync.Mutex
	extra map[netip.Prefix]*extraRange // other ServiceCIDRs' ranges
}

// NewServices builds empty allocators. Call Rebuild with the stored
// Services before serving writes.
func NewServices(opts Options) (*Services, error) {
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	if opts.NodePortRange == "" {
		opts.NodePortRange = DefaultNodePortRange
	}
	ips, err := NewIPs(opts.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	ports, err := NewPorts(opts.NodePortRange)
	if err != nil {
		return nil, err
	}
	return &Services{IPs: ips, Ports: ports, extra: map[netip.Prefix]*extraRange{}}, nil
}

// Claims are the values one Service holds.
type Claims struct {
	IPs   []string
	Ports []int
}

// ClaimsOf lists the ClusterIPs (not "None") and NodePorts (including the
// health check node port) that svc holds, each once.
func ClaimsOf(svc *corev1.Service) Claims {
	var c Claims
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, ip := range ips {
			if ip != "" && ip != corev1.ClusterIPNone {
				c.IPs = append(c.IPs, ip)
			}
		}
	}
	seen := map[int]bool{}
	add := func(p int) {
		if p != 0 && !seen[p] {
			seen[p] = true
			c.Ports = append(c.Ports, p)
		}
	}
	for _, p := range svc.Spec.Ports {
		add(int(p.NodePort))
	}
	add(int(svc.Spec.HealthCheckNodePort))
	sort.Ints(c.Ports)
	return c
}

// Rebuild forgets every allocation and takes the values held by services,
// as stored. The API server calls it once at start with every stored
// Service, before it accepts writes. Values that collide or fall outside
// the configured ranges are skipped and reported in the returned error;
// the rest are still taken, so the error is worth logging, not fatal.
func (s *Services) Rebuild(services []corev1.Service) error {
	s.mu.Lock()
	s.extra = map[netip.Prefix]*extraRange{} // rebuilt from the view
	s.mu.Unlock()
	s.IPs.reset()
	s.Ports.reset()
	var errs []error
	var held []int
	for i := range services {
		svc := &services[i]
		c := ClaimsOf(svc)
		for _, ip := range c.IPs {
			if a, err := netip.ParseAddr(ip); err == nil && !s.IPs.Contains(a) {
				continue // another ServiceCIDR's: marked from its IPAddress
			}
			if err := s.IPs.Allocate(ip); err != nil {
				errs = append(errs, fmt.Errorf("service %s/%s: cluster IP %s: %w", svc.Namespace, svc.Name, ip, err))
			}
		}
		s.claimHeld(Owner{Namespace: svc.Namespace, Name: svc.Name}, c.IPs)
		for _, p := range c.Ports {
			if err := s.Ports.Allocate(p); err != nil {
				errs = append(errs, fmt.Errorf("service %s/%s: node port %d: %w", svc.Namespace, svc.Name, p, err))
				continue
			}
			held = append(held, p)
		}
	}
	if err := s.markHeldPorts(held); err != nil {
		errs = append(errs, fmt.Errorf("mark the stored Services' node ports in the shared range: %w", err))
	}
	return errors.Join(errs...)
}

// Txn groups the allocations of one write so that they can be undone
// together. In a dry run nothing is taken or released: requested values are
// only checked and "next" values are peeked.
type Txn struct {
	s      *Services
	dryRun bool
	ctx    context.Context
	owner  Owner

	ips, releasedIPs     []string
	ports, releasedPorts []int
	// dry-run bookkeeping: values this txn pretends to hold.
	fakeIPs   map[string]bool
	fakePorts map[int]bool
}

// Begin starts a transaction.
func (s *Services) Begin(dryRun bool) *Txn {
	return &Txn{s: s, dryRun: dryRun, ctx: context.Background(), fakeIPs: map[string]bool{}, fakePorts: map[int]bool{}}
}

// AllocateIP takes ip.
func (t *Txn) AllocateIP(ip string) error {
	if t.dryRun {
		if t.fakeIPs[ip] {
			return ErrIPAllocated
		}
		if err := t.s.takeIP(ip, true); err != nil {
			return err
		}
		t.fakeIPs[ip] = true
		return nil
	}
	if err := t.s.takeIP(ip, false); err != nil {
		return err
	}
	if err := t.claim(ip); err != nil {
		return err
	}
	t.ips = append(t.ips, ip)
	return nil
}

// AllocateNextIP takes any free IP.
func (t *Txn) AllocateNextIP() (string, error) {
	if t.dryRun {
		ip, err := t.s.peekNextIP(t.fakeIPs)
		if err != nil {
			return "", err
		}
		t.fakeIPs[ip] = true
		return ip, nil
	}
	resynced := false
	for {
		ip, err := t.s.takeNextIP()
		if errors.Is(err, ErrFull) && !resynced {
			// Every range looks full: free what other API servers
			// released meanwhile, and look once more.
			resynced = true
			if t.s.resync() {
				continue
			}
		}
		if err != nil {
			return "", err
		}
		err = t.claim(ip)
		if errors.Is(err, ErrIPAllocated) {
			continue // held by another API server: stays marked, try the next
		}
		if err != nil {
			return "", err
		}
		t.ips = append(t.ips, ip)
		return ip, nil
	}
}

// AllocatePort takes port.
func (t *Txn) AllocatePort(port int) error {
	if t.dryRun {
		if t.fakePorts[port] {
			return ErrPortAllocated
		}
		if err := t.s.Ports.Check(port); err != nil {
			return err
		}
		t.fakePorts[port] = true
		return nil
	}
	if err := t.s.Ports.Allocate(port); err != nil {
		if !errors.Is(err, ErrPortAllocated) || t.s.PortClaimer == nil {
			return err
		}
		// Marked here, but it may have been freed through another API
		// server: the shared bitmap decides.
		if err := t.s.PortClaimer.ClaimPort(t.ctx, port); err != nil {
			return err
		}
	} else if err := t.claimPort(port); err != nil {
		return err
	}
	t.ports = append(t.ports, port)
	return nil
}

// AllocateNextPort takes any free port.
func (t *Txn) AllocateNextPort() (int, error) {
	if t.dryRun {
		p, err := t.s.Ports.PeekNext(t.fakePorts)
		if err != nil {
			return 0, err
		}
		t.fakePorts[p] = true
		return p, nil
	}
	resynced := false
	for {
		p, err := t.s.Ports.AllocateNext()
		if errors.Is(err, ErrFull) && !resynced {
			// The range looks full: free what other API servers released
			// meanwhile, and look once more.
			resynced = true
			if t.s.resyncPorts(t.ctx) {
				continue
			}
		}
		if err != nil {
			return 0, err
		}
		err = t.claimPort(p)
		if errors.Is(err, ErrPortAllocated) {
			continue // held by another API server: stays marked, try the next
		}
		if err != nil {
			return 0, err
		}
		t.ports = append(t.ports, p)
		return p, nil
	}
}

// Release frees the values in c now; Undo takes them back.
func (t *Txn) Release(c Claims) {
	if t.dryRun {
		return
	}
	for _, ip := range c.IPs {
		t.s.freeIP(ip)
		t.releasedIPs = append(t.releasedIPs, ip)
		if t.s.Claimer != nil {
			t.s.Claimer.ReleaseIP(t.ctx, ip, t.owner)
		}
	}
	for _, p := range c.Ports {
		// Released even when not marked here: another API server may have
		// allocated it.
		t.s.Ports.Release(p)
		t.releasedPorts = append(t.releasedPorts, p)
		if t.s.PortClaimer != nil {
			t.s.PortClaimer.ReleasePort(t.ctx, p)
		}
	}
}

// Undo frees what the transaction took and takes back what it released
// (best effort: a released value that another write took meanwhile stays
// with that write). Undo is idempotent.
func (t *Txn) Undo() {
	for _, ip := range t.ips {
		t.s.freeIP(ip)
		if t.s.Claimer != nil {
			t.s.Claimer.ReleaseIP(t.ctx, ip, t.owner)
		}
	}
	for _, p := range t.ports {
		t.s.Ports.Release(p)
		if t.s.PortClaimer != nil {
			t.s.PortClaimer.ReleasePort(t.ctx, p)
		}
	}
	for _, ip := range t.releasedIPs {
		t.s.markIP(ip)
		_ = t.claim(ip)
	}
	for _, p := range t.releasedPorts {
		if t.s.Ports.Allocate(p) == nil {
			_ = t.claimPort(p)
		}
	}
	t.ips, t.ports, t.releasedIPs, t.releasedPorts = nil, nil, nil, nil
}

// Release frees every value svc holds (after it was deleted), and its
// claims.
func (s *Services) Release(ctx context.Context, svc *corev1.Service) {
	c := ClaimsOf(svc)
	for _, ip := range c.IPs {
		s.freeIP(ip)
		if s.Claimer != nil {
			s.Claimer.ReleaseIP(ctx, ip, Owner{Namespace: svc.Namespace, Name: svc.Name})
		}
	}
	for _, p := range c.Ports {
		s.Ports.Release(p)
		if s.PortClaimer != nil {
			s.PortClaimer.ReleasePort(ctx, p)
		}
	}
}
