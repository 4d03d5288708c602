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
package cursor
