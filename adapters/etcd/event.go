package etcd

import (
	"cmp"
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
)

// Event is one change under a watched prefix, or a marker around a resync's
// replay.
//
// Key and Value share memory with the watch response they came from: copy
// them to keep them beyond the handler call.
type Event struct {
	// Type is etcd's: [clientv3.EventTypePut] for a key created or updated
	// (and for every key of a resync's replay), [clientv3.EventTypeDelete]
	// for a key deleted (by a delete, a transaction or an expired lease).
	Type mvccpb.Event_EventType
	// ResyncStart marks the event that opens a resync's replay, after the
	// cursor expired (compacted, or of a replaced cluster): events may have
	// been missed, and the puts up to the ResyncEnd marker are the state of
	// the prefix as of the revision of its Cursor. Keys deleted in the gap
	// are not replayed: drop what the replay lacks. A marker has no key.
	ResyncStart bool
	// ResyncEnd marks the event that closes a resync's replay; the stream
	// continues with the changes after the revision of its Cursor.
	ResyncEnd bool
	// Key is the key that changed.
	Key []byte
	// Value is the key's value after a Put.
	Value []byte
	// ModRevision is the revision of the change (Put, Delete): the revision
	// of the transaction that made it, shared by every key it changed.
	ModRevision int64
	// CreateRevision is the revision at which the key was created (Put).
	CreateRevision int64
	// Version counts the puts of the key since its creation (Put).
	Version int64
	// Lease is the ID of the lease the key is attached to, 0 for none (Put).
	Lease int64
	// Cursor is the position just after this event: resuming after it
	// delivers the events that follow.
	Cursor Cursor

	progress bool // an etcd progress notification: committed, never handled
}

// Cursor is a position in the history of a watched prefix: after Index
// events of revision Revision, or after all of them when Index is 0.
//
// A transaction changes many keys at one revision, and etcd delivers a
// revision's events in the order of the transaction's operations, every
// time it is watched. A Cursor counts them, so that a stream stopped in the
// middle of a transaction resumes with the next of its events: nothing lost,
// nothing repeated. The event of a revision that changed one key under the
// prefix has Index 1; a progress notification or the end of a resync has
// Index 0 (the whole revision).
//
// The zero Cursor is before revision 1: resuming after it delivers every
// change etcd still has, or, once history was compacted, a resync of the
// prefix. Use [Now] for a cursor at the current revision.
//
// A revision means something in one history only, so a Cursor also records
// the ID of the cluster it was read from. A [NewResumer] watch refuses to
// resume a cursor in another cluster, or in one whose current revision is
// below the cursor's (wiped, or restored from an older snapshot), with an
// error matching [stream.ErrSourceChanged]; a Cursor without a cluster ID
// (the zero Cursor, one saved by an older version) takes the ID of the
// cluster it is first resumed in. See docs/replaced-backend.md.
type Cursor struct {
	// Revision is the revision of the last event handled.
	Revision int64 `json:"revision"`
	// Index counts the events of Revision handled (1 for the first); 0
	// means all of them.
	Index int `json:"index"`
	// Cluster is the ID of the etcd cluster the cursor was read from, 0
	// when not known yet.
	Cluster uint64 `json:"cluster,omitempty"`
}

// compare orders cursors as cmp.Compare does: a negative number when a is
// before b, 0 when they are equal, a positive number when a is after b. A
// whole revision (Index 0) comes after every partial position in it. The
// cluster IDs are not compared: positions of two histories have no order.
func compare(a, b Cursor) int {
	if c := cmp.Compare(a.Revision, b.Revision); c != 0 {
		return c
	}
	switch {
	case a.Index == b.Index:
		return 0
	case a.Index == 0:
		return 1
	case b.Index == 0:
		return -1
	}
	return cmp.Compare(a.Index, b.Index)
}

// String formats c as "revision 12" (a whole revision) or "revision 12
// event 3" (the third event of revision 12).
func (c Cursor) String() string {
	s := "revision " + strconv.FormatInt(c.Revision, 10)
	if c.Index != 0 {
		s += " event " + strconv.Itoa(c.Index)
	}
	return s
}

// watchFrom returns the revision a watch resuming after c starts at, and
// how many events of that revision it must skip.
func (c Cursor) watchFrom() (rev int64, skip int) {
	if c.Index == 0 {
		return c.Revision + 1, 0
	}
	return c.Revision, c.Index
}

// extract is the [cursor.Extractor] for [Event]: an event's cursor is its
// Cursor field, and a progress notification is [cursor.ProgressOnly], so
// that the stream commits it without handing it to the handler.
func extract(ev Event) (Cursor, error) {
	if ev.progress {
		return ev.Cursor, cursor.ProgressOnly
	}
	return ev.Cursor, nil
}

func (c Cursor) validate() error {
	if c.Revision < 0 || c.Index < 0 {
		return fmt.Errorf("etcd: cursor {revision %d, index %d}: both must be at least 0", c.Revision, c.Index)
	}
	return nil
}

// Now returns the cursor of the current revision of the etcd behind kv, with
// its cluster ID: a stream resuming after it delivers only the changes made
// from now on.
func Now(ctx context.Context, kv clientv3.KV) (Cursor, error) {
	resp, err := kv.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return Cursor{}, fmt.Errorf("etcd: reading the current revision: %w", err)
	}
	return Cursor{Revision: resp.Header.Revision, Cluster: resp.Header.ClusterId}, nil
}
