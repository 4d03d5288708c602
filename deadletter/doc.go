// Package deadletter is a durable dead-letter sink for a stream: a file
// that keeps, one JSON line each, the events a [stream.Resumer] set aside
// because its handler could never succeed with them, and a reader that
// replays them once the cause is fixed.
//
//	dl, err := deadletter.Open("parked.jsonl", extract)
//	r, err := stream.New(src, extract, store,
//		stream.WithHandlerRetry(5, backoff.Default()),
//		stream.WithDeadLetter(dl.Park))
//	...
//	for rec, err := range deadletter.Read[Event, Cursor]("parked.jsonl") { ... }
//
// Rules of use:
//   - [File.Park] returns only once its line is on stable storage (written
//     with O_APPEND, then fsynced), so the stream commits a parked event only
//     after the record of it is durable: a parked event is never lost.
//   - A crash between a successful Park and the stream's commit parks the
//     event once more on the next run: a record may appear twice, never more
//     for one crash. Each [Record] carries the event's cursor, taken with the
//     extractor, so a consumer deduplicates by cursor.
//   - A line is {"time","cursor","tries","error","event"}: the UTC time of
//     parking, the cursor and the event as JSON, how many times the handler
//     was called ([stream.HandlerError].Tries, 1 without one) and the text of
//     the handler's last error. Event and cursor types must encode to JSON
//     and decode back: [Open] checks their zero values, Park every value.
//   - A crash during Park can leave a last line without its newline: it
//     belongs to a Park that never returned, so its event was not committed.
//     [Read] skips it, and [Open] cuts it off before appending.
//   - One path belongs to one open [File] at a time. Read may run while
//     Parks append: it sees the lines complete when it reaches them.
//   - To replay, read the file, hand each record's event to the fixed
//     handler, then move the file aside (or point the next run at a new
//     one); the package never rewrites a complete line.
//
// docs/failures.md in the repository states what every handler outcome does,
// and examples/deadletter parks poison events and replays them.
package deadletter
