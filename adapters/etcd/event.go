package etcd

import (
	"cmp"
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/badarg"
)

// Event is one change under a watched prefix, or a marker around a resync's
// replay. Key and Value share memory with the watch response: copy them to
// keep them beyond the handler call.
type Event struct {
	// Type is etcd's: [clientv3.EventTypePut] (also for every key of a
	// resync's replay) or [clientv3.EventTypeDelete].
	Type mvccpb.Event_EventType
	// ResyncStart opens a resync's replay (the cursor was compacted, or of
	// a replaced cluster): the puts up to ResyncEnd are the prefix's state
	// at its Cursor's revision; drop what the replay lacks. A marker has no
	// key.
	ResyncStart bool
	// ResyncEnd closes the replay; changes after its Cursor follow.
	ResyncEnd bool
	// Key is the key that changed.
	Key []byte
	// Value is the key's value after a Put.
	Value []byte
	// ModRevision is the revision of the change's transaction.
	ModRevision int64
	// CreateRevision is the revision at which the key was created (Put).
	CreateRevision int64
	// Version counts the puts of the key since its creation (Put).
	Version int64
	// Lease is the ID of the lease the key is attached to, 0 for none (Put).
	Lease int64
	// Cursor is the position just after this event.
	Cursor Cursor

	progress bool // an etcd progress notification: committed, never handled
}

// Cursor is a position in the history of a watched prefix: after Index
// events of revision Revision, or after all of them when Index is 0. A
// stream stopped inside a transaction thus resumes with its next event,
// since etcd delivers a revision's events in the same order every time.
// The zero Cursor is before revision 1; [Now] gives the current one.
//
// A Cursor records its cluster's ID: a [NewResumer] watch refuses it in
// another cluster, or in one whose revision is below it, with
// [stream.ErrSourceChanged]; without an ID it takes the first cluster's.
// See docs/etcd.md and docs/replaced-backend.md in the repository.
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

// Compare is the order of cursors ([stream.WithCursorOrder]), negative,
// zero or positive as cmp.Compare: by revision, and a whole revision
// (Index 0) after every position in it. Cluster IDs are not compared: two
// histories have no order.
func Compare(a, b Cursor) int {
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

// watchFrom returns the revision to watch from and how many of its events
// to skip.
func (c Cursor) watchFrom() (rev int64, skip int) {
	if c.Index == 0 {
		return c.Revision + 1, 0
	}
	return c.Revision, c.Index
}

// Extract is the [cursor.Extractor] of a [NewSource] Source: an event's
// cursor is its Cursor field; a progress notification is committed without
// being handed over ([cursor.ProgressOnly]).
func Extract(ev Event) (Cursor, error) {
	if ev.progress {
		return ev.Cursor, cursor.ProgressOnly
	}
	return ev.Cursor, nil
}

func (c Cursor) validate() error {
	if c.Revision < 0 || c.Index < 0 {
		return badarg.New("etcd: Open", "after", fmt.Sprintf("{revision %d, index %d}", c.Revision, c.Index), "revision and index must be at least 0")
	}
	return nil
}

// Now returns the cursor of the current revision of the etcd behind kv,
// with its cluster ID: resuming after it delivers only later changes.
func Now(ctx context.Context, kv clientv3.KV) (Cursor, error) {
	resp, err := kv.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return Cursor{}, fmt.Errorf("etcd: reading the current revision: %w", err)
	}
	return Cursor{Revision: resp.Header.Revision, Cluster: resp.Header.ClusterId}, nil
}
