package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// This file is the reusable part of the example: a WHATWG-conformant
// server-sent events parser and a stream.Source over an HTTP request. It
// depends on nothing but the standard library and the core packages.

// MaxEventSize bounds one line and one event's data, so that a server that
// never sends a newline cannot make the client buffer without limit.
const MaxEventSize = 1 << 20

// ErrTooLarge is returned by [Parser.Next] for a line or an event's data
// longer than [MaxEventSize]. Such a stream is broken; reconnecting gets the
// same event again, so [Source] marks it permanent.
var ErrTooLarge = errors.New("sse: line or event larger than MaxEventSize; the server sends a malformed stream")

// Event is one event dispatched by the WHATWG "event stream interpretation".
type Event struct {
	// ID is the last event ID after this event: the value of the last id:
	// field seen on the stream, this event's or an earlier one's. It is what
	// a reconnecting client sends as Last-Event-ID, hence the cursor.
	ID string
	// Type is the event: field, "message" when the event had none.
	Type string
	// Data is the event's data: fields joined with "\n".
	Data string
}

// Parser reads events from an event stream, following the WHATWG HTML
// standard's "event stream interpretation": lines end in CRLF, LF or CR; a
// leading UTF-8 BOM is skipped; lines starting with ':' are comments; a
// blank line dispatches the event, unless its data is empty; id: values
// containing NUL are ignored; retry: values that are not all ASCII digits
// are ignored. Bytes are passed through as they are (no UTF-8 repair).
//
// An id: in a block without data changes the last event ID but dispatches
// nothing, so a cursor taken from events moves only with the next event;
// resuming from the previous one is safe (nothing with data was skipped).
//
// A Parser has no reconnect logic and starts no goroutine. It is not safe for
// concurrent use, and Next must not be called again after it returned an
// error.
type Parser struct {
	r        *bufio.Reader
	line     []byte
	data     []byte
	typ      string
	lastID   string
	retry    time.Duration
	hasRetry bool
	pending  bool // a field line of an undispatched event was read
	afterCR  bool // the last line ended in CR: a following LF belongs to it
	started  bool // the BOM check was made
}

// NewParser returns a Parser reading r, whose last event ID starts as
// lastEventID (the Last-Event-ID the connection was opened with).
func NewParser(r io.Reader, lastEventID string) *Parser {
	return &Parser{r: bufio.NewReader(r), lastID: lastEventID}
}

// Retry returns the reconnection time the stream last set with a retry:
// field, and whether it set one.
func (p *Parser) Retry() (time.Duration, bool) { return p.retry, p.hasRetry }

// Next returns the next dispatched event. At the end of the input it returns
// io.EOF when the input ended between events, and io.ErrUnexpectedEOF when it
// ended inside one (the incomplete event is discarded, as the standard says).
// Any other error is the reader's, or [ErrTooLarge].
func (p *Parser) Next() (Event, error) {
	if !p.started {
		p.started = true
		if b, _ := p.r.Peek(3); bytes.Equal(b, []byte("\xEF\xBB\xBF")) {
			_, _ = p.r.Discard(3)
		}
	}
	for {
		line, err := p.readLine()
		if err != nil {
			if err == io.EOF && (p.pending || len(p.line) > 0) {
				err = io.ErrUnexpectedEOF
			}
			p.data, p.typ, p.pending = p.data[:0], "", false
			return Event{}, err
		}
		if len(line) == 0 {
			p.pending = false
			if len(p.data) == 0 { // nothing to dispatch: an id- or retry-only block
				p.typ = ""
				continue
			}
			ev := Event{ID: p.lastID, Type: p.typ, Data: string(p.data[:len(p.data)-1])}
			if ev.Type == "" {
				ev.Type = "message"
			}
			p.data, p.typ = p.data[:0], ""
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: heartbeats are sent this way
		}
		p.pending = true
		name, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			p.typ = string(value)
		case "data":
			if len(p.data)+len(value) >= MaxEventSize {
				return Event{}, ErrTooLarge
			}
			p.data = append(append(p.data, value...), '\n')
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.lastID = string(value)
			}
		case "retry":
			if ms, ok := parseDigits(value); ok {
				p.retry, p.hasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
}

// readLine returns the next line without its end of line. The slice is valid
// until the next call. A line cut by the end of input is left in p.line and
// reported with the reader's error.
func (p *Parser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		b, err := p.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if p.afterCR {
			p.afterCR = false
			if b == '\n' {
				continue // the LF of a CRLF
			}
		}
		switch b {
		case '\r':
			p.afterCR = true
			return p.line, nil
		case '\n':
			return p.line, nil
		}
		if len(p.line) >= MaxEventSize {
			return nil, ErrTooLarge
		}
		p.line = append(p.line, b)
	}
}

// parseDigits parses a non-empty run of ASCII digits that fits an int64
// once turned into milliseconds.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// StatusError is the error [Source.Open] returns for an HTTP answer other
// than 200 and 204.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// RetryAfter is the delay from the Retry-After header; zero when absent.
	RetryAfter time.Duration
}

// Error returns "sse: server answered 503 Service Unavailable".
func (e *StatusError) Error() string {
	return fmt.Sprintf("sse: server answered %d %s", e.Code, http.StatusText(e.Code))
}

// Source is a [stream.Source] of server-sent events read with HTTP GET from
// URL. Its cursor is the last event ID: Open sends it as Last-Event-ID.
//
// Open marks its errors for [errclass.Default]: 204 No Content is
// [stream.ErrEndOfStream] (the EventSource standard's "do not reconnect");
// 4xx other than 408 and 429, and a 200 that is not text/event-stream, are
// [errclass.Permanent]; everything else is retried, no sooner than the
// server's Retry-After header or the reconnection time it last set with a
// retry: field, whichever is longer.
//
// A connection ends with io.EOF when the server closed it between events,
// and with the read error otherwise (io.ErrUnexpectedEOF when the stream was
// cut inside an event, whose partial data is dropped). Once the server has
// set a reconnection time, every such end error carries it as
// [errclass.RetryAfter], so it is a floor for the next wait; a clean end is
// then errclass.RetryAfter(io.EOF, retry), which the Resumer still treats as
// a clean end (no failure counted) with the server's delay as a floor.
// Recv returns ctx's error as soon as ctx ends; Close unblocks a pending Recv.
//
// A Source remembers the server's reconnection time across connections, as
// an EventSource does, so it belongs to one stream at a time. Its fields must
// not change once it is in use.
type Source struct {
	// URL is the event stream's address.
	URL string
	// Client makes the requests; nil means http.DefaultClient. Its Timeout
	// must be zero, since it would cut long-lived streams.
	Client *http.Client
	// Header holds extra request headers, such as Authorization.
	Header http.Header

	retry atomic.Int64 // the server's reconnection time, in nanoseconds
}

var _ stream.Source[Event, string] = (*Source)(nil)

// Retry returns the reconnection time the server last set with a retry:
// field, or zero.
func (s *Source) Retry() time.Duration { return time.Duration(s.retry.Load()) }

// Open sends the request and returns the connection once the server answered
// 200 with an event stream.
func (s *Source) Open(ctx context.Context, after string) (stream.Conn[Event], error) {
	reqCtx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, s.URL, nil)
	if err != nil {
		cancel()
		return nil, errclass.Permanent(fmt.Errorf("sse: %w", err))
	}
	for k, v := range s.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-store")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.floor(err, 0)
	}
	if resp.StatusCode == http.StatusOK {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
			discard(resp, cancel)
			return nil, errclass.Permanent(fmt.Errorf("sse: Content-Type %q is not text/event-stream", mt))
		}
		return &conn{src: s, body: resp.Body, cancel: cancel, p: NewParser(resp.Body, after)}, nil
	}
	discard(resp, cancel)
	if resp.StatusCode == http.StatusNoContent {
		return nil, stream.ErrEndOfStream
	}
	serr := &StatusError{Code: resp.StatusCode}
	serr.RetryAfter, _ = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if c := serr.Code; c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests {
		return nil, errclass.Permanent(serr)
	}
	return nil, s.floor(serr, serr.RetryAfter)
}

// floor marks err with the longer of d and the server's reconnection time,
// when there is one.
func (s *Source) floor(err error, d time.Duration) error {
	d = max(d, s.Retry())
	if d <= 0 {
		return err
	}
	return errclass.RetryAfter(err, d)
}

// discard drains a little of an unwanted body so that the connection can be
// reused, then releases it.
func discard(resp *http.Response, cancel context.CancelFunc) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	cancel()
}

// parseRetryAfter reads a Retry-After header: delta-seconds or an HTTP date.
func parseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(h, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// conn is one HTTP response's worth of events.
type conn struct {
	src       *Source
	body      io.Closer
	cancel    context.CancelFunc
	p         *Parser
	closed    atomic.Bool
	closeOnce sync.Once
}

// Recv returns the next event; see [Source] for how a connection ends.
func (c *conn) Recv(ctx context.Context) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.cancel) // unblocks the read below
		defer stop()
	}
	ev, err := c.p.Next()
	if d, ok := c.p.Retry(); ok {
		c.src.retry.Store(int64(d))
	}
	switch {
	case err == nil:
		return ev, nil
	case ctx.Err() != nil:
		return Event{}, ctx.Err()
	case c.closed.Load():
		return Event{}, fmt.Errorf("sse: Recv after Close: %w", net.ErrClosed)
	case errors.Is(err, ErrTooLarge):
		return Event{}, errclass.Permanent(err)
	case err == io.EOF:
		if c.src.Retry() > 0 {
			return Event{}, c.src.floor(io.EOF, 0)
		}
		return Event{}, io.EOF
	}
	return Event{}, c.src.floor(fmt.Errorf("sse: reading the event stream: %w", err), 0)
}

// Close ends the request, which unblocks a pending Recv. It may be called
// more than once, concurrently with Recv.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.cancel()
		_ = c.body.Close()
	})
	return nil
}
