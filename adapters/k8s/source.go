package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/stream"
)

// WatchSource returns a [stream.Source] that opens watches through w. Each
// Open asks for the events after the given resource version, with
// AllowWatchBookmarks set, as client-go's RetryWatcher does:
//
//	w.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: after, AllowWatchBookmarks: true})
//
// An error from the watch call is returned as it is. The connection's Recv
// returns the watch's events; a closed result channel is io.EOF (the normal
// end of a watch); a watch.Error event is returned as an error that unwraps
// to apierrors.FromObject of its object (apierrors.IsGone works on it), so
// that a classifier can tell a failure reported in the stream from one
// reported when the watch was opened (see [StatusClassifier]). Close stops
// the watch and makes a Recv blocked on it return, even when the watch does
// not close its channel on Stop; it may be called more than once, from any
// goroutine. A nil watch with a nil error makes Open return a nil Conn and
// no error, which a Resumer records as a failure and retries by default, as
// client-go does.
//
// Compose it with [ResourceVersion] and [StatusClassifier] to build your own
// [stream.Resumer] over a watch.
func WatchSource(w cache.WatcherWithContext) stream.Source[watch.Event, string] {
	return &source{w: w}
}

type source struct {
	w cache.WatcherWithContext
	// quiet: no other goroutine closes a Conn while its Recv waits (a
	// RetryWatcher without an idle timeout), so a Conn needs no channel of
	// its own to unblock Recv. Idle watchers then keep less memory.
	quiet bool
}

// RecvRespectsContext implements stream.ContextRespecter: a watch's Recv
// returns as soon as its ctx ends, so the Resumer needs no watcher of its
// own to close it.
func (s *source) RecvRespectsContext() bool { return true }

func (s *source) Open(ctx context.Context, after string) (stream.Conn[watch.Event], error) {
	wi, err := s.w.WatchWithContext(ctx, metav1.ListOptions{
		ResourceVersion:     after,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		if wi != nil {
			wi.Stop()
		}
		return nil, err
	}
	if wi == nil {
		return nil, nil
	}
	c := &conn{w: wi, ch: wi.ResultChan()}
	if !s.quiet {
		c.closed = make(chan struct{})
	}
	return c, nil
}

// conn is one watch. Recv is the per-event path: it allocates nothing for
// an event that is not an error.
type conn struct {
	w       watch.Interface
	ch      <-chan watch.Event
	closed  chan struct{} // closed by Close: not every watch closes ch on Stop; nil when the source is quiet
	stopped atomic.Bool
}

// errClosed is what Recv returns once Close was called (by the Resumer's
// idle watchdog, say).
var errClosed = errors.New("k8s: the watch connection was closed")

func (c *conn) Recv(ctx context.Context) (watch.Event, error) {
	var (
		ev watch.Event
		ok bool
	)
	// Try the channel alone first: a non-blocking receive is much cheaper
	// than a two-way select, and a busy watch usually has an event ready.
	select {
	case ev, ok = <-c.ch:
	default:
		select {
		case ev, ok = <-c.ch:
		case <-ctx.Done():
			return watch.Event{}, ctx.Err()
		case <-c.closed:
			return watch.Event{}, errClosed
		}
	}
	if !ok {
		return watch.Event{}, io.EOF
	}
	if ev.Type == watch.Error {
		return watch.Event{}, newEventError(ev)
	}
	return ev, nil
}

func (c *conn) Close() error {
	if c.stopped.CompareAndSwap(false, true) {
		if c.closed != nil {
			close(c.closed)
		}
		c.w.Stop()
	}
	return nil
}

// eventError is the error a [WatchSource] connection returns for a
// watch.Error event: the API server reported a failure inside an open watch.
// Event is the event as received; Err is what
// apierrors.FromObject(Event.Object) made of it: an
// [*apierrors.StatusError] when the object is a metav1.Status (so that
// apierrors.IsGone and the like work on an eventError), another error when
// it is not.
type eventError struct {
	Event watch.Event
	Err   error
}

func newEventError(ev watch.Event) *eventError {
	return &eventError{Event: ev, Err: apierrors.FromObject(ev.Object)}
}

// Error describes the event's failure.
func (e *eventError) Error() string {
	return fmt.Sprintf("k8s: the watch reported an error event: %v", e.Err)
}

// Unwrap returns Err.
func (e *eventError) Unwrap() error { return e.Err }

// status returns the event's Status, and whether the object was one.
func (e *eventError) status() (*metav1.Status, bool) {
	se, ok := e.Err.(*apierrors.StatusError)
	if !ok {
		return nil, false
	}
	return &se.ErrStatus, true
}
