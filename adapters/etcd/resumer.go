package etcd

import (
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// NewResumer returns a [stream.Resumer] over the keys under prefix (every
// key when prefix is empty), with its cursor in store: the [NewSource]
// Source, [Extract], and these defaults. The watch requires a leader and
// commits etcd's progress notifications without handing them over. A
// cursor compacted away, or of another history ([stream.ErrSourceChanged],
// checked at every Open and after 10 s of silence), resyncs in pages of
// 1,000 keys between the markers of [Event] ([stream.WithResync]). A cursor
// that goes back stops the stream ([stream.WithCursorOrder] with
// [Compare]). PermissionDenied, Unauthenticated and InvalidArgument fail
// the stream; other failures are retried (the Source marks its errors; any
// classifier reads them). opts come after these defaults, so a WithResync
// of yours replaces the resync. Closing the client ends the stream with a
// permanent error. See docs/etcd.md.
//
// It returns an error matching [stream.ErrInvalidOption] for a nil client
// or store, or a bad option, naming every one at once.
func NewResumer(client *clientv3.Client, prefix string, store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event, Cursor], error) {
	var errs []error
	if client == nil {
		errs = append(errs, badarg.New("etcd: NewResumer", "client", nil, "must not be nil"))
	}
	if store == nil {
		errs = append(errs, badarg.New("etcd: NewResumer", "store", nil, "must not be nil"))
	}
	if len(errs) > 0 {
		// stream.New checks the options, with the arguments that exist.
		_, err := stream.New[Event, Cursor](newSource(nil, prefix), Extract, cursor.NewMemory(Cursor{}), opts...)
		return nil, errors.Join(append(errs, err)...)
	}
	base := []stream.Option{
		stream.WithResync(resync(client, prefix, 0)),
		stream.WithCursorOrder(Compare),
	}
	return stream.New(newSource(client, prefix), Extract, store, append(base, opts...)...)
}
