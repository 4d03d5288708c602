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
// Rules of use (each stated in full once, in docs/how-it-decides.md in the
// repository):
//   - Delivery is at-least-once and in order: a cursor is committed only after
//     the handler returned nil; nothing is ever skipped. A handler that
//     returns [ErrStop] commits its event and ends Run cleanly.
//   - io.EOF from [Conn.Recv] is a clean end of one connection, never a
//     failure; [ErrEndOfStream] ends the stream and Run returns nil.
//   - Every other error is a failure, whatever returned it, and the
//     classifier decides ([WithClassifier]; by default everything not marked
//     is retried, see package errclass).
//   - Every reopen obeys the delay rule (docs/how-it-decides.md): no policy
//     and no server can make the loop spin.
//   - An expired cursor calls the resync hook ([WithResync]), which streams
//     the current state to the handler.
//   - Cancelling the context makes Run return promptly with ctx's error, even
//     when the Conn ignores ctx; shutdown is never counted as a failure. No
//     goroutine started by the Resumer outlives Run or the All loop. A panic
//     reaches Run's caller (a handler goroutine's is raised again there).
//   - Hooks never run two at once, whichever goroutine calls them.
//   - Every event goes through one step (its cursor and key read once, the
//     handler tried, retried, parked or stopped by one decision, its cursor
//     committed), whether it came from a connection or a resync's replay.
//   - The per-event path allocates nothing, reads no clock (except under
//     [WithCheckpointInterval]), and takes one uncontended lock.
//   - [WithConcurrency] runs the handler on n goroutines with per-key order
//     ([WithOrderKey]); [WithHandlerRetry] and [WithDeadLetter] retry a
//     failed event in place and park what never succeeds (docs/concurrency.md,
//     docs/failures.md).
//
// [Resumer.RunBatch] hands the handler many events at once and commits once
// per batch ([WithBatch], [WithBatchEnd]; docs/batches.md).
//
// [Pages] turns a polled, paginated API into a Source. Runnable programs:
// examples/quickstart in the repository (a flaky in-process source),
// examples/poll, examples/sse, examples/classifier, and the adapters in
// adapters/.
package stream
