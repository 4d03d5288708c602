package etcd

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

// view is one member's picture of its group, built from a read of the
// member keys and the owner keys and kept up to date by watching them.
// Only the member's loop uses it.
type view struct {
	prefix  string
	members map[string]map[string]bool // member → the streams it offers
	owners  map[string]ownerKey        // stream → its owner key, as of ownerKey.mod
}

// ownerKey is what a view knows of a stream's owner key: its lease and
// create revision (0 while the stream is free), and the revision that told.
type ownerKey struct {
	lease       clientv3.LeaseID
	create, mod int64
}

func memberValue(streams []string) string { return strings.Join(streams, "\n") }

// keys returns the range of the member and owner keys, which lie side by
// side ("members/" < "owners/").
func (v *view) keys() (from, to string) {
	return v.prefix + "members/", clientv3.GetPrefixRangeEnd(v.prefix + "owners/")
}

// load reads the member and owner keys and returns the revision read.
func (v *view) load(ctx context.Context, kv clientv3.KV) (int64, error) {
	from, to := v.keys()
	resp, err := kv.Get(ctx, from, clientv3.WithRange(to))
	if err != nil {
		return 0, fmt.Errorf("etcd: reading the members and owners under %q: %w", v.prefix, err)
	}
	v.members, v.owners = map[string]map[string]bool{}, map[string]ownerKey{}
	for _, kv := range resp.Kvs {
		v.apply(kv, mvccpb.PUT)
	}
	return resp.Header.Revision, nil
}

// apply applies a change of a member or owner key; it returns the stream
// of an owner key, or reports a member key.
func (v *view) apply(kv *mvccpb.KeyValue, typ mvccpb.Event_EventType) (stream string, member bool) {
	key := strings.TrimPrefix(string(kv.Key), v.prefix)
	if name, ok := strings.CutPrefix(key, "members/"); ok {
		delete(v.members, name)
		if typ == mvccpb.PUT {
			v.members[name] = map[string]bool{}
			for _, s := range strings.Split(string(kv.Value), "\n") {
				v.members[name][s] = true
			}
		}
		return "", true
	}
	stream, ok := strings.CutPrefix(key, "owners/")
	switch {
	case !ok:
	case typ == mvccpb.PUT:
		v.own(stream, ownerKey{clientv3.LeaseID(kv.Lease), kv.CreateRevision, kv.ModRevision})
	default:
		v.own(stream, ownerKey{mod: kv.ModRevision})
	}
	return stream, false
}

// own records k as stream's owner key unless the view knows a later state.
func (v *view) own(stream string, k ownerKey) {
	if k.mod >= v.owners[stream].mod {
		v.owners[stream] = k
	}
}

// picked returns the member that rendezvous hashing picks for stream among
// the members offering it.
func (v *view) picked(stream string) string {
	var candidates []string
	for m, offers := range v.members {
		if offers[stream] {
			candidates = append(candidates, m)
		}
	}
	p, _ := hrw.Pick(stream, candidates)
	return p
}
