// Package stream is the loop that makes a cursor-based event stream survive
// disconnects: a [Resumer] reads events of type T from a [Source], takes each
// event's cursor C with a [cursor.Extractor], hands the event to your handler,
// commits the cursor once the handler returned nil, and when the connection
// breaks asks an [errclass.Classifier] what the failure means and a
// [backoff.Policy] how long to wait, then reopens just after the last
// committed cursor.
//
//	Store.Load ─► Source.Open(ctx, after) ─► Conn.Recv ─► extract ─► handle ─► commit (Store.Save)
//	                   │                       │
//	                   └──── error ────────────┴──► Classifier ─► Retry: wait, reopen
//	                                                          ├─► Fail: Run returns it
//	                                                          └─► Expired: resync hook, or Run returns it
//
// Rules of use:
//   - Delivery is at-least-once and in order: a cursor is committed only after
//     the handler returned nil, so after a crash or a handler error the event
//     is delivered again; nothing is ever skipped.
//   - io.EOF from [Conn.Recv] is the normal end of one connection (a server's
//     watch timeout): the Resumer reopens at once, without a backoff step if
//     the connection delivered anything or lived at least as long as the
//     step would last (an idle stream); a connection that closes at once
//     with nothing takes a step, so that such a server cannot cause a hot
//     loop. [ErrEndOfStream] ends the stream for
//     good and Run returns nil.
//   - A failure means the same whether it came from Open, Recv or the Store;
//     the classifier decides. The default classifier retries everything that
//     is not marked (see package errclass).
//   - The wait before a reopen is max(backoff step, the server's Retry-After,
//     minimum restart delay − time since the previous Open started). The
//     backoff sequence resets whenever a connection committed a cursor.
//   - Cancelling the context makes Run return promptly with ctx's error, even
//     when the Conn ignores ctx: the Resumer closes it. No goroutine started
//     by the Resumer outlives Run or the All loop.
//   - A panic in the Source, Conn, extractor, handler or Store is not
//     recovered: it propagates to the caller of Run after the current Conn
//     was closed. Recovering would hide a bug and leave the cursor's meaning
//     in doubt.
//   - The per-event path allocates nothing and takes one uncontended lock (to
//     publish the cursor to [Resumer.Cursor]).
//
// Runnable programs: examples/quickstart in the repository (a flaky
// in-process source), examples/sse, examples/classifier, and the Kubernetes
// adapter in adapters/k8s.
package stream
