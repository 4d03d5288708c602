// Package outbox reads an outbox table of PostgreSQL as a gap-free
// stream.Source, with nothing but SELECT: the rows writers insert in the
// transactions of their changes, in the order of those transactions, none
// ever skipped, not even a row committed after a row with a higher id.
//
// The adapter has the shape of every adapter of resumable: [NewSource]
// validates every argument at once, [Extract] is the extractor, [Compare]
// the cursor order, and [NewResumer] wires a [Source], a cursor Store and
// the defaults an outbox needs (Extract, Compare, a save at most every
// 100ms).
//
// Rules of use:
//   - The table has the columns id (bigserial) and xid (xid8 NOT NULL
//     DEFAULT pg_current_xact_id()), an index on (xid, id), and the
//     columns of your rows; [WithCreate] creates it, and a table without
//     xid is refused with the migration that adds it.
//   - A transaction still running anywhere in the cluster holds back the
//     rows committed after it began: that is what keeps rows from being
//     skipped. [Source.Hold] reports it.
//   - One relay per cursor. Delivery is at least once; with
//     postgres.Transactional over a postgres.Store, effects written to the
//     same database happen exactly once.
//   - [Source.Deleting] deletes the rows up to the saved cursor, never
//     beyond; without it nothing is deleted.
//   - A cursor from another server or history is refused with an error
//     matching stream.ErrSourceChanged.
//
// The names postgres.NewOutbox, postgres.OutboxCursor and the other outbox
// names of package postgres are deprecated aliases of this package's. See
// docs/outbox.md in the repository for how it works and its limits.
package outbox
