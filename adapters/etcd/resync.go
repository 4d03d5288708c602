package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/stream"
)

// defaultPageSize is the number of keys a resync reads per request when
// resync is given no page size.
const defaultPageSize = 1000

// resync returns the [stream.ResyncFunc] that closes a gap after the cursor
// of a watch of prefix expired: its revision was compacted, or the
// cluster is not the history it came from ([stream.ErrSourceChanged]). It
// reads the keys under prefix through kv at the current revision, pageSize
// keys a request (1,000 when pageSize <= 0), every page at that same
// revision, and streams them through emit as one ResyncStart marker, one
// put event per key (in key order, with the key's own revisions), and one
// ResyncEnd marker. The stream then continues after that revision. Every
// event's Cursor is the revision read, in the cluster read.
//
// Keys deleted in the gap are not replayed: the markers say when to drop
// what the replay lacked. Nothing is held beyond one page. A failed read
// (including that revision being compacted while the pages are read) is
// returned as it is, and retried by a stream: the replay then starts over.
func resync(kv clientv3.KV, prefix string, pageSize int) stream.ResyncFunc[Event, Cursor] {
	if pageSize <= 0 {
		pageSize = defaultPageSize
	}
	key, end := prefixRange(prefix)
	return func(ctx context.Context, _ error, emit func(Event) error) (Cursor, error) {
		resp, err := kv.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(int64(pageSize)))
		if err != nil {
			return Cursor{}, fmt.Errorf("etcd: resync of %q: %w", prefix, err)
		}
		at := Cursor{Revision: resp.Header.Revision, Cluster: resp.Header.ClusterId}
		if err := emit(Event{ResyncStart: true, Cursor: at}); err != nil {
			return Cursor{}, err
		}
		for {
			for _, kv := range resp.Kvs {
				if err := emit(Event{
					Type:           clientv3.EventTypePut,
					Key:            kv.Key,
					Value:          kv.Value,
					ModRevision:    kv.ModRevision,
					CreateRevision: kv.CreateRevision,
					Version:        kv.Version,
					Lease:          kv.Lease,
					Cursor:         at,
				}); err != nil {
					return Cursor{}, err
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			next := string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			resp, err = kv.Get(ctx, next, clientv3.WithRange(end), clientv3.WithLimit(int64(pageSize)), clientv3.WithRev(at.Revision))
			if err != nil {
				return Cursor{}, fmt.Errorf("etcd: resync of %q at revision %d: %w", prefix, at.Revision, err)
			}
		}
		if err := emit(Event{ResyncEnd: true, Cursor: at}); err != nil {
			return Cursor{}, err
		}
		return at, nil
	}
}
