// Package postgres keeps a stream's cursor in PostgreSQL, in the same
// transaction as the handler's writes.
//
// A [Store] keeps one stream's cursor in one row of a table
// ([DefaultTable], or [WithTable]). [Transactional] turns a function of a
// pgx.Tx into a handler for stream.Resumer.Run that writes the event's
// cursor to that row in the transaction of the event's effects: either both
// commit or neither does, so after any crash the stream resumes just after
// the last event whose effects exist. Effects happen exactly once.
//
// Rules of use:
//   - Give the Resumer the same Store, and Transactional the same
//     Extractor, as the Resumer: the Resumer's own Save then finds the
//     cursor stored and makes no round trip.
//   - fn writes through the transaction it is given, and only there: an
//     effect outside the database (an HTTP call, a message) is still
//     at-least-once.
//   - One writer per stream name: [Store.Load] takes the stream over. It
//     bumps the row's version under the row's lock, so a predecessor's
//     transaction still in flight (a killed process's COMMIT on its way)
//     lands or fails before the Load returns, and never after: a restart
//     never stops on it. Every write is a compare-and-set on the version,
//     so a process whose stream was taken over rolls back and its Run
//     stops with an error matching [ErrCursorChanged]. Coordinate owners
//     (adapters/etcd, a deploy that stops the old process first, or, for
//     logical replication, the slot: see package cdc) to avoid the stop.
//   - Handlers run one at a time: a Store used by Transactional reports
//     [Store.CommitsInHandler], and a stream refuses to run such a handler
//     concurrently (stream.WithConcurrency above 1).
//   - Serialization failures, deadlocks and lost connections are retried by
//     Transactional itself ([WithTxRetry]); every other error of fn ends
//     Run like any handler error.
//
// [TransactionalBatch] is Transactional for stream.Resumer.RunBatch: a
// batch's effects and its last cursor in one transaction.
//
// Package [github.com/resumable-go/resumable/adapters/postgres/outbox]
// reads an outbox table as a gap-free stream.Source with nothing but
// SELECT: rows by transaction visibility, never by id alone, so a row
// committed out of id order is never skipped (docs/outbox.md). The outbox
// names of this package ([NewOutbox], [Outbox], [OutboxCursor], ...) are
// deprecated aliases of that package's.
//
// Logical replication (reading a publication as a stream.Source) is
// package [github.com/resumable-go/resumable/adapters/postgres/cdc].
//
// See docs/postgres.md in the repository for how it works and its limits.
package postgres
