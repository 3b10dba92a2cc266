package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fake is a component whose behaviour is scripted.
type fake struct {
	ready    chan struct{}
	becomeOK bool  // close ready at start
	failWith error // return at once with this error
	stopped  chan struct{}
}

func newFake(becomeOK bool, failWith error) *fake {
	return &fake{ready: make(chan struct{}), becomeOK: becomeOK, failWith: failWith, stopped: make(chan struct{})}
}

func (f *fake) Ready() <-chan struct{} { return f.ready }

func (f *fake) Start(ctx context.Context) error {
	defer close(f.stopped)
	if f.failWith != nil {
		return f.failWith
	}
	if f.becomeOK {
		close(f.ready)
	}
	<-ctx.Done()
	return nil
}

func TestLaunch(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		comp    *fake
		timeout time.Duration
		wantErr string
	}{
		{name: "ready", comp: newFake(true, nil)},
		{name: "fails before ready", comp: newFake(false, boom), wantErr: "c: boom"},
		{name: "never ready", comp: newFake(false, nil), timeout: 20 * time.Millisecond, wantErr: "not ready after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Launch(context.Background(), "c", tc.comp, tc.timeout)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Launch error = %v, want it to contain %q", err, tc.wantErr)
				}
				select {
				case <-tc.comp.stopped:
				case <-time.After(5 * time.Second):
					t.Fatal("component still running after a failed Launch")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.Done():
				t.Fatal("component stopped right after Launch")
			default:
			}
			if err := h.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			select {
			case <-tc.comp.stopped:
			default:
				t.Fatal("Stop returned before the component stopped")
			}
		})
	}
}

func TestLaunchParentCancelDoesNotStopReadyComponent(t *testing.T) {
	// The parent context only bounds the wait for Ready; the caller decides
	// when to stop, so shutdown order stays under its control.
	parent, cancel := context.WithCancel(context.Background())
	f := newFake(true, nil)
	h, err := Launch(parent, "c", f, 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-h.Done():
		t.Fatal("component stopped when the parent context was cancelled")
	case <-time.After(50 * time.Millisecond):
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
