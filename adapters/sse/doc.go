// Package sse is a resumable Server-Sent Events client: a [stream.Source]
// over HTTP whose cursor is the last event ID, for a [stream.Resumer].
//
//	src, err := sse.NewSource("https://example.com/events", sse.WithHeader(h))
//	...
//	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""))
//	...
//	err = r.Run(ctx, func(ctx context.Context, ev sse.Event) error { ... })
//
// Each Open is a GET that sends the committed cursor as Last-Event-ID. The
// body is read as the WHATWG HTML standard's "Interpreting an event stream"
// says; a connection's last event ID starts as the Last-Event-ID it was
// opened with, as in browsers. The package uses the standard library only.
//
// Responses: 200 with Content-Type text/event-stream opens the connection;
// 204 No Content is [stream.ErrEndOfStream]; redirects are followed by the
// http.Client; any other status is marked as [errclass.FromHTTP] marks it
// (a 200 of another Content-Type, or another 2xx, is permanent), and
// errors.As finds the [*errclass.StatusError]. A connection the server
// closes between events ends with io.EOF, a clean end; one cut inside an
// event or broken by the network is retried; a line or event over
// [Source.MaxEventSize] fails permanently.
//
// A retry: field sets the reconnection time for every later reconnect, as
// in browsers: every error from Open and Recv, and every clean end, carries
// it as an [errclass.RetryAfter] floor. Bound it with
// [stream.WithMaxServerDelay].
//
// Comment lines (": ping") arrive as heartbeat [Event]s, which [EventID]
// reports as [cursor.ProgressOnly]: under [stream.WithIdleTimeout] a quiet
// stream with heartbeats lives on and a silent half-open connection is
// reopened. Choose a timeout above the server's heartbeat interval and the
// time the largest event takes to arrive.
//
// Rules of use:
//   - [NewSource] checks every setting at once, with an error matching
//     [stream.ErrInvalidOption] that names each bad one. A Source filled in
//     as a literal works too; its bad settings fail its Open, permanently.
//   - One Source serves one stream at a time (it keeps the server's
//     reconnection time). Do not change its fields once in use.
//   - Use [EventID] as the extractor, or call it from yours.
//   - Do not set a Timeout on the Client; bound a quiet connection with
//     [stream.WithIdleTimeout] and the connection attempt with
//     http.Transport.ResponseHeaderTimeout.
//   - A server that replays the event Last-Event-ID names delivers it twice.
//
// docs/sse.md in the repository has every response, parse rule and end of a
// connection, and how to skip replayed events; examples/sse runs a Source
// against a server that misbehaves on purpose.
package sse
