package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
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
	conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{Revision: 10})
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
	conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{})
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
	conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{})
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

// checked is a scripted watcher that is also a clientv3.KV: its Get (the
// Source's check of the cluster) reports the cluster ID and the revision
// the test sets.
type checked struct {
	scripted
	clientv3.KV // nil: only Get is called

	mu      sync.Mutex
	cluster uint64
	rev     int64
	gets    int
}

func (c *checked) Get(context.Context, string, ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets++
	return &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{ClusterId: c.cluster, Revision: c.rev}}, nil
}

func (c *checked) set(cluster uint64, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cluster, c.rev = cluster, rev
}

func (c *checked) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets
}

// of sets the cluster ID in a response's header.
func of(cluster uint64, resp clientv3.WatchResponse) clientv3.WatchResponse {
	resp.Header.ClusterId = cluster
	return resp
}

// TestSourceOpenChecksCluster opens cursors against a cluster whose ID and
// current revision the test sets.
func TestSourceOpenChecksCluster(t *testing.T) {
	tests := []struct {
		name    string
		after   etcd.Cursor
		cluster uint64 // the cluster's ID ...
		rev     int64  // ... and current revision
		want    string // in the error; "" for none
	}{
		{name: "another cluster", after: etcd.Cursor{Revision: 10, Cluster: 0xa}, cluster: 0xb, rev: 20, want: "the cluster ID was a, now b"},
		{name: "revision below the cursor", after: etcd.Cursor{Revision: 10, Cluster: 0xa}, cluster: 0xa, rev: 4, want: "the revision went back from 10 to 4"},
		{name: "same cluster", after: etcd.Cursor{Revision: 10, Cluster: 0xa}, cluster: 0xa, rev: 10},
		{name: "a cursor without an ID learns it", after: etcd.Cursor{Revision: 10}, cluster: 0xa, rev: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &checked{scripted: scripted{resps: []clientv3.WatchResponse{of(tt.cluster, putsAt(11, "k"))}}}
			w.set(tt.cluster, tt.rev)
			ctx := ctxFor(t)
			conn, err := newSource(t, w, "p").Open(ctx, tt.after)
			if tt.want != "" {
				if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Open(%+v) = %v, want an error matching %v that says %q", tt.after, err, stream.ErrSourceChanged, tt.want)
				}
				if d := errclass.Default().Classify(err); d.Action != errclass.Expired {
					t.Errorf("Classify(%v) = %v, want expired", err, d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%+v) = %v", tt.after, err)
			}
			defer conn.Close()
			ev, err := conn.Recv(ctx)
			if want := (etcd.Cursor{Revision: 11, Index: 1, Cluster: tt.cluster}); err != nil || ev.Cursor != want {
				t.Errorf("Recv() = cursor %+v, %v; want %+v", ev.Cursor, err, want)
			}
		})
	}
}

// TestSourceWatchFromAnotherCluster checks that a response from another
// cluster ends an open watch, as when etcd's client re-opened a broken
// watch on whatever answers at the endpoint now.
func TestSourceWatchFromAnotherCluster(t *testing.T) {
	w := &checked{scripted: scripted{resps: []clientv3.WatchResponse{
		of(0xa, putsAt(11, "k")),
		of(0xb, putsAt(12, "k")),
	}}}
	w.set(0xa, 10)
	ctx := ctxFor(t)
	conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{Revision: 10})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	if _, err := conn.Recv(ctx); err != nil {
		t.Fatalf("first Recv() = %v", err)
	}
	if _, err := conn.Recv(ctx); !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "the cluster ID was a, now b") {
		t.Errorf("Recv() of another cluster's response = %v, want an error matching %v", err, stream.ErrSourceChanged)
	}
}

// TestSourceSilentWatchChecksCluster checks that a watch that delivers
// nothing checks the cluster every 10 seconds, and ends once the cluster's
// revision went back below its cursor: a cluster wiped or restored under a
// watch the client re-opened sends it nothing until its revision catches
// up.
func TestSourceSilentWatchChecksCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &checked{}
		w.set(0xa, 10)
		ctx := t.Context()
		conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{Revision: 10})
		if err != nil {
			t.Fatalf("Open() = %v", err)
		}
		defer conn.Close()
		start := time.Now()
		errc := make(chan error, 1)
		go func() {
			_, err := conn.Recv(ctx)
			errc <- err
		}()
		time.Sleep(25 * time.Second) // fake time: two checks find nothing wrong
		synctest.Wait()
		if n := w.calls(); n != 3 {
			t.Fatalf("checks after 25s = %d, want 3 (Open's and one every 10s)", n)
		}
		w.set(0xa, 3) // wiped and refilled
		err = <-errc
		if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "the revision went back from 10 to 3") {
			t.Fatalf("Recv() = %v, want an error matching %v", err, stream.ErrSourceChanged)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("the change was seen after %v, want 30s (the third check)", d)
		}
	})
}

// TestSourceLaggingMember checks that a response whose revision is below
// one already seen (a member behind the one the watch was on) is no error
// while a linearizable read finds the cluster where it was.
func TestSourceLaggingMember(t *testing.T) {
	w := &checked{scripted: scripted{resps: []clientv3.WatchResponse{
		of(0xa, progressAt(8)),
		of(0xa, putsAt(11, "k")),
	}}}
	w.set(0xa, 11)
	ctx := ctxFor(t)
	conn, err := newSource(t, w, "p").Open(ctx, etcd.Cursor{Revision: 10})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	ev, err := conn.Recv(ctx)
	if want := (etcd.Cursor{Revision: 11, Index: 1, Cluster: 0xa}); err != nil || ev.Cursor != want {
		t.Fatalf("Recv() = cursor %+v, %v; want %+v", ev.Cursor, err, want)
	}
	if n := w.calls(); n != 2 {
		t.Errorf("checks = %d, want 2 (Open's and the lagging response's)", n)
	}
}
