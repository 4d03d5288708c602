package stream

import (
	"time"

	"github.com/resumable-go/resumable/errclass"
)

// Hooks are callbacks a Resumer calls as things happen, for metrics and
// tracing. Every field may be nil. They are called one at a time whatever
// [WithConcurrency] says, so they need no locks (under WithConcurrency from
// the handler and committer goroutines too); outside the Resumer's locks;
// and must not block: a slow hook slows the stream. A hook may call
// [Resumer.Cursor] and [Resumer.Stats].
//
// Install them with [WithHooks]; C must be the Resumer's cursor type.
// Several sets add up.
type Hooks[C any] struct {
	// OnConnect is called after Open succeeded.
	OnConnect func(ConnectEvent[C])
	// OnDisconnect is called when a connection or an Open ended, with what
	// the failure was judged to mean.
	OnDisconnect func(DisconnectEvent[C])
	// OnRetry is called when a reopen is scheduled, before the wait.
	OnRetry func(RetryEvent[C])
	// OnCommit is called after a cursor was committed (an event's, a
	// progress-only event's, or the one a resync returned), and saved when
	// the checkpoint options say so (OnSave follows).
	OnCommit func(CommitEvent[C])
	// OnSave is called after the Store was saved, or failed to save.
	OnSave func(SaveEvent[C])
	// OnResync is called after a resync hook replaced the cursor.
	OnResync func(ResyncEvent[C])
	// OnHandlerError is called after each failed handler call, with what
	// follows (retry, park, or the end of Run).
	OnHandlerError func(HandlerEvent[C])
	// OnStop is called once when Run or All returns (not when it panics),
	// after the final save, with what it returns. A connection still open
	// then ended with it: OnDisconnect is not called for it.
	OnStop func(StopEvent[C])
}

// ConnectEvent describes a successful Open.
type ConnectEvent[C any] struct {
	// After is the cursor the connection was opened after.
	After C
	// Attempt counts consecutive failures before this open (0: none).
	Attempt int
}

// DisconnectEvent describes the end of a connection or a failed Open.
type DisconnectEvent[C any] struct {
	// Err is what ended it: io.EOF for a clean end.
	Err error
	// Decision is the classifier's verdict; for a clean end its Action is
	// [errclass.Retry].
	Decision errclass.Decision
	// Clean reports an end that is no failure: io.EOF from Recv, or a
	// connection the idle watchdog closed while the handler held an event
	// (Err then matches [ErrIdleTimeout]).
	Clean bool
	// Opened reports whether the connection had been opened (false: Open
	// or the initial Store.Load failed).
	Opened bool
	// Events is how many cursors the connection committed.
	Events int
	// Cursor is the committed cursor.
	Cursor C
}

// The values of [RetryEvent.Reason]: which term of the delay formula set
// the wait.
const (
	delayNone       = "none"        // no wait
	delayBackoff    = "backoff"     // the backoff policy's step
	delayServer     = "server"      // the delay the server asked for (errclass.Decision.After)
	delayMinRestart = "min-restart" // the minimum restart delay (WithMinRestartDelay)
	delayPoll       = "poll"        // after a connection that delivered nothing: the poll interval, or the guard against a server that closes at once
)

// RetryEvent describes a scheduled reopen.
type RetryEvent[C any] struct {
	// Err is the failure being retried (io.EOF for a clean end).
	Err error
	// Decision is the classifier's verdict.
	Decision errclass.Decision
	// Delay is how long the Resumer waits before reopening.
	Delay time.Duration
	// Reason says which term of the delay rule set Delay
	// (docs/how-it-decides.md): "none" (no wait), "backoff" (the backoff
	// policy's step), "server" (the delay the server asked for,
	// errclass.Decision.After), "min-restart" ([WithMinRestartDelay]) or
	// "poll" (after a connection that delivered nothing: the poll interval
	// of [WithPollInterval], or the guard against a server that accepts and
	// closes at once).
	Reason string
	// Attempt counts consecutive failures, this one included: 0 after a
	// clean end, which is never a failure and ends a streak of them.
	Attempt int
	// After is the cursor the next Open asks for.
	After C
}

// CommitEvent describes a committed cursor.
type CommitEvent[C any] struct {
	// Cursor is the committed cursor.
	Cursor C
	// Progress reports a progress-only event (not delivered to the handler).
	Progress bool
	// Resync reports the cursor a resync returned (OnResync follows); it
	// may repeat the committed cursor.
	Resync bool
	// Parked reports an event handed to the dead letter ([WithDeadLetter]).
	Parked bool
	// InFlight is how many events are read but not committed after this
	// commit (more than zero only under [WithConcurrency]).
	InFlight int
	// Handled and Folded, under [Resumer.RunBatch], count the batch's
	// events handed to the handler and the progress-only events folded
	// into its commit; both are 0 for a commit of one event.
	Handled, Folded int
}

// SaveEvent describes a Store.Save.
type SaveEvent[C any] struct {
	// Cursor is the cursor saved.
	Cursor C
	// Err is Save's error, nil on success.
	Err error
	// Final reports the save made as Run or All ended.
	Final bool
}

// ResyncEvent describes a completed resync.
type ResyncEvent[C any] struct {
	// Cause is the failure that triggered the resync.
	Cause error
	// From is the cursor that expired; To the one the resync returned.
	From, To C
	// Replayed is how many events the resync delivered.
	Replayed int
}

// StopEvent describes the end of a Run or All loop.
type StopEvent[C any] struct {
	// Err is what Run returns: nil at the end of the stream or after
	// ErrStop, ctx's error when cancelled, the failure that ended it.
	Err error
	// Cursor is the committed cursor.
	Cursor C
}

// callHook runs call, which calls one hook, holding the hook turn: hooks
// never run two at once, whichever goroutine calls them.
func (r *committer[C]) callHook(call func()) {
	r.hookTurn <- struct{}{}
	defer func() { <-r.hookTurn }()
	call()
}

// joinHooks returns one set of hooks that calls every set of hs in order.
func joinHooks[C any](hs []Hooks[C]) Hooks[C] {
	var j Hooks[C]
	for _, h := range hs {
		j.OnConnect = join(j.OnConnect, h.OnConnect)
		j.OnDisconnect = join(j.OnDisconnect, h.OnDisconnect)
		j.OnRetry = join(j.OnRetry, h.OnRetry)
		j.OnCommit = join(j.OnCommit, h.OnCommit)
		j.OnSave = join(j.OnSave, h.OnSave)
		j.OnHandlerError = join(j.OnHandlerError, h.OnHandlerError)
		j.OnResync = join(j.OnResync, h.OnResync)
		j.OnStop = join(j.OnStop, h.OnStop)
	}
	return j
}

// join returns a function that calls a then b; either may be nil.
func join[E any](a, b func(E)) func(E) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(e E) {
		a(e)
		b(e)
	}
}
