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
//     returning its cursor together with [ProgressOnly]; [WithProgress]
//     builds such an extractor from a predicate.
//   - A Store is what survives: the cursor in it is never ahead of what the
//     handler finished. [Memory] keeps it in memory; implement Store over a
//     file, a database or etcd to survive restarts.
//
// # Keeping the cursor in a file
//
// [NewFile] returns a [File] store: one file per stream, holding the cursor
// as text an operator can read and edit, through a [Codec]: [Int64] and
// [String] write the value on one line, [JSON] one JSON value; each refuses
// to encode a cursor that would not read back equal, so a Save never stores
// another cursor than the one it was given. Load returns the initial cursor
// only when the file does not exist; a file that cannot be read or decoded,
// or a symbolic link whose target does not exist (a volume that failed to
// mount), makes Load fail with an error naming the file (matching [ErrCorrupt] when
// the contents are bad) instead of starting over, and its Permanent method
// tells a classifier not to retry.
//
// Save is atomic and durable: it writes a temporary file in the same
// directory, syncs it, renames it over the file and syncs the directory, so
// a crash or power loss at any instant leaves the previous cursor or the
// new one, never a torn or empty file. Through a symbolic link it replaces
// the link's target the same way, and keeps the link. A Save that fails
// leaves the previous cursor. A File is safe for concurrent use, and several
// stores (or processes) sharing a path never corrupt the file, the last
// rename winning; but a path belongs to one stream, and a stream to one
// process.
//
// # Sharing cursors between processes
//
// A File serves one process on one machine. When streams must survive the
// loss of a machine, or run spread over many processes, implement [Store]
// over a shared database or etcd, and keep these rules:
//   - One owner per stream. Only the process that holds the stream's lease
//     runs it: a Kubernetes Lease (client-go leaderelection), an etcd
//     election (concurrency.Election), a database row lease with an expiry
//     or an advisory lock. The lease decides who runs; the Store only keeps
//     where the stream is.
//   - Key the cursor by a stable stream id: one row or one key per stream.
//     Load reads it, and returns the initial cursor when it is absent.
//   - Make Save one compare-and-set fenced by ownership, so that a process
//     that lost its lease cannot overwrite its successor's progress: in etcd,
//     a Txn that puts the key only if the election key still has the owner's
//     revision; in SQL, UPDATE cursors SET value = $1 WHERE stream = $2 AND
//     owner = $3 AND epoch = $4, failing when no row matched. Report a lost
//     lease as a permanent error (errclass.Permanent) so that the stream
//     stops instead of retrying.
//   - A Save must be all or nothing (a single put or row update is), and a
//     failed Save must leave the previous cursor; the stream counts on it.
//
// examples/checkpoint in the repository is a consumer that keeps its cursor
// in a File and continues where it stopped after a restart.
package cursor
