package etcd

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// NewResumer returns a [stream.Resumer] over the keys under prefix (every
// key when prefix is empty), with its cursor in store. The watch requires a
// leader and commits etcd's progress notifications without handing them
// over. PermissionDenied, Unauthenticated and InvalidArgument fail the
// stream; other failures are retried. A cursor compacted away, or of
// another history ([stream.ErrSourceChanged], checked at every Open and
// after 10 s of silence), resyncs in pages of 1,000 keys between the
// markers of [Event]. A cursor that goes back stops the stream. opts come
// after these, so WithClassifier or WithResync replace them. Closing the
// client ends the stream with a permanent error. See docs/etcd.md.
func NewResumer(client *clientv3.Client, prefix string, store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event, Cursor], error) {
	base := []stream.Option{
		stream.WithClassifier(classifier()),
		stream.WithResync(resync(client, prefix, 0)),
		stream.WithCursorOrder(compare),
	}
	return stream.New(newSource(client, prefix), extract, store, append(base, opts...)...)
}
