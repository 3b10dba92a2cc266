package framework

import (
	"errors"
	"fmt"
	"sync"
)

// ErrNotFound is returned by CycleState.Read for a missing key.
var ErrNotFound = errors.New("not found")

// StateKey names an entry of the CycleState; plugins use their own name or
// a name derived from it.
type StateKey string

// StateData is what plugins keep in the CycleState. Clone is used when the
// state is copied (preemption simulates on a clone); immutable data may
// return itself.
type StateData interface {
	Clone() StateData
}

// CycleState is the state of one scheduling cycle, written by a plugin at
// one extension point and read at the next ones. It is safe for concurrent
// use, because Filter and Score run in parallel over nodes.
type CycleState struct {
	mu      sync.RWMutex
	storage map[StateKey]StateData
	// SkipFilterPlugins are the plugins whose PreFilter returned Skip.
	skipFilter map[string]bool
	// SkipScorePlugins are the plugins whose PreScore returned Skip.
	skipScore map[string]bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{storage: map[StateKey]StateData{}}
}

// Read returns the data under key, or an error wrapping ErrNotFound.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v, ok := c.storage[key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("read %q from cycle state: %w", key, ErrNotFound)
}

// Write stores val under key.
func (c *CycleState) Write(key StateKey, val StateData) {
	c.mu.Lock()
	c.storage[key] = val
	c.mu.Unlock()
}

// Delete removes key.
func (c *CycleState) Delete(key StateKey) {
	c.mu.Lock()
	delete(c.storage, key)
	c.mu.Unlock()
}

// Clone copies the state, cloning each entry. Clone of nil is nil.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := NewCycleState()
	for k, v := range c.storage {
		out.storage[k] = v.Clone()
	}
	out.skipFilter = cloneSet(c.skipFilter)
	out.skipScore = cloneSet(c.skipScore)
	return out
}

// SetSkipFilter marks the plugins whose Filter is skipped in this cycle.
func (c *CycleState) SetSkipFilter(names map[string]bool) {
	c.mu.Lock()
	c.skipFilter = names
	c.mu.Unlock()
}

// SkipFilter reports whether plugin's Filter is skipped in this cycle.
func (c *CycleState) SkipFilter(plugin string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.skipFilter[plugin]
}

// SetSkipScore marks the plugins whose Score is skipped in this cycle.
func (c *CycleState) SetSkipScore(names map[string]bool) {
	c.mu.Lock()
	c.skipScore = names
	c.mu.Unlock()
}

// SkipScore reports whether plugin's Score is skipped in this cycle.
func (c *CycleState) SkipScore(plugin string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.skipScore[plugin]
}

// ReadAs reads key and asserts its type.
func ReadAs[T StateData](c *CycleState, key StateKey) (T, error) {
	var zero T
	v, err := c.Read(key)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("cycle state %q holds %T, want %T", key, v, zero)
	}
	return t, nil
}

func cloneSet(m map[string]bool) map[string]bool {
	if m == nil {
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
