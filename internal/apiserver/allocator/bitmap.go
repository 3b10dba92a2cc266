package allocator

// bitmap tracks which of size offsets are taken. Dynamic allocation
// prefers the upper band [static, size) and falls back to the lower band
// [0, static), the way upstream keeps low addresses (10.43.0.1 for the API
// server, 10.43.0.10 for DNS) free for services that ask for them. It is not
// safe for concurrent use; the allocators lock around it.
type bitmap struct {
	words  []uint64
	size   int
	static int
	count  int
	cursor int // next offset to try in the upper band
}

func newBitmap(size int) bitmap {
	return bitmap{
		words:  make([]uint64, (size+63)/64),
		size:   size,
		static: staticBand(size),
		cursor: staticBand(size),
	}
}

// staticBand is the size of the lower band: min(max(16, size/16), 256),
// upstream's choice for service IPs.
func staticBand(size int) int {
	b := size / 16
	if b < 16 {
		b = 16
	}
	if b > 256 {
		b = 256
	}
	if b > size {
		b = size
	}
	return b
}

func (b *bitmap) has(i int) bool { return b.words[i/64]&(1<<(uint(i)%64)) != 0 }

func (b *bitmap) set(i int) {
	if !b.has(i) {
		b.words[i/64] |= 1 << (uint(i) % 64)
		b.count++
	}
}

func (b *bitmap) clear(i int) {
	if b.has(i) {
		b.words[i/64] &^= 1 << (uint(i) % 64)
		b.count--
	}
}

func (b *bitmap) reset() {
	for i := range b.words {
		b.words[i] = 0
	}
	b.count = 0
	b.cursor = b.static
}

// free finds a free offset without taking it, skipping those skip reports
// as taken (nil skips none). It scans the upper band from the cursor, then
// the lower band.
func (b *bitmap) free(skip func(int) bool) (int, bool) {
	if b.count == b.size {
		return 0, false
	}
	try := func(lo, hi int) (int, bool) {
		for i := lo; i < hi; {
			if !b.has(i) && (skip == nil || !skip(i)) {
				return i, true
			}
			// Skip a whole word when every offset in it is taken.
			if i%64 == 0 && i+64 <= hi && b.words[i/64] == ^uint64(0) {
				i += 64
				continue
			}
			i++
		}
		return 0, false
	}
	if i, ok := try(b.cursor, b.size); ok {
		return i, true
	}
	if i, ok := try(b.static, b.cursor); ok {
		return i, true
	}
	return try(0, b.static)
}

// next takes a free offset.
func (b *bitmap) next() (int, bool) {
	i, ok := b.free(nil)
	if !ok {
		return 0, false
	}
	b.set(i)
	if i >= b.static {
		b.cursor = i + 1
		if b.cursor >= b.size {
			b.cursor = b.static
		}
	}
	return i, true
}

// used returns how many offsets are taken.
func (b *bitmap) used() int { return b.count }
