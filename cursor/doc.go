// Package cursor holds the parts of a resumable stream that deal with
// cursors: the [Extractor] that reads the cursor out of an event, the
// [Store] that keeps the last cursor handled, and helpers around them.
//
// A cursor is whatever a source needs to resume just after an event: a
// Kubernetes resourceVersion, an SSE Last-Event-ID, an etcd revision, a log
// offset, a change-stream resume token. The package knows nothing about how
// events arrive; see package stream for the loop that uses these parts.
//
// Rules of use:
//   - An Extractor is called once per event on the goroutine that runs the
//     stream; it must not block and should not allocate.
//   - An Extractor signals a progress-only event (a Kubernetes bookmark, an
//     etcd progress notification, an SSE heartbeat that carries an id) by
//     returning its cursor together with [ProgressOnly].
//   - A Store is what survives: the cursor in it is never ahead of what the
//     handler finished, and a failed Save leaves the previous cursor. [Memory]
//     keeps it in memory.
//
// # Keeping the cursor in a file
//
// [NewFile] returns a [File] store: one file per stream, holding the cursor
// as text an operator can read and edit, through a [Codec] ([Int64],
// [String], [JSON]). Save is atomic and durable. Load returns the initial
// cursor only when the file does not exist; otherwise it fails with an
// error naming the file (matching [ErrCorrupt] for bad contents) instead of
// starting over. docs/cursor-files.md in the repository is the reference.
//
// # Sharing cursors between processes
//
// A File serves one process. For streams spread over processes, implement
// [Store] over a shared database, with one owner per stream and a Save
// fenced by ownership (adapters/etcd ships one); docs/restarts.md in the
// repository states the rules.
//
// examples/checkpoint in the repository is a consumer that keeps its cursor
// in a File and continues where it stopped after a restart.
package cursor
