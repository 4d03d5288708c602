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

// WatchSource returns a [stream.Source] that opens watches through w, as
// client-go's RetryWatcher does: ResourceVersion after, AllowWatchBookmarks.
// A watch call's error is returned as it is; a closed result channel is
// io.EOF; a watch.Error event is an error that unwraps to
// apierrors.FromObject of its object (apierrors.IsGone works on it), which
// [StatusClassifier] tells from a failure to open. Close stops the watch
// and unblocks Recv; it may be called more than once, from any goroutine.
// A nil watch opens a nil Conn, which a Resumer retries.
func WatchSource(w cache.WatcherWithContext) stream.Source[watch.Event, string] {
	return &source{w: w}
}

type source struct {
	w cache.WatcherWithContext
	// quiet: nothing closes a Conn while Recv waits (no idle timeout), so
	// a Conn needs no closed channel; idle watchers keep less memory.
	quiet bool
}

// RecvRespectsContext implements stream.ContextRespecter: Recv returns as
// soon as its ctx ends.
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

// conn is one watch. Recv, the per-event path, must not allocate.
type conn struct {
	w       watch.Interface
	ch      <-chan watch.Event
	closed  chan struct{} // closed by Close: not every watch closes ch on Stop; nil when the source is quiet
	stopped atomic.Bool
}

// errClosed is Recv's error after Close (by the idle watchdog, say).
var errClosed = errors.New("k8s: the watch connection was closed")

func (c *conn) Recv(ctx context.Context) (watch.Event, error) {
	var (
		ev watch.Event
		ok bool
	)
	// A non-blocking receive first: much cheaper than a select.
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

// eventError is Recv's error for a watch.Error event: Event as received,
// Err = apierrors.FromObject(Event.Object), a *apierrors.StatusError when
// the object is a Status.
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
