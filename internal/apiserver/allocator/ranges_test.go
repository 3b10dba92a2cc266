package allocator

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// store is a fake of the IPAddress and ServiceCIDR objects that API
// servers share: claims are create-if-absent, the view reads them.
type store struct {
	mu     sync.Mutex
	claims map[string]Owner
	cidrs  []ServiceCIDR
	// broken makes the view unreadable (a cache that times out).
	broken bool
}

func newStore(cidrs ...ServiceCIDR) *store {
	return &store{claims: map[string]Owner{}, cidrs: cidrs}
}

func (s *store) ClaimIP(_ context.Context, ip string, o Owner) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.claims[ip]; ok && cur != o {
		return ErrIPAllocated
	}
	s.claims[ip] = o
	return nil
}

func (s *store) ReleaseIP(_ context.Context, ip string, o Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims[ip] == o {
		delete(s.claims, ip)
	}
}

func (s *store) ServiceCIDRs() ([]ServiceCIDR, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return nil, errors.New("cache not ready")
	}
	return append([]ServiceCIDR(nil), s.cidrs...), nil
}

func (s *store) ClaimedIPs() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return nil
	}
	out := map[string]bool{}
	for ip := range s.claims {
		out[ip] = true
	}
	return out
}

func (s *store) IsClaimed(ip string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.claims[ip]
	return ok
}

// server is one API server's allocator on st.
func server(t *testing.T, st *store, cidr string) *Services {
	t.Helper()
	s, err := NewServices(Options{ServiceCIDR: cidr})
	if err != nil {
		t.Fatal(err)
	}
	s.Claimer, s.View = st, st
	return s
}

func allocNext(s *Services, name string) (string, error) {
	txn := s.Begin(false).For(context.Background(), Owner{Namespace: "ns", Name: name})
	return txn.AllocateNextIP()
}

func allocIP(s *Services, name, ip string) error {
	txn := s.Begin(false).For(context.Background(), Owner{Namespace: "ns", Name: name})
	return txn.AllocateIP(ip)
}

// TestServiceCIDRsExtendTheRange: once the server's /29 is full, addresses
// come from another usable ServiceCIDR; a requested address must be in a
// usable range; a ServiceCIDR being deleted (not usable) gives none.
func TestServiceCIDRsExtendTheRange(t *testing.T) {
	st := newStore()
	s := server(t, st, "10.0.0.0/29")
	for i := 0; i < 6; i++ {
		if _, err := allocNext(s, "fill"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := allocNext(s, "more"); !errors.Is(err, ErrFull) {
		t.Fatalf("7th address from a /29: %v, want %v", err, ErrFull)
	}
	if err := allocIP(s, "req", "10.44.0.5"); !errors.Is(err, ErrMismatchedNetwork) {
		t.Fatalf("address outside every ServiceCIDR: %v, want %v", err, ErrMismatchedNetwork)
	}

	st.mu.Lock()
	st.cidrs = []ServiceCIDR{{Name: "kubernetes", CIDRs: []string{"10.0.0.0/29"}, Usable: true},
		{Name: "extra", CIDRs: []string{"10.44.0.0/24", "fd00::/120"}, Usable: true}}
	st.claims["10.44.0.200"] = Owner{Namespace: "other", Name: "held"} // claimed before this server knew the range
	st.mu.Unlock()
	var got []string
	for i := 0; i < 3; i++ {
		ip, err := allocNext(s, "more"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip)
	}
	extra := netip.MustParsePrefix("10.44.0.0/24")
	for _, ip := range got {
		if !extra.Contains(netip.MustParseAddr(ip)) || ip == "10.44.0.200" {
			t.Errorf("next address %s, want one of 10.44.0.0/24 other than 10.44.0.200", ip)
		}
	}
	if err := allocIP(s, "req", "10.44.0.5"); err != nil {
		t.Errorf("requested address in the extra ServiceCIDR: %v", err)
	}
	if err := allocIP(s, "req2", "10.44.0.200"); !errors.Is(err, ErrIPAllocated) {
		t.Errorf("requested address claimed elsewhere: %v, want %v", err, ErrIPAllocated)
	}
	if err := allocIP(s, "req3", "10.44.0.255"); !errors.Is(err, ErrMismatchedNetwork) {
		t.Errorf("broadcast address of the extra ServiceCIDR: %v, want %v", err, ErrMismatchedNetwork)
	}

	st.mu.Lock()
	st.cidrs[1].Usable = false // being deleted
	st.mu.Unlock()
	if _, err := allocNext(s, "late"); !errors.Is(err, ErrFull) {
		t.Errorf("next address with the extra ServiceCIDR terminating: %v, want %v", err, ErrFull)
	}
	if err := allocIP(s, "late", "10.44.0.6"); !errors.Is(err, ErrMismatchedNetwork) {
		t.Errorf("requested address in a terminating ServiceCIDR: %v, want %v", err, ErrMismatchedNetwork)
	}
}

// TestAddressFreedThroughAnotherServer: what server A frees, server B hands
// out again, whether asked for by name or as the next free one.
func TestAddressFreedThroughAnotherServer(t *testing.T) {
	st := newStore()
	a, b := server(t, st, "10.0.0.0/29"), server(t, st, "10.0.0.0/29")
	held := map[string]string{}
	for i := 0; i < 6; i++ {
		name := "s" + string(rune('a'+i))
		ip, err := allocNext(b, name)
		if err != nil {
			t.Fatal(err)
		}
		held[name] = ip
	}
	// a learns nothing of b's allocations but the claims; it deletes two
	// of b's Services.
	for _, name := range []string{"sa", "sb"} {
		svcs := svc(name, "ClusterIP", held[name])
		a.Release(context.Background(), &svcs)
	}
	if err := allocIP(b, "again", held["sa"]); err != nil {
		t.Errorf("address %s freed through A, asked for on B: %v", held["sa"], err)
	}
	ip, err := allocNext(b, "next")
	if err != nil || ip != held["sb"] {
		t.Errorf("next address on B = %q, %v; want %s (freed through A)", ip, err, held["sb"])
	}
	if diff := cmp.Diff(6, len(st.ClaimedIPs())); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

// TestHugeServiceCIDR: a ServiceCIDR of half the IPv4 space costs a
// bounded bitmap, and its first addresses are handed out.
func TestHugeServiceCIDR(t *testing.T) {
	ips, err := NewIPs("0.0.0.0/1")
	if err != nil {
		t.Fatal(err)
	}
	if ips.Size() != maxIPv4Range {
		t.Errorf("size %d, want %d", ips.Size(), maxIPv4Range)
	}
	if err := ips.Allocate("0.0.0.10"); err != nil {
		t.Errorf("allocate 0.0.0.10: %v", err)
	}
	var notInRange *IPNotInRangeError
	if err := ips.Allocate("100.0.0.1"); !errors.As(err, &notInRange) {
		t.Errorf("allocate 100.0.0.1 beyond the bitmap: %v, want not in the valid range", err)
	}
}

// TestUnreadableView: while the view cannot be read, the ranges already
// known stay in use.
func TestUnreadableView(t *testing.T) {
	st := newStore(ServiceCIDR{Name: "extra", CIDRs: []string{"10.44.0.0/24"}, Usable: true})
	s := server(t, st, "10.0.0.0/29")
	if err := allocIP(s, "a", "10.44.0.5"); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	st.broken = true
	st.mu.Unlock()
	if err := allocIP(s, "b", "10.44.0.6"); err != nil {
		t.Errorf("requested address of a known ServiceCIDR, view unreadable: %v", err)
	}
}
