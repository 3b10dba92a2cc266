package allocator

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"
)

// Owner is the Service a ClusterIP is allocated to.
type Owner struct {
	Namespace, Name string
}

// IPClaimer makes ClusterIP allocations visible to every API server that
// shares the store: upstream's MultiCIDRServiceAllocator keeps one
// networking.k8s.io/v1 IPAddress object per allocated address, created
// with "create if absent", so two API servers never hand out the same
// address. The bitmap of Services stays the fast local index; the claim
// is the arbiter.
type IPClaimer interface {
	// ClaimIP records that owner holds ip. It is idempotent for the same
	// owner and fails with ErrIPAllocated when another owner holds it.
	ClaimIP(ctx context.Context, ip string, owner Owner) error
	// ReleaseIP removes owner's claim on ip (no-op if owner does not hold
	// it).
	ReleaseIP(ctx context.Context, ip string, owner Owner)
}

// PortClaimer makes NodePort allocations visible to every API server that
// shares the store, as upstream's: the range's bitmap is one object in
// the store, changed by compare-and-swap, so two API servers never hand
// out the same port. The bitmap of Ports stays the fast local index; the
// shared one is the arbiter. It has no owners: a port is held or free.
type PortClaimer interface {
	// ClaimPort marks port held; ErrPortAllocated when it already is.
	ClaimPort(ctx context.Context, port int) error
	// ReleasePort marks port free.
	ReleasePort(ctx context.Context, port int)
	// MarkPorts marks every port held (those already held stay so).
	MarkPorts(ctx context.Context, ports []int) error
	// ClaimedPorts is the set of held ports; nil when it cannot be read.
	ClaimedPorts(ctx context.Context) map[int]bool
}

// claimPort asks the port claimer, if any, for port. On
// ErrPortAllocated the port stays marked locally: another API server
// holds it.
func (t *Txn) claimPort(port int) error {
	if t.s.PortClaimer == nil || t.dryRun {
		return nil
	}
	err := t.s.PortClaimer.ClaimPort(t.ctx, port)
	if err != nil && !errors.Is(err, ErrPortAllocated) {
		t.s.Ports.Release(port) // not known to be held: let a retry pick it again
	}
	return err
}

// resyncPorts makes the local port bitmap the shared one (what other API
// servers released meanwhile becomes free here); it reports whether any
// port was freed.
func (s *Services) resyncPorts(ctx context.Context) bool {
	if s.PortClaimer == nil {
		return false
	}
	claimed := s.PortClaimer.ClaimedPorts(ctx)
	if claimed == nil {
		return false
	}
	return s.Ports.Resync(claimed) > 0
}

// claimTimeout bounds the claims made without a caller's context (restore).
const claimTimeout = 10 * time.Second

// claim asks the claimer, if any, for ip. On ErrIPAllocated the address
// stays marked in the local bitmap: another API server holds it.
func (t *Txn) claim(ip string) error {
	if t.s.Claimer == nil || t.dryRun {
		return nil
	}
	err := t.s.Claimer.ClaimIP(t.ctx, ip, t.owner)
	if err != nil && !errors.Is(err, ErrIPAllocated) {
		t.s.freeIP(ip) // not known to be held: let a retry pick it again
	}
	return err
}

// For names the context and the Service the transaction allocates for;
// the claimer (Services.Claimer) needs both.
func (t *Txn) For(ctx context.Context, owner Owner) *Txn {
	t.ctx, t.owner = ctx, owner
	return t
}

// markHeldPorts marks the NodePorts of the stored Services in the shared
// bitmap at start (ports allocated before it existed, or by a server that
// stopped between its claim and its write).
func (s *Services) markHeldPorts(ports []int) error {
	if s.PortClaimer == nil || len(ports) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	return s.PortClaimer.MarkPorts(ctx, ports)
}

// claimHeld claims every address of a stored Service at start, so that
// addresses allocated before claims existed (or by a server that stopped
// between its write and its claim) are visible to the other API servers.
// A conflict is logged, not fatal: the Service keeps its address.
func (s *Services) claimHeld(owner Owner, ips []string) {
	if s.Claimer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	for _, ip := range ips {
		if err := s.Claimer.ClaimIP(ctx, ip, owner); err != nil {
			klog.Background().Info("ClusterIP of a stored Service is claimed by another owner", "service", owner.Namespace+"/"+owner.Name, "ip", ip, "err", err)
		}
	}
}
