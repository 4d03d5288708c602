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
// Replicas of a relay may run on one slot and one Store: the server lets
// one connection stream a slot, and [Source.Open] waits while another
// holds it, then loads the Store (a postgres.Store's Load fences the
// previous holder): a hot standby, with no other coordinator.
//
// See docs/postgres.md in the repository for how it works and its limits.
package cdc
