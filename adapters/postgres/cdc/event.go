package cdc

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/resumable-go/resumable/cursor"
)

// Op says what an [Event] is.
type Op uint8

const (
	// Insert is a row inserted: New holds it.
	Insert Op = iota + 1
	// Update is a row updated: New holds the row after the update; Old
	// holds the replica identity's columns before it when they changed
	// (REPLICA IDENTITY DEFAULT or USING INDEX), or the whole old row
	// (REPLICA IDENTITY FULL), and is empty otherwise.
	Update
	// Delete is a row deleted: Old holds its replica identity's columns, or
	// the whole row with REPLICA IDENTITY FULL.
	Delete
	// Truncate is a table truncated: one event per table a TRUNCATE named
	// (and the publication publishes); New and Old are empty.
	Truncate
	// Progress says that nothing the publication publishes was committed
	// between the previous event and the position of its Cursor. It frees
	// the WAL of writes the publication does not publish: a connection
	// makes one at most once per status interval, and only when the
	// server's position lies more than 64 KiB beyond the previous event,
	// so that saving one (a Store in the same database writes WAL) never
	// makes the next. Its cursor
	// is committed and it is never handed to a handler ([Extract] reports it
	// as [cursor.ProgressOnly]).
	Progress
	// ResyncStart opens a resync's replay (see [Resync]): the stream's
	// cursor belonged to another history, changes since it may be lost,
	// and the Snapshot events up to the ResyncEnd are the published tables
	// as of the position of its Cursor.
	ResyncStart
	// Snapshot is a row of a published table, read by [WithSnapshot], by
	// [Source.Backfill] or in a resync's replay: New holds it, Relation
	// names its table. Apply it as an upsert by key.
	Snapshot
	// ResyncEnd closes a resync's replay; the stream goes on with the
	// changes committed after the position of its Cursor.
	ResyncEnd
	// Message is a logical decoding message an application emitted with
	// pg_logical_emit_message (see [WithMessages]): Prefix and Content hold
	// it. A transactional one is a change of its transaction; a
	// non-transactional one stands alone, at the position the server gave
	// it, with TxEnd set.
	Message
)

// String returns the operation's SQL name (INSERT, UPDATE, DELETE,
// TRUNCATE), or PROGRESS, RESYNC-START, SNAPSHOT, RESYNC-END, MESSAGE.
func (o Op) String() string {
	switch o {
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Truncate:
		return "TRUNCATE"
	case Progress:
		return "PROGRESS"
	case ResyncStart:
		return "RESYNC-START"
	case Snapshot:
		return "SNAPSHOT"
	case ResyncEnd:
		return "RESYNC-END"
	case Message:
		return "MESSAGE"
	}
	return "OP(" + strconv.Itoa(int(o)) + ")"
}

// Event is one change of a published table, a [Progress] position, or a
// part of a resync's replay ([ResyncStart], [Snapshot], [ResyncEnd]).
//
// Every change of a transaction carries the transaction's commit LSN and
// its index within the transaction, from 0, in the order the server sends
// them, which is the order they were made in. The tuples are the event's
// own: they may be kept beyond the handler call.
type Event struct {
	// Op says what the event is.
	Op Op
	// Relation is the changed table, as schema.name (empty for Progress).
	Relation string
	// New is the row after an Insert or an Update.
	New Tuple
	// Old is the row, or its replica identity, before an Update or a Delete
	// (see [Update] and [Delete] for when it is sent).
	Old Tuple
	// XID is the ID of the transaction that made the change.
	XID uint32
	// LSN is the transaction's commit LSN, as pgoutput's Begin message
	// gives it; a Progress event's is the position it reports.
	LSN pglogrepl.LSN
	// Index is the change's index within its transaction, from 0.
	Index int
	// CommitTime is the commit time of the change's transaction (zero for
	// events that belong to none).
	CommitTime time.Time
	// TxEnd is true on the last event of its transaction: a consumer that
	// ends a batch where TxEnd is set never splits a source transaction.
	// A non-transactional Message, and the last Snapshot row of a chunk
	// (see [WithSnapshot]), have it too.
	TxEnd bool
	// Prefix is a Message's prefix.
	Prefix string
	// Content is a Message's payload.
	Content []byte
	// Cursor is the position just after this event.
	Cursor Cursor
}

// Tuple is a row of a change, in the table's column order, with the values
// in PostgreSQL's text format. The zero Tuple has no columns.
type Tuple struct {
	rel     *relation                    // the relation's names, key and column types, shared by its events; nil: none known
	keyOnly bool                         // an old tuple of the key only: the other columns were not sent
	cols    []*pglogrepl.TupleDataColumn // the values of a change, as pgoutput sent them
	packed  []byte                       // or those of a row read by SQL, packed (see packedCol)
}

// Len returns the number of columns the server sent.
func (t Tuple) Len() int {
	if t.packed != nil {
		return packedLen(t.packed)
	}
	return len(t.cols)
}

// col returns the value of column i and its kind, as the server sent them.
func (t Tuple) col(i int) ([]byte, byte) {
	if t.packed != nil {
		return packedCol(t.packed, i)
	}
	c := t.cols[i]
	return c.Data, c.DataType
}

// names returns the relation's column names; nil when unknown.
func (t Tuple) names() []string {
	if t.rel == nil {
		return nil
	}
	return t.rel.names
}

// Column returns the name and the text value of column i (0 ≤ i < Len), and
// its kind: 't' for a value, 'n' for NULL, 'u' for a value the server did
// not send: a TOASTed value the update left unchanged, or, in an Old tuple
// of the replica identity's key (REPLICA IDENTITY DEFAULT or USING INDEX),
// a column outside the key.
func (t Tuple) Column(i int) (name string, value []byte, kind byte) {
	value, kind = t.col(i)
	if names := t.names(); i < len(names) {
		name = names[i]
	}
	if t.keyOnly && !t.Key(i) {
		return name, nil, pglogrepl.TupleDataTypeToast
	}
	return name, value, kind
}

// Key reports whether column i is part of the table's replica identity:
// its primary key under REPLICA IDENTITY DEFAULT, the index's columns
// under USING INDEX, every column under FULL. Snapshot rows (of
// WithSnapshot, Backfill and Resync) mark the key columns of the primary
// key or replica identity index; none for a table with neither.
func (t Tuple) Key(i int) bool { return t.rel != nil && i < len(t.rel.key) && t.rel.key[i] }

// Get returns the text value of the column called name; ok is false when
// the tuple has no such column, or its value is NULL or was not sent (an
// unchanged TOASTed value, or a column outside the replica identity of an
// old tuple).
func (t Tuple) Get(name string) (value []byte, ok bool) {
	for i, n := range t.names() {
		if n == name && i < t.Len() {
			if _, v, kind := t.Column(i); kind == pglogrepl.TupleDataTypeText || kind == pglogrepl.TupleDataTypeBinary {
				return v, true
			}
			return nil, false
		}
	}
	return nil, false
}

// Cursor is a position in a slot's stream of changes: just after the change
// Index of the transaction committed at LSN, and the identity of the
// server and slot it was read from.
//
// Every change of a transaction shares the transaction's commit LSN; the
// index makes the position exact, so that a stream stopped in the middle of
// a transaction resumes with its next change. A Progress position has Index
// -1: before every change of a transaction committed at LSN. The zero
// Cursor is a stream that handled nothing: it starts where the slot stands
// (creating the slot when it is absent).
//
// System, Timeline and Slot are filled in by the Source from the server it
// read the change from; a Cursor without them learns them at the next Open.
// A saved Cursor whose server or slot is not the one the Source finds is
// refused (see [Source.Open]).
type Cursor struct {
	// LSN is the commit LSN of the transaction of the last change handled,
	// or a position with nothing in flight (Index -1).
	LSN pglogrepl.LSN `json:"lsn"`
	// Index is the index of the last change handled within the
	// transaction, from 0; -1 when none of it was; -2 inside a resync's
	// replay (the cursor of its ResyncStart and Snapshot events), from
	// which a stream does not resume: it resyncs again.
	Index int `json:"index"`
	// System is the server's system identifier (IDENTIFY_SYSTEM).
	System string `json:"system,omitempty"`
	// Timeline is the server's timeline (IDENTIFY_SYSTEM).
	Timeline int32 `json:"timeline,omitempty"`
	// Slot is the replication slot's name.
	Slot string `json:"slot,omitempty"`
	// Row numbers the Snapshot rows delivered at one position, from 1; 0
	// for every other event.
	Row int `json:"row,omitempty"`
	// Snapshot is the progress of the snapshot and backfills under way (see
	// [WithSnapshot] and [Source.Backfill]), opaque; empty when none is.
	Snapshot string `json:"snapshot,omitempty"`
}

// MarshalJSON encodes c as a JSON object of its fields, with the LSN as
// text ("lsn":"0/16B3748"), as String and PostgreSQL write it.
func (c Cursor) MarshalJSON() ([]byte, error) {
	type fields Cursor // without the methods
	return json.Marshal(struct {
		LSN string `json:"lsn"`
		fields
	}{LSN: c.LSN.String(), fields: fields(c)})
}

// UnmarshalJSON decodes what MarshalJSON encodes, and a cursor whose LSN
// is a number (as versions before the text wrote it).
func (c *Cursor) UnmarshalJSON(data []byte) error {
	type fields Cursor // without the methods
	var w struct {
		LSN json.RawMessage `json:"lsn"`
		*fields
	}
	w.fields = (*fields)(c)
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	var text string
	switch {
	case len(w.LSN) == 0 || string(w.LSN) == "null":
		c.LSN = 0
	case json.Unmarshal(w.LSN, &text) == nil:
		lsn, err := pglogrepl.ParseLSN(text)
		if err != nil {
			return fmt.Errorf("cdc: cursor's lsn %s: %w", w.LSN, err)
		}
		c.LSN = lsn
	default:
		n, err := strconv.ParseUint(string(w.LSN), 10, 64)
		if err != nil {
			return fmt.Errorf("cdc: cursor's lsn %s: %w", w.LSN, err)
		}
		c.LSN = pglogrepl.LSN(n)
	}
	return nil
}

// Compare orders cursors by position, as cmp.Compare does: by LSN, then by
// Index, then by Row. The identity fields and Snapshot are not compared.
func Compare(a, b Cursor) int {
	if c := cmp.Compare(a.LSN, b.LSN); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Index, b.Index); c != 0 {
		return c
	}
	return cmp.Compare(a.Row, b.Row)
}

// String formats c as "0/16B3748 #3" (after the change with index 3 of the
// transaction committed at 0/16B3748), "0/16B3748 #-1" for a position
// before every change at that LSN, and "0/16B3748 #3 row 5" after the 5th
// Snapshot row delivered there.
func (c Cursor) String() string {
	s := c.LSN.String() + " #" + strconv.Itoa(c.Index)
	if c.Row > 0 {
		s += " row " + strconv.Itoa(c.Row)
	}
	return s
}

// replayIndex is the Index of the cursor of a resync's ResyncStart and
// Snapshot events: a replay not finished, which Open refuses so that the
// stream resyncs again.
const replayIndex = -2

// validate reports a cursor that cannot be a position.
func (c Cursor) validate() error {
	if c.Index < replayIndex {
		return fmt.Errorf("cdc: cursor %v: index below %d", c, replayIndex)
	}
	return nil
}

// fresh reports whether c belongs to a stream that has handled nothing.
func (c Cursor) fresh() bool {
	return c.LSN == 0 && c.Index <= 0 && c.System == "" && c.Snapshot == ""
}

// Extract is the [cursor.Extractor] for [Event]: an event's cursor is its
// Cursor field, and a [Progress] event is reported as
// [cursor.ProgressOnly], so that the stream commits it without handing it
// to the handler.
func Extract(ev Event) (Cursor, error) {
	if ev.Op == Progress {
		return ev.Cursor, cursor.ProgressOnly
	}
	return ev.Cursor, nil
}
