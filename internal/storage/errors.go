package storage

import (
	"errors"
	"fmt"
)

// ErrorCode says what went wrong in the store.
type ErrorCode int

const (
	ErrCodeKeyNotFound ErrorCode = iota + 1
	ErrCodeKeyExists
	ErrCodeResourceVersionConflicts
	ErrCodeInvalidObj
	ErrCodeUnreachable
	ErrCodeResourceExpired // the revision was compacted (410 Gone)
	ErrCodeTooLargeResourceVersion
	ErrCodeInvalidContinue
	ErrCodeNotReady        // the watch cache is (re)initializing (429)
	ErrCodeRequestTooLarge // the object exceeds etcd's request limit (413)
	ErrCodeTimeout         // etcd did not answer in time (504)
)

// Error is the error every storage call returns for an expected failure.
type Error struct {
	Code            ErrorCode
	Key             string
	ResourceVersion int64
	Msg             string
	// RetryAfterSeconds is the client's advice for ErrCodeNotReady.
	RetryAfterSeconds int
	// Continue, on ErrCodeResourceExpired of a paged list whose token's
	// revision was compacted, is a token that continues the list from the
	// same key at the newest revision (an inconsistent list), as upstream
	// offers in the 410's metadata.continue.
	Continue string
}

func (e *Error) Error() string {
	switch e.Code {
	case ErrCodeKeyNotFound:
		return fmt.Sprintf("key not found: %s", e.Key)
	case ErrCodeKeyExists:
		return fmt.Sprintf("key exists: %s", e.Key)
	case ErrCodeResourceVersionConflicts:
		return fmt.Sprintf("resource version conflicts: %s: %s", e.Key, e.Msg)
	case ErrCodeResourceExpired:
		return fmt.Sprintf("resource version %d expired: %s", e.ResourceVersion, e.Msg)
	case ErrCodeTooLargeResourceVersion:
		return fmt.Sprintf("too large resource version: %d: %s", e.ResourceVersion, e.Msg)
	}
	return fmt.Sprintf("storage error %d: %s: %s", e.Code, e.Key, e.Msg)
}

func newErr(code ErrorCode, key, msg string) error { return &Error{Code: code, Key: key, Msg: msg} }

// HasCode says whether err is a storage *Error with the given code.
func HasCode(err error, code ErrorCode) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsNotFound reports a missing key.
func IsNotFound(err error) bool { return HasCode(err, ErrCodeKeyNotFound) }

// IsExists reports a key that already exists.
func IsExists(err error) bool { return HasCode(err, ErrCodeKeyExists) }

// IsConflict reports a failed precondition or stale resourceVersion.
func IsConflict(err error) bool { return HasCode(err, ErrCodeResourceVersionConflicts) }

// IsExpired reports a compacted revision.
func IsExpired(err error) bool { return HasCode(err, ErrCodeResourceExpired) }
