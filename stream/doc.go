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
//	                                                          └─► Expired: resync hook, wait, reopen — or Run returns it
//
// Rules of use:
//   - Delivery is at-least-once and in order: a cursor is committed only after
//     the handler returned nil, so after a crash or a handler error the event
//     is delivered again; nothing is ever skipped. A handler that returns
//     [ErrStop] commits its event and ends Run cleanly.
//   - io.EOF returned by [Conn.Recv] is the normal end of one connection (a
//     server's watch timeout, the end of a page); it is never a failure: it
//     counts no attempt and never makes the policy give up. A connection that
//     delivered events reopens at once; one that delivered nothing waits the
//     poll interval ([WithPollInterval]), or else a guard step that keeps a
//     server that accepts and closes at once from causing a hot loop.
//     [ErrEndOfStream] ends the stream for good and Run returns nil.
//   - Every other error is a failure and means the same wherever it came from
//     (Open, Recv, the Store, the open limiter, a resync): the classifier
//     decides. The default classifier retries everything that is not marked
//     (see package errclass).
//   - The delay rule, for every reopen after a failure or a resync:
//     wait max(backoff step, the server's requested delay (capped by
//     [WithMaxServerDelay]), the minimum restart delay ([WithMinRestartDelay])
//     less the time since the previous Open started). The minimum restart
//     delay is non-sliding: a connection that lived longer reopens at once.
//     The failure sequence starts over when a connection committed a cursor
//     or ended cleanly; a server's delay is a floor for the next wait only.
//   - An expired cursor calls the resync hook ([WithResync]), which streams
//     the current state to the handler and returns the cursor to go on from;
//     nothing holds the whole replay.
//   - [WithIdleTimeout] closes a connection that delivered nothing for a
//     while (progress-only events count), so a half-open connection cannot
//     stall a stream; [WithOpenLimiter] makes every Open wait on a budget
//     shared by many Resumers.
//   - Cancelling the context makes Run return promptly with ctx's error, even
//     when the Conn ignores ctx: the Resumer closes it. No goroutine started
//     by the Resumer outlives Run or the All loop.
//   - A panic in the Source, Conn, extractor, handler or Store is not
//     recovered: it propagates to the caller of Run after the current Conn
//     was closed and the committed cursor saved. Recovering would hide a bug
//     and leave the cursor's meaning in doubt.
//   - The per-event path allocates nothing, reads no clock (except under
//     [WithCheckpointInterval]), and takes one uncontended lock (to publish
//     the cursor and counters to [Resumer.Cursor] and [Resumer.Stats]).
//   - [WithConcurrency] runs the handler on n goroutines with per-key order
//     ([WithOrderKey]) and commits only the contiguous prefix of finished
//     events; [WithHandlerRetry] and [WithDeadLetter] retry a failed event in
//     place and park what never succeeds (docs/concurrency.md,
//     docs/failures.md).
//
// [Pages] turns a polled, paginated API into a Source. Runnable programs:
// examples/quickstart in the repository (a flaky in-process source),
// examples/poll, examples/sse, examples/classifier, and the adapters in
// adapters/.
package stream
