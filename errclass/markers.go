package errclass

import (
	"errors"

	"time"
)

// ErrExpired is matched (errors.Is) by errors marked with [CursorExpired], and
// by the error a stream returns when a cursor expired and no resync hook took
// over.
var ErrExpired = errors.New("errclass: cursor expired; resume from a fresh cursor")

// marker is implemented by this package's marker errors.
type marker interface {
	error
	decision() Decision
}

type permanentError struct{ err error }

// Permanent marks err so that [Default] (and [Markers]) answer [Fail]: the
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

// RetryAfter marks err so that [Default] (and [Markers]) answer [Retry] with
// After set to d: the next attempt waits at least d. A negative d counts as
// zero. RetryAfter(nil, d) returns nil.
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

// CursorExpired marks err so that [Default] (and [Markers]) answer [Expired]
// and errors.Is(err, [ErrExpired]) reports true. CursorExpired(nil) returns
// nil.
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

// RetryAfterOf returns the delay of the first [RetryAfter] marker in err's
// tree, and whether there is one.
func RetryAfterOf(err error) (time.Duration, bool) {
	// A walk of our own rather than errors.As, which would allocate: this
	// runs at every clean end of a connection.
	return retryAfterOf(err, 0)
}

func retryAfterOf(err error, depth int) (time.Duration, bool) {
	for err != nil && depth < maxDepth {
		if ra, ok := err.(*retryAfterError); ok {
			return ra.after, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
			depth++
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if d, ok := retryAfterOf(e, depth+1); ok {
					return d, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}

// permanenter is the optional interface of errors that know they are final,
// for packages that do not import errclass.
type permanenter interface{ Permanent() bool }

// classifyMarkers walks err's tree in errors.Is order and returns the decision
// of the first marker it meets, or Unknown.
func classifyMarkers(err error) Decision {
	d, _ := walk(err, 0)
	return d
}

// maxDepth bounds the walk so that a pathological (cyclic) error tree cannot
// hang a stream.
const maxDepth = 100

func walk(err error, depth int) (Decision, bool) {
	for err != nil && depth < maxDepth {
		switch e := err.(type) {
		case marker:
			return e.decision(), true
		case permanenter:
			if e.Permanent() {
				return Decision{Action: Fail}, true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
			depth++
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if d, ok := walk(e, depth+1); ok {
					return d, true
				}
			}
			return Decision{}, false
		default:
			return Decision{}, false
		}
	}
	return Decision{}, false
}

// String is for debugging: "retry after 1s", "fail".
func (d Decision) String() string {
	if d.After > 0 {
		return d.Action.String() + " after " + d.After.String()
	}
	return d.Action.String()
}
