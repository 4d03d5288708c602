package stream

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
)

// Option configures a [Resumer]. Options are made by the With functions of
// this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// defaultMaxServerDelay is the cap on a server's requested delay unless
// WithMaxServerDelay says otherwise.
const defaultMaxServerDelay = 10 * time.Minute

// config is the non-generic part of a Resumer's settings. The typed settings
// (hooks, order, resync) are kept with the types they were made for and
// checked against the Resumer's type parameters once, in New.
type config struct {
	classifier errclass.Classifier
	policy     backoff.Policy
	minRestart time.Duration
	maxServer  time.Duration
	poll       time.Duration
	idle       time.Duration
	limiter    Limiter
	logger     *zap.Logger
	everyN     int // -1: unset
	interval   time.Duration
	saveTO     time.Duration
	hooks      []typed // Hooks[C]
	order      typed   // func(a, b C) int
	resync     typed   // ResyncFunc[T, C]

	concurrency int            // handlers at once; 0: one
	window      int            // events read but not committed; 0: the default
	orderKey    typed          // func(window int) keyTable[T]
	tries       int            // handler tries per event; 0: one
	retryPolicy backoff.Policy // waits between handler tries
	park        typed          // func(ctx, T, error) error
	skipRepeats bool
	batch       int           // WithBatch's max; 0: not set
	linger      time.Duration // WithBatch's linger
	batchEnd    typed         // func(T) bool
	errs        []error
}

// typed is a typed option's value with the type arguments it was made with.
type typed struct {
	v    any
	t, c reflect.Type // T (nil when the option has none) and C
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// WithClassifier sets the classifier consulted for every failure. A decision
// of [errclass.Unknown] falls through to [errclass.Default]. Nil means
// [errclass.Default] alone, which is also the default.
func WithClassifier(c errclass.Classifier) Option {
	return optionFunc(func(cfg *config) { cfg.classifier = c })
}

// WithBackoff sets the policy for the delay after a failure (and for the
// guard after a clean end that delivered nothing). Nil means
// [backoff.Default], which is also the default. A policy with a method
// Validate() error that reports an error (an out-of-range
// [backoff.Exponential]) makes New fail.
func WithBackoff(p backoff.Policy) Option {
	return optionFunc(func(cfg *config) { cfg.policy = p })
}

// WithMinRestartDelay sets the least time between the starts of two
// consecutive tries (a try is the open limiter's wait, then Open); a
// connection that lived longer than d reopens at once (the delay rule:
// docs/how-it-decides.md). Default 0. A negative d makes New fail.
func WithMinRestartDelay(d time.Duration) Option {
	return durationOption("WithMinRestartDelay", d, func(cfg *config) { cfg.minRestart = d })
}

// WithMaxServerDelay caps the delay a server asks for (Retry-After,
// Kubernetes' RetryAfterSeconds, SSE retry:), so that a misconfigured or
// hostile server cannot park a stream for a day (the delay rule:
// docs/how-it-decides.md). Default 10 minutes; 0 removes the cap; a
// negative d makes New fail.
func WithMaxServerDelay(d time.Duration) Option {
	return durationOption("WithMaxServerDelay", d, func(cfg *config) { cfg.maxServer = d })
}

// WithPollInterval sets a steady wait d after a connection that ended
// cleanly having delivered nothing (an empty page of a polled API, see
// [Pages]); a connection that delivered events reopens at once. Without it
// (d = 0, the default) such a connection is only guarded against a server
// that accepts and closes at once. A negative d makes New fail.
func WithPollInterval(d time.Duration) Option {
	return durationOption("WithPollInterval", d, func(cfg *config) { cfg.poll = d })
}

// WithIdleTimeout turns on the stall watchdog: a connection that delivers no
// event for d (progress-only events count) is closed, and the failure,
// matching [ErrIdleTimeout], goes through the classifier ([errclass.Default]
// retries it). It catches half-open connections, works when Recv ignores
// its context, and fires between d and 1.25·d. It does not bound Open.
// Default 0, off; a negative d makes New fail.
func WithIdleTimeout(d time.Duration) Option {
	return durationOption("WithIdleTimeout", d, func(cfg *config) { cfg.idle = d })
}

// Limiter is a budget of Opens that many Resumers can share, so that
// thousands of streams do not stampede a server that just came back. Wait
// blocks until the caller may proceed, or returns an error (ctx's when ctx
// ends). It must be safe for concurrent use. *rate.Limiter from
// golang.org/x/time/rate satisfies it.
type Limiter interface {
	Wait(ctx context.Context) error
}

// WithOpenLimiter makes every Open, the first included, wait on l after the
// reopen delay. A Resumer blocked on l returns when its context ends only
// if l.Wait honours that context, as *rate.Limiter does. An error from
// l.Wait is a failed try, classified like any other. Nil means none, which
// is the default; a nil pointer in a non-nil interface makes New fail.
func WithOpenLimiter(l Limiter) Option {
	return optionFunc(func(cfg *config) {
		if l != nil && isNil(l) {
			cfg.fail("WithOpenLimiter: the Limiter is a nil %v", reflect.TypeOf(l))
			return
		}
		cfg.limiter = l
	})
}

// WithLogger sets the logger. Reconnects are logged at Debug, retried
// failures at Info with their attempt, cursor, delay, error and decision,
// terminal failures at Warn; nothing per event. Nil means zap.NewNop(),
// which is also the default.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(cfg *config) { cfg.logger = l })
}

// WithCheckpointEvery makes the Resumer save the Store every n committed
// cursors instead of after every one; n = 0 means "not by count". The Store
// is still saved when a connection ends and when Run or All returns, so
// only a crash redelivers: up to n−1 handled events. Default 1; a negative
// n makes New fail.
func WithCheckpointEvery(n int) Option {
	return optionFunc(func(cfg *config) {
		if n < 0 {
			cfg.fail("WithCheckpointEvery(%d): negative count", n)
			return
		}
		cfg.everyN = n
	})
}

// WithCheckpointInterval makes the Resumer save the Store at the first commit
// after d has passed since the last save. Used alone it replaces the default
// save-per-event; with [WithCheckpointEvery], whichever comes first saves.
// A stream that goes quiet is saved d after the last save all the same,
// without waiting for its next event. After a crash, the events handled in the last d may be
// redelivered. A negative d makes New fail; 0 turns interval saves off.
func WithCheckpointInterval(d time.Duration) Option {
	return durationOption("WithCheckpointInterval", d, func(cfg *config) { cfg.interval = d })
}

// WithFinalSaveTimeout bounds the Store.Save made when Run or All returns,
// which runs on a context that is not cancelled with Run's (so that a
// cancelled run still records its progress). Default 5s. A negative or zero
// d makes New fail.
func WithFinalSaveTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		if d <= 0 {
			cfg.fail("WithFinalSaveTimeout(%v): the timeout is not positive", d)
			return
		}
		cfg.saveTO = d
	})
}

// durationOption is an option that sets a duration that must not be
// negative.
func durationOption(name string, d time.Duration, set func(*config)) Option {
	return optionFunc(func(cfg *config) {
		if d < 0 {
			cfg.fail("%s(%v): negative duration", name, d)
			return
		}
		set(cfg)
	})
}

// WithHooks installs callbacks; see [Hooks]. C must be the Resumer's cursor
// type, or New fails. Several WithHooks options add up: every set is
// called, in the order given (a metrics collector beside hooks of your own).
func WithHooks[C any](h Hooks[C]) Option {
	return optionFunc(func(cfg *config) {
		cfg.hooks = append(cfg.hooks, typed{v: h, c: reflect.TypeFor[C]()})
	})
}

// WithCursorOrder tells the Resumer how cursors are ordered (compare returns
// a negative number when a is before b, as cmp.Compare does). Run then fails
// (an error naming both cursors) when an event's cursor is before the
// committed one, instead of delivering events out of order; an equal cursor is
// allowed (a heartbeat may repeat it). C must be the Resumer's cursor type,
// or New fails. Without it cursors are opaque. Nil means none.
func WithCursorOrder[C any](compare func(a, b C) int) Option {
	return optionFunc(func(cfg *config) {
		cfg.order = typed{}
		if compare != nil {
			cfg.order = typed{v: compare, c: reflect.TypeFor[C]()}
		}
	})
}

// ResyncFunc is called when a failure is classified [errclass.Expired]: the
// cursor can no longer be resumed from. It streams the current state (a
// fresh listing, say) through emit, which hands each event to the handler
// and returns the handler's error — which the function must then return at
// once — and returns the cursor to continue after, committed once it
// returned nil. Its error is classified like any failure.
type ResyncFunc[T, C any] func(ctx context.Context, cause error, emit func(T) error) (C, error)

// WithResync installs the function called when the cursor expired. T and C
// must be the Resumer's type parameters, or New fails. Without it an expired
// cursor ends Run with an error matching [errclass.ErrExpired]. Nil means
// none.
func WithResync[T, C any](f ResyncFunc[T, C]) Option {
	return optionFunc(func(cfg *config) {
		cfg.resync = typed{}
		if f != nil {
			cfg.resync = typed{v: f, t: reflect.TypeFor[T](), c: reflect.TypeFor[C]()}
		}
	})
}
