package storage

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ToAPIError turns a storage error into the API error a client sees, with
// upstream's reason and code. Other errors pass through unchanged.
func ToAPIError(err error, gr schema.GroupResource, name string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case ErrCodeKeyNotFound:
		return apierrors.NewNotFound(gr, name)
	case ErrCodeKeyExists:
		return apierrors.NewAlreadyExists(gr, name)
	case ErrCodeResourceVersionConflicts:
		if e.Msg != "" && e.Msg[0] == 'P' { // precondition messages
			return apierrors.NewConflict(gr, name, errors.New(e.Msg))
		}
		return apierrors.NewConflict(gr, name, errors.New(OptimisticLockMessage))
	case ErrCodeResourceExpired:
		if e.Continue != "" {
			se := apierrors.NewResourceExpired(inconsistentContinue)
			se.ErrStatus.ListMeta.Continue = e.Continue
			return se
		}
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%s)", e.ResourceVersion, e.Msg))
	case ErrCodeTooLargeResourceVersion:
		se := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %s", e.ResourceVersion, e.Msg), 1)
		se.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return se
	case ErrCodeInvalidContinue:
		return apierrors.NewBadRequest(e.Msg)
	case ErrCodeInvalidObj:
		return apierrors.NewInternalError(e)
	case ErrCodeNotReady:
		return apierrors.NewTooManyRequests(e.Msg, e.RetryAfterSeconds)
	case ErrCodeRequestTooLarge:
		return apierrors.NewRequestEntityTooLargeError(e.Msg)
	case ErrCodeTimeout:
		return apierrors.NewTimeoutError(e.Msg, 0)
	}
	return apierrors.NewInternalError(e)
}

// inconsistentContinue is upstream's message for a continue token whose
// revision was compacted, with the token that continues at the newest one.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

// OptimisticLockMessage is upstream's message for a stale resourceVersion.
const OptimisticLockMessage = "the object has been modified; please apply your changes to the latest version and try again"

// StatusFor is the metav1.Status of an error, for watch error events.
func StatusFor(err error) *metav1.Status {
	api := ToAPIError(err, schema.GroupResource{}, "")
	var s apierrors.APIStatus
	if errors.As(api, &s) {
		st := s.Status()
		return &st
	}
	st := apierrors.NewInternalError(err).Status()
	return &st
}
