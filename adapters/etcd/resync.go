package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/stream"
)

// defaultPageSize is the keys a resync reads per request.
const defaultPageSize = 1000

// resync returns the [stream.ResyncFunc] of a watch of prefix: every page
// of pageSize keys (defaultPageSize when <= 0) is read at the same, current
// revision, which every event's Cursor carries. A failed read is retried by
// the stream, and the replay starts over. docs/etcd.md has the rest.
func resync(kv clientv3.KV, prefix string, pageSize int) stream.ResyncFunc[Event, Cursor] {
	if pageSize <= 0 {
		pageSize = defaultPageSize
	}
	key, end := prefixRange(prefix)
	return func(ctx context.Context, _ error, emit func(Event) error) (Cursor, error) {
		resp, err := kv.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(int64(pageSize)))
		if err != nil {
			return Cursor{}, refused(fmt.Errorf("etcd: resync of %q: %w", prefix, err))
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
				return Cursor{}, refused(fmt.Errorf("etcd: resync of %q at revision %d: %w", prefix, at.Revision, err))
			}
		}
		if err := emit(Event{ResyncEnd: true, Cursor: at}); err != nil {
			return Cursor{}, err
		}
		return at, nil
	}
}
