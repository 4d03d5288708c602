package stream

import (
	"context"
	"errors"

	"github.com/resumable-go/resumable/errclass"
)

// Conn is one connection's worth of a stream: the events a Source delivers
// between one Open and the end of that connection.
//
// Recv is called from one goroutine at a time. Close may be called more than
// once, and concurrently with a pending Recv, which it must unblock: the
// Resumer closes the Conn from another goroutine when its context ends, so
// that cancellation works even for a Recv that ignores ctx.
type Conn[T any] interface {
	// Recv returns the next event. io.EOF means this connection ended
	// cleanly (a server's watch timeout): the Resumer reopens after the
	// cursor. [ErrEndOfStream] means the stream is over for good. Any other
	// error is classified.
	Recv(ctx context.Context) (T, error)
	// Close releases the connection and unblocks a pending Recv. It may be
	// called more than once.
	Close() error
}

// Source opens connections to a stream. Open must honour ctx: the Resumer
// cannot interrupt an Open that ignores it. Open is called from one
// goroutine at a time for a given Resumer.
//
// A Source may also be a [ContextRespecter].
type Source[T, C any] interface {
	// Open returns a connection that delivers the events strictly after
	// cursor after. An error is classified exactly like an error from Recv;
	// [ErrEndOfStream] ends the stream for good.
	Open(ctx context.Context, after C) (Conn[T], error)
}

// ContextRespecter is the optional interface of a [Source] whose every
// [Conn.Recv] ends promptly when its ctx ends. RecvRespectsContext returning
// true promises that, and spares each Run the context watcher that closes the
// Conn on cancellation (about 500 bytes): it matters with thousands of idle
// streams. It is called once per Run, from Run's goroutine.
type ContextRespecter interface {
	RecvRespectsContext() bool
}

// SourceFunc adapts a function to a [Source].
type SourceFunc[T, C any] func(ctx context.Context, after C) (Conn[T], error)

// Open calls f(ctx, after).
func (f SourceFunc[T, C]) Open(ctx context.Context, after C) (Conn[T], error) {
	return f(ctx, after)
}

// ErrEndOfStream is returned by [Source.Open] or [Conn.Recv] when the stream
// is over for good (an SSE server's 204 No Content, a finished log). Run then
// returns nil, and All ends its loop without an error.
var ErrEndOfStream = errors.New("stream: end of stream")

// ErrStop is what a handler returns (or wraps) to say "this event is done;
// stop": the event is committed, the final save runs, and Run returns nil.
// Like [io/fs.SkipDir] it is a signal, not a failure. Inside a resync's
// replay, which has no cursor per event, it stops Run without committing the
// resync's cursor (the next Run resyncs again). An All loop has no handler
// error: breaking out of it leaves the event uncommitted; use Run with ErrStop
// to commit the last event and stop.
var ErrStop = errors.New("stream: stop after this event")

// ErrIdleTimeout is matched by the failure a Resumer records when the idle
// watchdog ([WithIdleTimeout]) closed a connection that delivered no event
// for the timeout. It is classified like any failure: [errclass.Default]
// retries it.
var ErrIdleTimeout = errors.New("stream: connection idle for longer than the idle timeout")

// ErrRetriesExhausted is matched by the error Run returns when the backoff
// policy gave up; the same error also matches the last failure.
var ErrRetriesExhausted = errors.New("stream: retries exhausted")

// errAlreadyRunning is returned by Run (and yielded by All) when the Resumer
// is already running: a Resumer runs one loop at a time.
var errAlreadyRunning = errors.New("stream: Run or All already in progress; run it again after the first call returned, or make another Resumer")

// The errors below are the Resumer's own findings; Run's error text says
// what went wrong, and matches the underlying error where there is one.
var (
	// errNilConn is the failure recorded when Source.Open returned a nil
	// Conn and a nil error. It is classified like any failure:
	// errclass.Default retries it, as client-go's RetryWatcher does for a
	// nil watcher.
	errNilConn = errors.New("stream: Source.Open returned a nil Conn and no error")
	// errExtract: the extractor failed; Run's error also matches the
	// extractor's error.
	errExtract = errors.New("stream: extracting the cursor failed")
)

// ErrCursorRegressed is matched by the error Run returns when, under
// [WithCursorOrder], an event's cursor is before the committed one: the
// server went backwards (a restored backup, a failover to a lagging
// replica), and going on would deliver events out of order. Alert on it.
var ErrCursorRegressed = errors.New("stream: event cursor is before the committed cursor")

// ErrSourceChanged is matched by the error a Source returns (from Open or
// Recv, wrapped with what changed, was → now) when it can tell that the
// saved cursor belongs to another history: the backend was replaced,
// restored or recreated. It carries the [errclass.Expired] marker, so the
// default classifier resyncs when a [WithResync] hook is set and otherwise
// stops Run with the Source's message; never a retry, never a silent start
// from "now".
var ErrSourceChanged = errclass.CursorExpired(errors.New("stream: the source is not the history the cursor came from"))

// ErrInvalidOption is matched by the error New returns for a bad argument or
// option, and by the error Run returns for a nil context or handler.
var ErrInvalidOption = errors.New("stream: invalid argument")
