package flowcontrol

import (
	"context"
	"fmt"
)

// Request is what flow control knows of a request.
type Request struct {
	// User and Groups are the authenticated user's.
	User   string
	Groups []string
	// Verb is the API verb (get, list, create, ...) for resource requests
	// and the lower-case HTTP method for others.
	Verb            string
	APIGroup        string
	Resource        string
	Subresource     string
	Namespace       string
	Path            string
	ResourceRequest bool
	// Mutating is true for writes (max-in-flight counts them apart).
	Mutating bool
	// Seats is the work estimate, at least 1 (a list of many objects
	// costs more).
	Seats int
}

// RejectedError says a request was turned away (429): which schema and
// level, why (upstream's reasons: queue-full, concurrency-limit,
// time-out, cancelled) and when to come back.
type RejectedError struct {
	FlowSchema, PriorityLevel       string
	FlowSchemaUID, PriorityLevelUID string
	Reason                          string
	RetryAfterSeconds               int
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("request rejected by flow control (%s, priority level %q)", e.Reason, e.PriorityLevel)
}

// Limiter runs fn if and when the request may run; otherwise it returns a
// *RejectedError (or the context's error) without running fn.
type Limiter interface {
	Do(ctx context.Context, req Request, fn func()) error
}

// LimiterFunc adapts a function to Limiter.
type LimiterFunc func(ctx context.Context, req Request, fn func()) error

// Do calls f.
func (f LimiterFunc) Do(ctx context.Context, req Request, fn func()) error { return f(ctx, req, fn) }

// SystemMastersGroup is exempt from max-in-flight, as upstream.
const SystemMastersGroup = "system:masters"

// MaxInFlight caps the requests served at once, read-only and mutating
// apart; a request over the cap is rejected at once.
type MaxInFlight struct {
	readOnly chan struct{}
	mutating chan struct{}
	metrics  *Metrics
}

var _ Limiter = (*MaxInFlight)(nil)

// NewMaxInFlight builds the limiter; a limit of 0 or less means no limit
// of that kind. metrics may be nil.
func NewMaxInFlight(maxReadOnly, maxMutating int, metrics *Metrics) *MaxInFlight {
	m := &MaxInFlight{metrics: metrics}
	if maxReadOnly > 0 {
		m.readOnly = make(chan struct{}, maxReadOnly)
	}
	if maxMutating > 0 {
		m.mutating = make(chan struct{}, maxMutating)
	}
	return m
}

// Do runs fn within the limit.
func (m *MaxInFlight) Do(ctx context.Context, req Request, fn func()) error {
	for _, g := range req.Groups {
		if g == SystemMastersGroup {
			fn()
			return nil
		}
	}
	sem, kind := m.readOnly, "readOnly"
	if req.Mutating {
		sem, kind = m.mutating, "mutating"
	}
	if sem == nil {
		fn()
		return nil
	}
	select {
	case sem <- struct{}{}:
	default:
		if m.metrics != nil {
			m.metrics.droppedRequests.WithLabelValues(kind).Inc()
		}
		return &RejectedError{Reason: "concurrency-limit", RetryAfterSeconds: 1}
	}
	defer func() { <-sem }()
	fn()
	return nil
}
