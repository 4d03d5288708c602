package stream

import (
	"context"
	"fmt"
	"reflect"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
)

// defaultWindowPerHandler sets the default window: this many events per
// handler slot, and never fewer than minDefaultWindow.
const (
	defaultWindowPerHandler = 4
	minDefaultWindow        = 64
)

// WithConcurrency lets up to n events be in the handler at once (n ≥ 1; 1,
// the default, hands one event at a time to the handler on Run's
// goroutine). With n > 1 the handler runs on n goroutines that Run starts
// and ends; events with equal keys ([WithOrderKey]) never overlap and keep
// stream order, and the committed cursor is the end of the contiguous
// prefix of handled events: never beyond an unfinished one. At most the
// window ([WithWindow]) of events is read but not committed. [Resumer.All]
// refuses n > 1. See docs/concurrency.md.
func WithConcurrency(n int) Option {
	return optionFunc(func(cfg *config) {
		if n < 1 {
			cfg.fail("WithConcurrency(%d): fewer than one handler", n)
			return
		}
		cfg.concurrency = n
	})
}

// WithWindow bounds how many events are read but not yet committed under
// [WithConcurrency] (n > 1): when the oldest unfinished event holds the
// window full, reading pauses (and the idle watchdog with it) until it
// finishes. After a crash at most the window, plus the checkpoint cadence,
// is delivered again. Default max(64, 4·n); a window smaller than n makes
// New fail. It has no effect with one handler.
func WithWindow(n int) Option {
	return optionFunc(func(cfg *config) {
		if n < 1 {
			cfg.fail("WithWindow(%d): the window holds no event", n)
			return
		}
		cfg.window = n
	})
}

// WithOrderKey makes events with equal keys go to the handler one at a
// time, in stream order, under [WithConcurrency]; events with different keys
// may overlap. Without it, any events may overlap. With one handler it
// changes nothing. T must be the Resumer's event type, or New fails. Nil
// means none.
func WithOrderKey[T any, K comparable](key func(T) K) Option {
	return optionFunc(func(cfg *config) {
		cfg.orderKey = typed{}
		if key != nil {
			cfg.orderKey = typed{v: func(window int) keyTable[T] { return newKeys(key, window) }, t: reflect.TypeFor[T]()}
		}
	})
}

// WithHandlerRetry retries a failed handler call on the same event, in
// place (the connection stays open), up to attempts tries in all, waiting
// between tries as p says (nil: [backoff.Default]). The classifier decides
// what a handler error means: [errclass.Permanent] (a [errclass.Fail]
// decision) is not retried, [errclass.RetryAfter] is a floor for the next
// wait, and any error fails after the last try: the event is then parked
// ([WithDeadLetter]) or ends Run. Events after a retried one wait for it
// (per key under [WithOrderKey]). [ErrStop], ctx's end and a break out of
// an All loop are never retried. attempts < 1, or a policy that
// [WithBackoff] would refuse, makes New fail; attempts = 1 retries nothing.
func WithHandlerRetry(attempts int, p backoff.Policy) Option {
	return optionFunc(func(cfg *config) {
		if attempts < 1 {
			cfg.fail("WithHandlerRetry(%d): fewer than one try", attempts)
			return
		}
		if p == nil {
			p = backoff.Default()
		}
		cfg.tries, cfg.retryPolicy = attempts, p
	})
}

// WithDeadLetter parks an event whose handler tries are spent (or whose
// error is permanent): park receives the event and a [*HandlerError] with
// the last error; once park returns nil the event counts as handled, its
// cursor is committed and the stream goes on. A park error ends Run with
// the event uncommitted (delivered again next time). A crash between a
// successful park and the commit parks the event once more on the next run.
// [ErrStop] and ctx's end are never parked. T must be the Resumer's event
// type, or New fails. Nil means none: a spent event ends Run.
func WithDeadLetter[T any](park func(ctx context.Context, event T, err error) error) Option {
	return optionFunc(func(cfg *config) {
		cfg.park = typed{}
		if park != nil {
			cfg.park = typed{v: park, t: reflect.TypeFor[T]()}
		}
	})
}

// WithSkipRepeats makes the Resumer skip, instead of handing to the
// handler, an event whose cursor is not after the committed one, for
// servers that resume inclusively (they resend the event at the cursor they
// were given). It needs [WithCursorOrder] (or New fails); skipped events
// are counted in [Stats].Skipped. Never use it where several events share
// one position (a transaction's rows under one LSN, an etcd revision
// without an index): the second of them would be skipped and lost.
func WithSkipRepeats() Option {
	return optionFunc(func(cfg *config) { cfg.skipRepeats = true })
}

// HandlerError is the error a dead-letter function ([WithDeadLetter])
// receives, and the one Run returns when an event's tries are spent
// without one: the handler's last error and how many tries were made.
type HandlerError struct {
	// Err is the handler's last error.
	Err error
	// Tries is how many times the handler was called with the event.
	Tries int
}

// Error returns the last error's text with the number of tries.
func (e *HandlerError) Error() string {
	return fmt.Sprintf("stream: handler failed %d times: %v", e.Tries, e.Err)
}

// Unwrap returns the handler's last error.
func (e *HandlerError) Unwrap() error { return e.Err }

// HandlerEvent describes one failed handler call, for [Hooks].OnHandlerError.
type HandlerEvent[C any] struct {
	// Cursor is the event's cursor.
	Cursor C
	// Try counts the tries of this event, this one included (from 1).
	Try int
	// Err is the handler's error.
	Err error
	// Decision is the classifier's verdict on Err.
	Decision errclass.Decision
	// Retry reports that the handler is called again with the event, and
	// Parked that the dead letter is given it; neither: Run ends.
	Retry, Parked bool
}
