package framework

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
// use, because Filter and Score run in parallel over nodes; reads take no
// lock (the storage is a sync.Map, whose reads of keys written before the
// parallel phase do not contend), as upstream's CycleState.
type CycleState struct {
	storage sync.Map // StateKey → StateData
	// skipFilter are the plugins whose PreFilter returned Skip.
	skipFilter atomic.Pointer[map[string]bool]
	// skipScore are the plugins whose PreScore returned Skip.
	skipScore atomic.Pointer[map[string]bool]
	// recordPluginMetrics says whether this cycle times each plugin.
	recordPluginMetrics atomic.Bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{}
}

// Read returns the data under key, or an error wrapping ErrNotFound.
func (c *CycleState) Read(key StateKey) (StateData, error) {
	if v, ok := c.storage.Load(key); ok {
		return v.(StateData), nil
	}
	return nil, fmt.Errorf("read %q from cycle state: %w", key, ErrNotFound)
}

// Write stores val under key.
func (c *CycleState) Write(key StateKey, val StateData) {
	c.storage.Store(key, val)
}

// Delete removes key.
func (c *CycleState) Delete(key StateKey) {
	c.storage.Delete(key)
}

// Clone copies the state, cloning each entry. Clone of nil is nil.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	out := NewCycleState()
	c.storage.Range(func(k, v any) bool {
		out.storage.Store(k, v.(StateData).Clone())
		return true
	})
	out.skipFilter.Store(c.skipFilter.Load())
	out.skipScore.Store(c.skipScore.Load())
	out.recordPluginMetrics.Store(c.recordPluginMetrics.Load())
	return out
}

// SetSkipFilter marks the plugins whose Filter is skipped in this cycle.
// The map must not be changed afterwards.
func (c *CycleState) SetSkipFilter(names map[string]bool) {
	c.skipFilter.Store(&names)
}

// SkipFilter reports whether plugin's Filter is skipped in this cycle.
func (c *CycleState) SkipFilter(plugin string) bool {
	if m := c.skipFilter.Load(); m != nil {
		return (*m)[plugin]
	}
	return false
}

// SetSkipScore marks the plugins whose Score is skipped in this cycle.
// The map must not be changed afterwards.
func (c *CycleState) SetSkipScore(names map[string]bool) {
	c.skipScore.Store(&names)
}

// SkipScore reports whether plugin's Score is skipped in this cycle.
func (c *CycleState) SkipScore(plugin string) bool {
	if m := c.skipScore.Load(); m != nil {
		return (*m)[plugin]
	}
	return false
}

// SetRecordPluginMetrics says whether the framework times each plugin in
// this cycle (upstream samples 10% of the cycles).
func (c *CycleState) SetRecordPluginMetrics(v bool) { c.recordPluginMetrics.Store(v) }

// ShouldRecordPluginMetrics reports whether this cycle times each plugin.
func (c *CycleState) ShouldRecordPluginMetrics() bool { return c.recordPluginMetrics.Load() }

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
