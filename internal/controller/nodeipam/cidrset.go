package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// ErrFull means every node CIDR of the cluster CIDR is in use.
var ErrFull = errors.New("no CIDRs left in the cluster CIDR")

// cidrSet is the pure core of the allocator: which node-sized blocks of
// the cluster CIDR are in use. Allocation goes round the range from the
// block after the last one handed out, as upstream's cidrset does, so a
// block just released is not handed to the next node at once. It is not
// safe for concurrent use.
type cidrSet struct {
	cluster  netip.Prefix
	maskSize int
	// bits is maskSize - cluster bits: the blocks are numbered 0..2^bits-1.
	bits int
	max  int
	used big.Int
	// count is how many blocks are in use; next is where the search for a
	// free block starts.
	count, next int
}

// maxBlockBits bounds the number of blocks (2^16, as upstream).
const maxBlockBits = 16

func newCIDRSet(cluster netip.Prefix, maskSize int) (*cidrSet, error) {
	cluster = cluster.Masked()
	if !cluster.IsValid() {
		return nil, errors.New("cluster CIDR is not set")
	}
	if maskSize < cluster.Bits() || maskSize > cluster.Addr().BitLen() {
		return nil, fmt.Errorf("node CIDR mask size %d must be between the cluster CIDR's %d and %d", maskSize, cluster.Bits(), cluster.Addr().BitLen())
	}
	bits := maskSize - cluster.Bits()
	if bits > maxBlockBits {
		return nil, fmt.Errorf("node CIDR mask size %d is more than %d bits longer than the cluster CIDR %s", maskSize, maxBlockBits, cluster)
	}
	return &cidrSet{cluster: cluster, maskSize: maskSize, bits: bits, max: 1 << bits}, nil
}

// allocateNext marks the next free block used and returns it.
func (s *cidrSet) allocateNext() (netip.Prefix, error) {
	if s.count == s.max {
		return netip.Prefix{}, ErrFull
	}
	i := s.next
	for s.used.Bit(i) == 1 {
		i = (i + 1) % s.max
	}
	s.used.SetBit(&s.used, i, 1)
	s.count++
	s.next = (i + 1) % s.max
	return s.block(i), nil
}

// contains reports whether p lies inside the cluster CIDR (a prefix as
// long as the cluster's or longer).
func (s *cidrSet) contains(p netip.Prefix) bool {
	return p.IsValid() && p.Addr().Is4() == s.cluster.Addr().Is4() && p.Bits() >= s.cluster.Bits() && s.cluster.Contains(p.Addr())
}

// occupy marks the blocks p covers used; p must be inside the cluster CIDR.
func (s *cidrSet) occupy(p netip.Prefix) error {
	first, last, err := s.span(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		if s.used.Bit(i) == 0 {
			s.used.SetBit(&s.used, i, 1)
			s.count++
		}
	}
	return nil
}

// release marks the blocks p covers free.
func (s *cidrSet) release(p netip.Prefix) error {
	first, last, err := s.span(p)
	if err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		if s.used.Bit(i) == 1 {
			s.used.SetBit(&s.used, i, 0)
			s.count--
		}
	}
	return nil
}

// span is the first and last block p covers: one block for a prefix as
// long as the node mask or longer, several for a shorter one.
func (s *cidrSet) span(p netip.Prefix) (int, int, error) {
	if !s.contains(p) {
		return 0, 0, fmt.Errorf("%s is outside the cluster CIDR %s", p, s.cluster)
	}
	first := s.index(p.Addr())
	if p.Bits() >= s.maskSize {
		return first, first, nil
	}
	return first, first + 1<<(s.maskSize-p.Bits()) - 1, nil
}

// index is the number of the block holding addr.
func (s *cidrSet) index(addr netip.Addr) int {
	a := new(big.Int).SetBytes(addr.AsSlice())
	shift := uint(addr.BitLen() - s.maskSize)
	a.Rsh(a, shift)
	mask := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(s.bits)), big.NewInt(1))
	return int(a.And(a, mask).Int64())
}

// block is block number i.
func (s *cidrSet) block(i int) netip.Prefix {
	base := new(big.Int).SetBytes(s.cluster.Addr().AsSlice())
	off := new(big.Int).Lsh(big.NewInt(int64(i)), uint(s.cluster.Addr().BitLen()-s.maskSize))
	b := base.Or(base, off).FillBytes(make([]byte, s.cluster.Addr().BitLen()/8))
	addr, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(addr, s.maskSize)
}
