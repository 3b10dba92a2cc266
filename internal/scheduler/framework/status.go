package framework

import (
	"errors"
	"slices"
	"strings"
)

// Code is the outcome of running a plugin.
type Code int

// The codes are those of upstream's framework, with the same meaning.
const (
	// Success means the plugin ran and the pod may go on (a nil *Status is
	// a Success).
	Success Code = iota
	// Error is an internal error: the cycle is aborted and the pod retried.
	Error
	// Unschedulable means the pod does not fit the node now, but preemption
	// or a change in the cluster may make it fit.
	Unschedulable
	// UnschedulableAndUnresolvable means the pod cannot fit the node and
	// preempting pods there would not help.
	UnschedulableAndUnresolvable
	// Wait is returned by Permit plugins to hold the pod before binding.
	Wait
	// Skip means the plugin has nothing to do for this pod: from PreFilter
	// it skips the plugin's Filter, from PreScore its Score, from Bind it
	// hands over to the next Bind plugin.
	Skip
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip"}

func (c Code) String() string {
	if c < 0 || int(c) >= len(codeNames) {
		return "Unknown"
	}
	return codeNames[c]
}

// Status is the result of a plugin call. A nil *Status means Success and
// every method is safe on nil.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus returns a status with the code and reasons. An Error status
// carries an error built from the reasons.
func NewStatus(code Code, reasons ...string) *Status {
	s := &Status{code: code, reasons: reasons}
	if code == Error {
		s.err = errors.New(s.Message())
	}
	return s
}

// AsStatus wraps err in an Error status; nil gives nil.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the code; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// Reasons returns the reasons (shared, do not modify).
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	if s.err != nil && len(s.reasons) == 0 {
		return []string{s.err.Error()}
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons(), ", ")
}

// AppendReason adds a reason.
func (s *Status) AppendReason(reason string) {
	s.reasons = append(s.reasons, reason)
}

// Plugin is the name of the plugin that returned the status, when known.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records the plugin that returned the status and returns s.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

// WithError attaches err and returns s.
func (s *Status) WithError(err error) *Status {
	if s != nil {
		s.err = err
	}
	return s
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsWait reports a Wait status.
func (s *Status) IsWait() bool { return s.Code() == Wait }

// IsSkip reports a Skip status.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the pod was found not to fit
// (Unschedulable or UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// AsError returns nil for Success, Wait and Skip, and an error otherwise.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsWait() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// Equal compares code, reasons, plugin and error text; cmp.Diff uses it.
func (s *Status) Equal(o *Status) bool {
	if s == nil || o == nil {
		return s.IsSuccess() && o.IsSuccess()
	}
	if s.code != o.code || s.plugin != o.plugin || !slices.Equal(s.reasons, o.reasons) {
		return false
	}
	if s.err == nil || o.err == nil {
		return s.err == o.err
	}
	return s.err.Error() == o.err.Error()
}

// String renders the status for logs and test failures.
func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	out := s.code.String()
	if m := s.Message(); m != "" {
		out += ": " + m
	}
	if s.plugin != "" {
		out += " (" + s.plugin + ")"
	}
	return out
}
