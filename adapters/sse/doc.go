// Package sse is a resumable Server-Sent Events client: a [stream.Source]
// over HTTP whose cursor is the last event ID, for a [stream.Resumer].
//
//	src := &sse.Source{URL: "https://example.com/events"}
//	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""))
//	...
//	err = r.Run(ctx, func(ctx context.Context, ev sse.Event) error { ... })
//
// Each Open is a GET that sends the committed cursor as Last-Event-ID; the
// Resumer reconnects after every end of a connection, waits as the server
// and the backoff policy say, and hands every event to the handler at least
// once and in order. The package uses the standard library only; no
// goroutine of its own outlives the call that started it.
//
// # Parsing
//
// The body is read exactly as the WHATWG HTML standard's "Interpreting an
// event stream" says, UTF-8 decoding included; a connection's last event ID
// starts as the Last-Event-ID it was opened with, as in browsers. docs/sse.md
// in the repository has the rule for every input.
//
// # Responses
//
//   - 200 with Content-Type text/event-stream: the connection is open.
//   - 204 No Content: [stream.ErrEndOfStream], the stream is over for good.
//   - 301, 302, 307, 308: followed by the http.Client, Last-Event-ID kept;
//     a redirect the Client refuses (net/http stops after 10) is permanent.
//   - Any other status: as [errclass.FromHTTP] marks it (408, 425, 429 and
//     5xx retried, no sooner than Retry-After; 410 expired; the rest
//     permanent), with the Content-Type and the start of the body in the
//     message; errors.As finds the [*errclass.StatusError].
//   - 200 with another Content-Type, and other 2xx: a permanent
//     [*errclass.StatusError].
//   - A request that fails before a response (refused, reset, DNS): retried.
//
// # Ends of a connection
//
// A connection that the server closes between events ends with io.EOF, a
// clean end. One cut inside an event, or broken by the network, ends with
// an error and is retried; the partial event is dropped. One whose line or
// event exceeds [Source.MaxEventSize] fails with an error marked permanent
// ("sse: event too large: …"), rather than buffering without bound.
//
// # Reconnection time
//
// A retry: field sets the reconnection time for every later reconnect,
// until another retry: changes it (retry: 0 clears it), as in browsers:
// every error from Open and Recv, and every clean end, carries it as an
// [errclass.RetryAfter] marker (with Retry-After, whichever is longer). A
// value too long for a time.Duration saturates at the longest one; bound
// what a server may ask with [stream.WithMaxServerDelay].
//
// # Heartbeats and half-open connections
//
// Comment lines are how SSE servers keep a quiet connection alive. The
// Conn reports them as a heartbeat [Event] (once before each wait for more
// input) and [EventID] returns [cursor.ProgressOnly] for it, so under
// [stream.WithIdleTimeout] a quiet stream whose server sends heartbeats
// lives on, while a connection on which nothing arrives at all for the
// timeout (a server or network gone without closing it) is closed and
// reopened. Choose a timeout above the server's heartbeat interval and
// above the time the largest event takes to arrive.
//
// # Event IDs that cannot be sent back
//
// An id may hold control characters (the standard forbids only NULL, CR and
// LF) that no HTTP header can carry. [EventID] refuses such an ID before
// the event is handled, so the stream stops with
// the last good cursor committed and a clear error, instead of committing a
// cursor from which every reconnect would fail.
//
// # Rules of use
//
//   - One Source serves one stream at a time: it keeps the server's
//     reconnection time. Do not change its fields once in use.
//   - Use [EventID] as the extractor, or call it from yours.
//   - Do not set a Timeout on the Client; bound a quiet or stuck connection
//     with [stream.WithIdleTimeout] and the connection attempt with the
//     transport's timeouts (http.Transport.ResponseHeaderTimeout).
//   - A server that replays the last event it was told about (Last-Event-ID
//     "inclusive") delivers it twice; see docs/sse.md in the repository for
//     how to skip it.
//
// The runnable program examples/sse in the repository runs a Source
// against a server that misbehaves on purpose.
package sse
