package allocator

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
)

// DefaultServiceCIDR is the range ClusterIPs come from unless configured.
const DefaultServiceCIDR = "10.43.0.0/16"

// maxIPv6Range caps the size of an IPv6 range, as upstream does.
const maxIPv6Range = 1 << 16

// maxIPv4Range caps the size of an IPv4 range: the largest service range
// upstream's kube-apiserver accepts is a /12. A ServiceCIDR may be larger
// (upstream's allocator has no bitmap); Skiff hands out its first 2^20
// addresses and refuses the others as not in the valid range.
const maxIPv4Range = 1 << 20

var (
	// ErrIPAllocated means a requested IP is taken.
	ErrIPAllocated = errors.New("provided IP is already allocated")
	// ErrFull means no free value is left in a range.
	ErrFull = errors.New("range is full")
	// ErrMismatchedNetwork means a requested IP is in no usable range
	// (upstream's message).
	ErrMismatchedNetwork = errors.New("the provided network does not match the current range")
)

// IPNotInRangeError is returned for a requested IP outside the range.
type IPNotInRangeError struct {
	IP         string
	ValidRange string
}

func (e *IPNotInRangeError) Error() string {
	return fmt.Sprintf("the provided IP (%s) is not in the valid range. The range of valid IPs is %s", e.IP, e.ValidRange)
}

// IPs allocates addresses from one CIDR. For IPv4 the network and broadcast
// addresses are never handed out; for IPv6 the network address is not.
type IPs struct {
	prefix netip.Prefix
	first  netip.Addr // offset 0

	mu  sync.Mutex
	set bitmap
}

// NewIPs builds an allocator for cidr (e.g. "10.43.0.0/16").
func NewIPs(cidr string) (*IPs, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	hostBits := p.Addr().BitLen() - p.Bits()
	var size int
	if p.Addr().Is4() {
		if hostBits < 2 {
			return nil, fmt.Errorf("service CIDR %q is too small", cidr)
		}
		size = 1<<hostBits - 2
		if hostBits > 20 {
			size = maxIPv4Range
		}
	} else {
		if hostBits < 1 {
			return nil, fmt.Errorf("service CIDR %q is too small", cidr)
		}
		if hostBits >= 17 {
			size = maxIPv6Range
		} else {
			size = 1<<hostBits - 1
		}
	}
	return &IPs{prefix: p, first: p.Addr().Next(), set: newBitmap(size)}, nil
}

// CIDR is the range as a string.
func (a *IPs) CIDR() string { return a.prefix.String() }

// Prefix is the range.
func (a *IPs) Prefix() netip.Prefix { return a.prefix }

// Contains reports whether ip belongs to the range as upstream's
// ServiceCIDRs count it: inside the prefix, but not its network address
// nor, for IPv4, its broadcast address.
func (a *IPs) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !a.prefix.Contains(ip) || ip == a.prefix.Addr() {
		return false
	}
	return !ip.Is4() || ip != lastAddr(a.prefix)
}

// lastAddr is the prefix's highest address (IPv4's broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - uint(i)%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Resync frees every taken address that claimed reports as not held:
// addresses freed through another API server, which this server's bitmap
// still marks. The claim stays the arbiter, so freeing an address that a
// write of this server is about to claim only costs that write a retry.
func (a *IPs) Resync(claimed map[string]bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	freed := 0
	for i := 0; i < a.set.size; i++ {
		if i%64 == 0 && a.set.words[i/64] == 0 {
			i += 63
			continue
		}
		if a.set.has(i) && !claimed[a.addr(i).String()] {
			a.set.clear(i)
			freed++
		}
	}
	return freed
}

// Is6 says whether the range is IPv6.
func (a *IPs) Is6() bool { return a.prefix.Addr().Is6() }

// Size is how many addresses the range hands out.
func (a *IPs) Size() int { return a.set.size }

// Used is how many addresses are taken.
func (a *IPs) Used() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.set.used()
}

// Has reports whether ip is taken.
func (a *IPs) Has(ip string) bool {
	i, err := a.offset(ip)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.set.has(i)
}

// Allocate takes a specific address.
func (a *IPs) Allocate(ip string) error {
	i, err := a.offset(ip)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set.has(i) {
		return ErrIPAllocated
	}
	a.set.set(i)
	return nil
}

// Check reports the error Allocate would return, without taking anything.
func (a *IPs) Check(ip string) error {
	i, err := a.offset(ip)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set.has(i) {
		return ErrIPAllocated
	}
	return nil
}

// AllocateNext takes a free address.
func (a *IPs) AllocateNext() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.set.next()
	if !ok {
		return "", ErrFull
	}
	return a.addr(i).String(), nil
}

// PeekNext returns a free address without taking it, skipping the ones in
// exclude (for dry runs).
func (a *IPs) PeekNext(exclude map[string]bool) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.set.free(func(i int) bool { return exclude[a.addr(i).String()] })
	if !ok {
		return "", ErrFull
	}
	return a.addr(i).String(), nil
}

// Release frees an address; releasing a free or foreign address is a no-op.
func (a *IPs) Release(ip string) {
	i, err := a.offset(ip)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set.clear(i)
}

func (a *IPs) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set.reset()
}

func (a *IPs) offset(ip string) (int, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return 0, fmt.Errorf("invalid IP %q: %w", ip, err)
	}
	addr = addr.Unmap()
	notInRange := &IPNotInRangeError{IP: ip, ValidRange: a.prefix.String()}
	if !a.prefix.Contains(addr) {
		return 0, notInRange
	}
	d := new(big.Int).Sub(new(big.Int).SetBytes(addr.AsSlice()), new(big.Int).SetBytes(a.first.AsSlice()))
	if d.Sign() < 0 || !d.IsInt64() || d.Int64() >= int64(a.set.size) {
		return 0, notInRange
	}
	return int(d.Int64()), nil
}

func (a *IPs) addr(i int) netip.Addr {
	n := new(big.Int).Add(new(big.Int).SetBytes(a.first.AsSlice()), big.NewInt(int64(i)))
	b := make([]byte, a.first.BitLen()/8)
	n.FillBytes(b)
	addr, _ := netip.AddrFromSlice(b)
	return addr
}
