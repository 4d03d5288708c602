package etcd

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// NewResumer returns a [stream.Resumer] over the keys under prefix (every
// key when prefix is empty), with its cursor in store:
//   - The watch goes through client with etcd's progress notifications
//     (their cursors are committed, never handled) and WithRequireLeader (a
//     member that lost its leader cancels the watch; the reopen goes to one
//     that has one). A revision partly handled is watched again from its
//     start, and its handled events are skipped (see [Cursor]).
//   - etcd's PermissionDenied, Unauthenticated and InvalidArgument fail the
//     stream; other failures are retried (no leader, a timeout).
//   - A cursor compacted away resyncs: the keys under prefix are read at the
//     current revision, in pages of 1,000, and delivered between a
//     ResyncStart and a ResyncEnd marker (see [Event]). So does a cursor of
//     another history ([stream.ErrSourceChanged]: another cluster ID, or a
//     revision below one already seen), checked at every Open with one
//     linearizable read and again after 10 s of a silent watch; see
//     docs/replaced-backend.md for what cannot be told apart.
//   - A cursor that goes back stops the stream instead of repeating events.
//
// opts come after these, so a later WithClassifier or WithResync replaces
// them. The client's Close ends the stream with an error marked
// errclass.Permanent.
func NewResumer(client *clientv3.Client, prefix string, store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event, Cursor], error) {
	base := []stream.Option{
		stream.WithClassifier(classifier()),
		stream.WithResync(resync(client, prefix, 0)),
		stream.WithCursorOrder(compare),
	}
	return stream.New(newSource(client, prefix), extract, store, append(base, opts...)...)
}
