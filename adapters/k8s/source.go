package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// WatchSource returns a [stream.Source] that opens watches through w, as
// client-go's RetryWatcher does: ResourceVersion after, AllowWatchBookmarks.
// Its extractor is [ResourceVersion]. A closed result channel is io.EOF; a
// watch.Error event is an error that unwraps to apierrors.FromObject of its
// object (apierrors.IsGone works on it). Close stops the watch and unblocks
// Recv; it may be called more than once, from any goroutine. A nil watch
// opens a nil Conn, which a Resumer retries.
//
// Its errors are marked where they arise, so [errclass.Default] needs no
// classifier of this package: a failure to open with Forbidden or
// Unauthorized is [errclass.Permanent], with 410 Gone or Expired
// [errclass.CursorExpired]; a watch.Error event of code 410 is
// CursorExpired, another Status waits its Details.RetryAfterSeconds
// ([errclass.RetryAfter]); the rest (EOF, timeouts, connection errors) is
// retried. [StatusClassifier] asked first keeps client-go's rules instead.
func WatchSource(w cache.WatcherWithContext) stream.Source[watch.Event, string] {
	return &source{w: w}
}

type source struct {
	w cache.WatcherWithContext
	// quiet: nothing closes a Conn while Recv waits (no idle timeout), so
	// a Conn needs no closed channel; idle watchers keep less memory.
	quiet bool
	// goneRetries leaves a 410 at open unmarked, retried: client-go's rule,
	// for a RetryWatcher without resync.
	goneRetries bool
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
		return nil, markOpen(err, s.goneRetries)
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
		return watch.Event{}, newEventError(ev).marked()
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

// marked returns e marked as the package documentation of [WatchSource]
// says: code 410 expired, another Status retried after its
// RetryAfterSeconds, an object that is no Status unmarked (retried).
func (e *eventError) marked() error {
	st, ok := e.status()
	switch {
	case !ok:
		return e
	case st.Code == http.StatusGone:
		return errclass.CursorExpired(e)
	case st.Details != nil && st.Details.RetryAfterSeconds > 0:
		return errclass.RetryAfter(e, time.Duration(st.Details.RetryAfterSeconds)*time.Second)
	}
	return e
}

// markOpen marks a failure to open a watch, or of a resync, unless marked
// already: Forbidden and Unauthorized permanent, 410 Gone and Expired
// expired (left unmarked, retried, when goneRetries), the rest unmarked
// (retried). EOF and timeouts are checked first, as client-go does.
func markOpen(err error, goneRetries bool) error {
	if errclass.Markers().Classify(err).Action != errclass.Unknown {
		return err
	}
	switch {
	case utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err):
		return err
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return errclass.Permanent(err)
	case (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && !goneRetries:
		return errclass.CursorExpired(err)
	}
	return err
}

// status returns the event's Status, and whether the object was one.
func (e *eventError) status() (*metav1.Status, bool) {
	se, ok := e.Err.(*apierrors.StatusError)
	if !ok {
		return nil, false
	}
	return &se.ErrStatus, true
}
