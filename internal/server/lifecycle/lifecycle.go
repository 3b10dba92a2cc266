// Package lifecycle runs long-running components that follow the project's
// contract — Start(ctx) blocks until ctx is done, Ready is closed once the
// component serves — and stops them in the order the caller chooses.
package lifecycle

import (
	"context"
	"fmt"
	"time"
)

// Component is a long-running part of a process.
type Component interface {
	// Start runs until ctx is done and returns the first fatal error.
	Start(ctx context.Context) error
	// Ready is closed once the component serves.
	Ready() <-chan struct{}
}

// Handle is a launched component.
type Handle struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Launch starts c in a goroutine with its own context derived from parent
// and waits until it is Ready. It fails if c returns first, if timeout
// passes (0 means no limit) or if parent is done; c is then stopped.
func Launch(parent context.Context, name string, c Component, timeout time.Duration) (*Handle, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	h := &Handle{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = c.Start(ctx)
	}()

	var timeoutC <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timeoutC = t.C
	}
	select {
	case <-c.Ready():
		return h, nil
	case <-h.done:
		cancel()
		if h.err != nil {
			return nil, fmt.Errorf("%s: %w", name, h.err)
		}
		return nil, fmt.Errorf("%s stopped before it was ready", name)
	case <-timeoutC:
		_ = h.Stop()
		return nil, fmt.Errorf("%s not ready after %v", name, timeout)
	case <-parent.Done():
		_ = h.Stop()
		return nil, fmt.Errorf("%s: %w", name, context.Cause(parent))
	}
}

// Done is closed when the component's Start has returned.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Err is what Start returned; valid after Done.
func (h *Handle) Err() error {
	<-h.done
	if h.err != nil {
		return fmt.Errorf("%s: %w", h.name, h.err)
	}
	return nil
}

// Stop cancels the component's context, waits for Start to return and
// returns its error.
func (h *Handle) Stop() error {
	h.cancel()
	return h.Err()
}
