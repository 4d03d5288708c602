package errclass

import (
	"errors"
	"time"

	"github.com/resumable-go/resumable/internal/errwalk"
)

// ErrExpired is matched by errors marked with [CursorExpired] and by a
// stream's error when a cursor expired with no resync hook to take over.
var ErrExpired = errors.New("errclass: cursor expired")

type marker interface {
	error
	decision() Decision
}

type permanentError struct{ err error }

// Permanent marks err so that [Default] answers [Fail]: the
// stream gives up and returns it. Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

func (e *permanentError) Error() string      { return e.err.Error() }
func (e *permanentError) Unwrap() error      { return e.err }
func (e *permanentError) decision() Decision { return Decision{Action: Fail} }

type retryAfterError struct {
	err   error
	after time.Duration
}

// RetryAfter marks err so that [Default] answers [Retry] with After d: the
// next attempt waits at least d (a negative d counts as zero).
// RetryAfter(nil, d) returns nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{err: err, after: d}
}

func (e *retryAfterError) Error() string {
	return e.err.Error() + " (retry after " + e.after.String() + ")"
}
func (e *retryAfterError) Unwrap() error      { return e.err }
func (e *retryAfterError) decision() Decision { return Decision{Action: Retry, After: e.after} }

type expiredError struct{ err error }

// CursorExpired marks err so that [Default] answers [Expired] and
// errors.Is(err, [ErrExpired]) is true. CursorExpired(nil) returns nil.
func CursorExpired(err error) error {
	if err == nil {
		return nil
	}
	return &expiredError{err: err}
}

func (e *expiredError) Error() string        { return e.err.Error() }
func (e *expiredError) Unwrap() error        { return e.err }
func (e *expiredError) Is(target error) bool { return target == ErrExpired }
func (e *expiredError) decision() Decision   { return Decision{Action: Expired} }

// permanenter: errors that know they are final, from packages without errclass.
type permanenter interface{ Permanent() bool }

// classifyMarkers returns the first marker's decision, or Unknown. It must
// not allocate: a stream asks it at every clean end of a connection.
func classifyMarkers(err error) Decision {
	switch e := errwalk.First(err, isMarker).(type) {
	case marker:
		return e.decision()
	case permanenter:
		return Decision{Action: Fail}
	}
	return Decision{}
}

func isMarker(err error) bool {
	switch e := err.(type) {
	case marker:
		return true
	case permanenter:
		return e.Permanent()
	}
	return false
}

// String is for debugging: "retry after 1s", "fail".
func (d Decision) String() string {
	if d.After > 0 {
		return d.Action.String() + " after " + d.After.String()
	}
	return d.Action.String()
}
