package allocator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// DefaultNodePortRange is the range NodePorts come from unless configured.
const DefaultNodePortRange = "30000-32767"

// ErrPortAllocated means a requested port is taken.
var ErrPortAllocated = errors.New("provided port is already allocated")

// PortNotInRangeError is returned for a requested port outside the range.
type PortNotInRangeError struct {
	ValidPorts string
}

func (e *PortNotInRangeError) Error() string {
	return fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", e.ValidPorts)
}

// Ports allocates ports from an inclusive range.
type Ports struct {
	base int
	spec string

	mu  sync.Mutex
	set bitmap
}

// NewPorts builds an allocator for a range written "30000-32767" (or a
// single port "30000").
func NewPorts(spec string) (*Ports, error) {
	lo, hi, err := parsePortRange(spec)
	if err != nil {
		return nil, fmt.Errorf("node port range %q: %w", spec, err)
	}
	size := hi - lo + 1
	p := &Ports{base: lo, spec: fmt.Sprintf("%d-%d", lo, hi), set: newBitmap(size)}
	// Upstream's static band for ports is min(max(16, size/32), 128).
	band := size / 32
	if band < 16 {
		band = 16
	}
	if band > 128 {
		band = 128
	}
	if band > size {
		band = size
	}
	p.set.static, p.set.cursor = band, band
	if band == size {
		p.set.cursor = 0
		p.set.static = 0
	}
	return p, nil
}

func parsePortRange(spec string) (int, int, error) {
	spec = strings.TrimSpace(spec)
	loS, hiS, found := strings.Cut(spec, "-")
	if !found {
		hiS = loS
	}
	lo, err := strconv.Atoi(strings.TrimSpace(loS))
	if err != nil {
		return 0, 0, fmt.Errorf("invalid start: %w", err)
	}
	hi, err := strconv.Atoi(strings.TrimSpace(hiS))
	if err != nil {
		return 0, 0, fmt.Errorf("invalid end: %w", err)
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, errors.New("must be within 1-65535 with start <= end")
	}
	return lo, hi, nil
}

// Range is the range as "lo-hi".
func (a *Ports) Range() string { return a.spec }

// Base is the range's first port.
func (a *Ports) Base() int { return a.base }

// Size is how many ports the range holds.
func (a *Ports) Size() int { return a.set.size }

// Used is how many ports are taken.
func (a *Ports) Used() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.set.used()
}

// Has reports whether port is taken.
func (a *Ports) Has(port int) bool {
	i, err := a.offset(port)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.set.has(i)
}

// Allocate takes a specific port.
func (a *Ports) Allocate(port int) error {
	i, err := a.offset(port)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set.has(i) {
		return ErrPortAllocated
	}
	a.set.set(i)
	return nil
}

// Check reports the error Allocate would return, without taking anything.
func (a *Ports) Check(port int) error {
	i, err := a.offset(port)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set.has(i) {
		return ErrPortAllocated
	}
	return nil
}

// AllocateNext takes a free port.
func (a *Ports) AllocateNext() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.set.next()
	if !ok {
		return 0, ErrFull
	}
	return a.base + i, nil
}

// PeekNext returns a free port without taking it, skipping those in
// exclude (for dry runs).
func (a *Ports) PeekNext(exclude map[int]bool) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, ok := a.set.free(func(i int) bool { return exclude[a.base+i] })
	if !ok {
		return 0, ErrFull
	}
	return a.base + i, nil
}

// Release frees a port; releasing a free or foreign port is a no-op.
func (a *Ports) Release(port int) {
	i, err := a.offset(port)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set.clear(i)
}

// Resync frees every taken port not in held and takes every port in held
// (the shared bitmap), and returns how many it freed.
func (a *Ports) Resync(held map[int]bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	freed := 0
	for i := 0; i < a.set.size; i++ {
		switch {
		case held[a.base+i] && !a.set.has(i):
			a.set.set(i)
		case !held[a.base+i] && a.set.has(i):
			a.set.clear(i)
			freed++
		}
	}
	return freed
}

func (a *Ports) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set.reset()
}

func (a *Ports) offset(port int) (int, error) {
	if port < a.base || port >= a.base+a.set.size {
		return 0, &PortNotInRangeError{ValidPorts: a.spec}
	}
	return port - a.base, nil
}
