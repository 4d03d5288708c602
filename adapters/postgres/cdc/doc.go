// Package cdc reads PostgreSQL's logical replication as a stream.Source:
// change data capture.
//
// [NewSource] reads a publication through a logical replication slot
// (pgoutput) as a stream.Source of [Event]s; [NewResumer] runs it with
// [Extract], [Compare] and the Store wrapped by [Source.Confirming]. A
// [Cursor] is a position inside a commit; the server is told only the LSN
// of the cursor the Store holds; a saved cursor from another server,
// timeline or slot (or a slot missing, lost or beyond it) is
// stream.ErrSourceChanged, which [Resync] can turn into a replay. The
// Store may be a postgres.Store (package
// [github.com/resumable-go/resumable/adapters/postgres]) with
// postgres.Transactional, making each change's effects exactly once.
//
// Values are text, or Go values by type through [Tuple.Value]; each change
// carries its transaction's commit time, and [Event.TxEnd] marks the last
// event of a transaction. [WithMessages] delivers the messages an
// application emits with pg_logical_emit_message. [WithSnapshot] makes a
// first start deliver the existing rows, and [Source.Backfill] reads one
// table again while streaming: both as [Snapshot] events a consumer applies
// as upserts, consistent with the changes and resumable after a crash.
//
// Replicas of a relay may run on one slot and one Store: the server lets
// one connection stream a slot, and [Source.Open] waits while another
// holds it, then loads the Store (a postgres.Store's Load fences the
// previous holder): a hot standby, with no other coordinator.
//
// On PostgreSQL 17, [WithFailover] makes the slot a failover slot that a
// promoted standby keeps: with a DSN naming every server and
// target_session_attrs=read-write, the stream follows a promotion from its
// cursor, and a new timeline is accepted only when it branched after the
// cursor. [Source.Health] reports the lag, the WAL the slot retains and
// whether a failover is safe.
//
// See docs/postgres.md in the repository for how it works and its limits.
package cdc
