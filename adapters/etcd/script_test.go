package etcd_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
)

// scripted is a clientv3.Watcher whose one watch delivers the responses
// given, then stays open.
type scripted struct {
	resps []clientv3.WatchResponse
}

func (s *scripted) Watch(context.Context, string, ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse, len(s.resps))
	for _, r := range s.resps {
		ch <- r
	}
	return ch
}

func (s *scripted) RequestProgress(context.Context) error { return nil }
func (s *scripted) Close() error                          { return nil }

func progressAt(rev int64) clientv3.WatchResponse {
	return clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: rev}}
}

func putsAt(rev int64, keys ...string) clientv3.WatchResponse {
	resp := clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: rev}}
	for _, k := range keys {
		resp.Events = append(resp.Events, &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev}})
	}
	return resp
}

// TestSourceProgressNeverBack feeds progress notifications behind the
// cursor (a member behind the revision the watch started at) and checks
// that they are dropped.
func TestSourceProgressNeverBack(t *testing.T) {
	w := &scripted{resps: []clientv3.WatchResponse{
		progressAt(5),        // behind the cursor the watch opened after
		putsAt(11, "a", "b"), // a transaction
		progressAt(11),       // the whole of 11: moves the cursor
		progressAt(11),       // no further: dropped
		progressAt(9),        // behind: dropped
		putsAt(12, "c"),
	}}
	ctx := ctxFor(t)
	conn, err := etcd.NewSource(w, "p").Open(ctx, etcd.Cursor{Revision: 10})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	var got []etcd.Cursor
	for range 4 {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv() = %v", err)
		}
		got = append(got, ev.Cursor)
	}
	want := []etcd.Cursor{{Revision: 11, Index: 1}, {Revision: 11, Index: 2}, {Revision: 11}, {Revision: 12, Index: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cursors (-want +got):\n%s", diff)
	}
}

func TestSourceEventWithoutKey(t *testing.T) {
	w := &scripted{resps: []clientv3.WatchResponse{{
		Header: &etcdserverpb.ResponseHeader{Revision: 3},
		Events: []*clientv3.Event{{Type: mvccpb.PUT}},
	}}}
	ctx := ctxFor(t)
	conn, err := etcd.NewSource(w, "p").Open(ctx, etcd.Cursor{})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	if _, err := conn.Recv(ctx); err == nil {
		t.Error("Recv() of an event without a key = nil error, want one")
	}
}

func TestSourceWatchClosed(t *testing.T) {
	w := &closing{}
	ctx := ctxFor(t)
	conn, err := etcd.NewSource(w, "p").Open(ctx, etcd.Cursor{})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	_, err = conn.Recv(ctx)
	if err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Recv() on a watch closed without an error = %v, want a failure", err)
	}
}

// closing is a clientv3.Watcher whose watches close at once.
type closing struct{}

func (closing) Watch(context.Context, string, ...clientv3.OpOption) clientv3.WatchChan {
	ch := make(chan clientv3.WatchResponse)
	close(ch)
	return ch
}
func (closing) RequestProgress(context.Context) error { return nil }
func (closing) Close() error                          { return nil }
