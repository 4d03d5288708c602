// Package deadletter is a durable dead-letter sink for a stream: a [File]
// that appends, one JSON line each, the events a [stream.Resumer] set aside
// because its handler could never succeed with them, and [Read], which
// returns them for replay once the cause is fixed.
//
//	dl, err := deadletter.Open("parked.jsonl", extract)
//	r, err := stream.New(src, extract, store,
//		stream.WithHandlerRetry(5, backoff.Default()),
//		stream.WithDeadLetter(dl.Park))
//	...
//	for rec, err := range deadletter.Read[Event, Cursor]("parked.jsonl") { ... }
//
// Rules of use:
//   - [File.Park] returns only once its line is on stable storage, so the
//     stream commits a parked event only after its record is durable.
//   - A crash between Park and the stream's commit parks the event once more
//     on the next run: deduplicate records by [Record.Cursor].
//   - Event and cursor types must encode to JSON and decode back.
//   - One path belongs to one open [File] at a time; Read may run while it
//     appends. The package never rewrites a complete line: after replaying,
//     move the file aside.
//
// The line format, torn lines and the cost of a Park are in docs/failures.md
// in the repository; examples/deadletter parks poison events and replays them.
package deadletter
