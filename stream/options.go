package stream

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
)

// Option configures a [Resumer]. Options are made by the With functions of
// this package.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is the non-generic part of a Resumer's settings. The typed settings
// (hooks, order, resync) are stored behind any and checked against the
// Resumer's type parameters once, in New.
type config struct {
	classifier errclass.Classifier
	policy     backoff.Policy
	minRestart time.Duration
	logger     *zap.Logger
	everyN     int // -1: unset
	interval   time.Duration
	saveTO     time.Duration
	hooks      any // Hooks[C]
	order      any // func(a, b C) int
	resync     any // ResyncFunc[T, C]
	errs       []error
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

// WithBackoff sets the policy for the delay after a failure. The Resumer takes
// one sequence from it and resets that sequence whenever a connection
// committed a cursor. Nil means [backoff.Default], which is also the default.
// A policy that reports an error from Validate makes New fail.
func WithBackoff(p backoff.Policy) Option {
	return optionFunc(func(cfg *config) { cfg.policy = p })
}

// WithMinRestartDelay sets the least time between the starts of two
// consecutive Opens (non-sliding, like wait.NonSlidingUntil: a connection
// that lived longer than d reopens at once). Default 0. A negative d makes
// New fail.
func WithMinRestartDelay(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		if d < 0 {
			cfg.fail("WithMinRestartDelay(%v): the delay must not be negative", d)
			return
		}
		cfg.minRestart = d
	})
}

// WithLogger sets the logger. Reconnects are logged at Debug, retried
// failures at Info with their attempt, cursor, delay, error and decision,
// terminal failures at Warn; nothing per event above Debug. Nil means
// zap.NewNop(), which is also the default.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(cfg *config) { cfg.logger = l })
}

// WithCheckpointEvery makes the Resumer save the Store every n committed
// cursors instead of after every one. n = 0 means "not by count" (use
// [WithCheckpointInterval], or save only when a connection or the run ends).
// The in-memory cursor ([Resumer.Cursor]) still advances per event, and the
// Store is always saved when a connection ends and when Run or All returns.
//
// This widens the at-least-once window: after a crash (a kill, not a
// return) up to n−1 handled events, plus those handled since the last
// interval save, are redelivered. Default: 1 (save after every event). A
// negative n makes New fail.
func WithCheckpointEvery(n int) Option {
	return optionFunc(func(cfg *config) {
		if n < 0 {
			cfg.fail("WithCheckpointEvery(%d): the count must not be negative", n)
			return
		}
		cfg.everyN = n
	})
}

// WithCheckpointInterval makes the Resumer save the Store at the first commit
// after d has passed since the last save. Used alone it replaces the default
// save-per-event; with [WithCheckpointEvery], whichever comes first saves.
// After a crash, the events handled in the last d (or since the last event
// of a quiet stream, until the connection ends) may be redelivered. A
// negative d makes New fail; 0 turns interval saves off.
func WithCheckpointInterval(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		if d < 0 {
			cfg.fail("WithCheckpointInterval(%v): the interval must not be negative", d)
			return
		}
		cfg.interval = d
	})
}

// WithFinalSaveTimeout bounds the Store.Save made when Run or All returns,
// which runs on a context that is not cancelled with Run's (so that a
// cancelled run still records its progress). Default 5s. A negative or zero
// d makes New fail.
func WithFinalSaveTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		if d <= 0 {
			cfg.fail("WithFinalSaveTimeout(%v): the timeout must be positive", d)
			return
		}
		cfg.saveTO = d
	})
}

// WithHooks installs callbacks; see [Hooks]. C must be the Resumer's cursor
// type, or New fails. Later WithHooks options replace earlier ones.
func WithHooks[C any](h Hooks[C]) Option {
	return optionFunc(func(cfg *config) { cfg.hooks = h })
}

// WithCursorOrder tells the Resumer how cursors are ordered (compare returns
// a negative number when a is before b, as cmp.Compare does). Run then fails
// with [ErrCursorRegressed] when an event's cursor is before the committed
// one, instead of delivering events out of order; an equal cursor is
// allowed (a heartbeat may repeat it). C must be the Resumer's cursor type,
// or New fails. Without it cursors are opaque.
func WithCursorOrder[C any](compare func(a, b C) int) Option {
	return optionFunc(func(cfg *config) {
		if compare == nil {
			cfg.order = nil
			return
		}
		cfg.order = compare
	})
}

// ResyncFunc is called when a failure is classified [errclass.Expired]: the
// cursor can no longer be resumed from. It returns the cursor to continue
// after and the events to deliver first (a fresh listing, say). The
// Resumer delivers replay to the handler in order, without extracting
// cursors, then commits after. A ResyncFunc error is classified like any
// failure (an Expired verdict on it ends Run).
type ResyncFunc[T, C any] func(ctx context.Context, cause error) (after C, replay []T, err error)

// WithResync installs the function called when the cursor expired. T and C
// must be the Resumer's type parameters, or New fails. Without it an expired
// cursor ends Run with an error matching [errclass.ErrExpired].
func WithResync[T, C any](f ResyncFunc[T, C]) Option {
	return optionFunc(func(cfg *config) {
		if f == nil {
			cfg.resync = nil
			return
		}
		cfg.resync = f
	})
}
