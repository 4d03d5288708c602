package etcd

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// NewResumer returns a [stream.Resumer] over the keys under prefix, with its
// cursor in store: [NewSource] on client, [Extract], [Classifier], [Resync]
// on client with pages of 1,000 keys (a cursor compacted away, or of a
// replaced cluster, resyncs), and [Compare] as the cursor order (so a
// cursor that went back stops the stream instead of repeating events). opts
// come after these, so a later WithClassifier or WithResync replaces them.
func NewResumer(client *clientv3.Client, prefix string, store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event, Cursor], error) {
	base := []stream.Option{
		stream.WithClassifier(Classifier()),
		stream.WithResync(Resync(client, prefix, 0)),
		stream.WithCursorOrder(Compare),
	}
	return stream.New(NewSource(client, prefix), Extract, store, append(base, opts...)...)
}
