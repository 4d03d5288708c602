package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Event is one server-sent event, or a heartbeat.
type Event struct {
	// ID is the last event ID as the standard defines it: the last id: field
	// received, in this event or an earlier one, or else the Last-Event-ID
	// the connection was opened with. It is the cursor.
	ID string
	// Type is the value of the event's event: field, or "message" when it
	// had none. It is empty for a heartbeat.
	Type string
	// Data is the event's data: fields joined with "\n". It is empty for a
	// heartbeat.
	Data string
	// Heartbeat marks a sign of life that is not an event: comment lines,
	// reported once before the Conn waits for more input, or a block that
	// moved the last event ID without data ("id: 42" and a blank line).
	// [EventID] reports it as [cursor.ProgressOnly]: the Resumer commits ID,
	// counts it as activity, and never hands it to the handler.
	Heartbeat bool
}

// defaultMaxEventSize is what a zero MaxEventSize means.
const defaultMaxEventSize = 1 << 20

// ErrEventTooLarge is matched by the error that ends a connection whose
// line or event is over MaxEventSize; it is marked Permanent, since a
// reconnect would receive the same event again: raise MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// errUnsendableID: an ID holding a control character no HTTP header can
// carry. EventID returns it; Open returns it marked Permanent, since
// net/http would refuse every reconnect from such a cursor.
var errUnsendableID = errors.New("sse: event id cannot be sent back in a Last-Event-ID header")

// EventID is the [cursor.Extractor] of a [Source]: an event's cursor is its
// ID. It returns [cursor.ProgressOnly] for a heartbeat, and an error for an
// ID holding a control character that no Last-Event-ID header can carry:
// the Resumer then stops before that event, with the last good ID committed.
func EventID(ev Event) (string, error) {
	if err := checkID(ev.ID); err != nil {
		return "", err
	}
	if ev.Heartbeat {
		return ev.ID, cursor.ProgressOnly
	}
	return ev.ID, nil
}

// checkID refuses the bytes net/http refuses in a header value.
func checkID(id string) error {
	for i := range len(id) {
		if c := id[i]; c < ' ' && c != '\t' || c == 0x7F {
			return fmt.Errorf("%w: id %q has byte %#02x at %d", errUnsendableID, id, c, i)
		}
	}
	return nil
}

// Source is a [stream.Source] of server-sent events: each Open is an HTTP
// GET of URL that sends the cursor as Last-Event-ID. It keeps the server's
// reconnection time (retry:) across connections, so it serves one stream at
// a time; its fields must not change once in use. Only URL is required.
// Make one with [NewSource], which checks every setting at once, or fill
// one in: then Open fails, marked permanent, on a bad setting, with an
// error matching [stream.ErrInvalidOption] that names the field.
type Source struct {
	// URL is the event stream's address.
	URL string
	// Client sends the requests; nil means http.DefaultClient. Its Timeout
	// must be zero, since it would cut every stream. Redirects are followed
	// as the Client's CheckRedirect allows; Last-Event-ID goes along.
	Client *http.Client
	// Header holds extra request headers, such as Authorization. Accept,
	// Cache-Control and Last-Event-ID are set by Open.
	Header http.Header
	// MaxEventSize bounds the bytes of one line, and of the field lines of
	// one event, before the connection fails (marked permanent). Zero
	// means 1 MiB; a negative value makes Open fail.
	MaxEventSize int

	retry atomic.Int64 // the reconnection time, in nanoseconds
}

var _ stream.Source[Event, string] = (*Source)(nil)

// RecvRespectsContext reports true: a Conn's Recv returns as soon as its
// ctx ends, so the Resumer needs no watcher of its own (see [stream.Source]).
func (s *Source) RecvRespectsContext() bool { return true }

// errorBodyWait bounds the wait for the start of an error response's body,
// so that a server that sends a status and then nothing cannot hold Open.
const errorBodyWait = time.Second

// Open sends the request and returns the connection once the server
// answered 200 with Content-Type text/event-stream. Its errors are marked
// for [errclass.Default] (see the package documentation).
func (s *Source) Open(ctx context.Context, after string) (stream.Conn[Event], error) {
	if err := errors.Join(s.check(), checkID(after)); err != nil {
		return nil, errclass.Permanent(err)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, s.URL, nil)
	if err != nil {
		cancel()
		return nil, errclass.Permanent(fmt.Errorf("sse: %w", err))
	}
	if s.Header != nil {
		req.Header = s.Header.Clone()
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Del("Last-Event-ID")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		cancel()
		err = fmt.Errorf("sse: %w", err)
		if resp != nil && ctx.Err() == nil {
			// The Client's CheckRedirect refused a redirect: reconnecting
			// would meet the same answer.
			return nil, errclass.Permanent(err)
		}
		return nil, s.floor(err, 0)
	}
	ctype := resp.Header.Get("Content-Type")
	if resp.StatusCode == http.StatusOK {
		if mt, _, _ := mime.ParseMediaType(ctype); mt == "text/event-stream" {
			max := s.MaxEventSize
			if max == 0 {
				max = defaultMaxEventSize
			}
			return &conn{
				p:      newParser(resp.Body, after, max, &s.retry),
				src:    s,
				body:   resp.Body,
				cancel: cancel,
				done:   ctx.Done(),
			}, nil
		}
	}
	if resp.StatusCode == http.StatusNoContent {
		_ = resp.Body.Close()
		cancel()
		return nil, stream.ErrEndOfStream // "do not reconnect"
	}
	return nil, s.refused(resp, readErrorBody(resp.Body, cancel))
}

// refused returns FromHTTP's StatusError for a response that opens no
// stream, with its Content-Type and body start, marked as FromHTTP marks it
// (any 2xx is permanent); a retry waits at least the reconnection time too.
func (s *Source) refused(resp *http.Response, body string) error {
	herr := errclass.FromHTTP(resp)
	serr := &errclass.StatusError{Code: resp.StatusCode}
	errors.As(herr, &serr)
	if serr.URL == "" && resp.Request != nil {
		serr.URL = resp.Request.URL.Redacted()
	}
	ctype := resp.Header.Get("Content-Type")
	var err error
	switch {
	case resp.StatusCode == http.StatusOK:
		err = fmt.Errorf("sse: %w with Content-Type %q, not text/event-stream", serr, ctype)
	case ctype != "":
		err = fmt.Errorf("sse: %w, Content-Type %q", serr, ctype)
	default:
		err = fmt.Errorf("sse: %w", serr)
	}
	if body != "" {
		err = fmt.Errorf("%w, body %q", err, body)
	}
	switch d := errclass.Markers().Classify(herr); d.Action {
	case errclass.Retry:
		return errclass.RetryAfter(err, max(d.After, time.Duration(s.retry.Load())))
	case errclass.Expired:
		return errclass.CursorExpired(err)
	}
	return errclass.Permanent(err)
}

func (s *Source) client() *http.Client {
	if s.Client == nil {
		return http.DefaultClient
	}
	return s.Client
}

// floor marks err with the longer of d and the server's reconnection time,
// when either is set, so that the next wait lasts at least that long.
func (s *Source) floor(err error, d time.Duration) error {
	if d = max(d, time.Duration(s.retry.Load())); d > 0 {
		return errclass.RetryAfter(err, d)
	}
	return err
}

// readErrorBody returns the start of an unwanted response's body and
// releases the response.
func readErrorBody(body io.ReadCloser, cancel context.CancelFunc) string {
	t := time.AfterFunc(errorBodyWait, cancel)
	b, _ := io.ReadAll(io.LimitReader(body, 512))
	t.Stop()
	_ = body.Close()
	cancel()
	return string(b)
}

// conn is one response's worth of events.
type conn struct {
	p      parser
	src    *Source
	body   io.Closer
	cancel context.CancelFunc // ends the request
	done   <-chan struct{}    // Done of Open's ctx, which the request already follows
	err    error              // the error that ended the connection
	closed atomic.Bool
}

// Recv returns the next event or heartbeat. A connection ends with io.EOF
// when the server closed it between events (floored at the reconnection
// time), with an error otherwise, and then returns the same error again.
func (c *conn) Recv(ctx context.Context) (Event, error) {
	if c.err != nil {
		return Event{}, c.err
	}
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	if d := ctx.Done(); d != nil && d != c.done {
		stop := context.AfterFunc(ctx, c.cancel) // another context: make it end the read too
		defer stop()
	}
	ev, err := c.p.next()
	if err == nil {
		return ev, nil
	}
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case c.closed.Load(): // closed by the Resumer (its idle watchdog): the server's retry: still holds
		err = c.src.floor(fmt.Errorf("sse: connection closed: %w", net.ErrClosed), 0)
	case errors.Is(err, ErrEventTooLarge):
		err = errclass.Permanent(err)
	default:
		err = c.src.floor(err, 0)
	}
	c.err = err
	return Event{}, err
}

// Close ends the request, which unblocks a pending Recv. It may be called
// more than once, and concurrently with Recv.
func (c *conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	_ = c.body.Close()
	return nil
}
