package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// got is what the tests compare of an event.
type got struct {
	Type   string
	Key    string
	Value  string
	Rev    int64
	Cursor etcd.Cursor
}

func summarize(ev etcd.Event) got {
	return got{Type: etcd.Kind(ev), Key: string(ev.Key), Value: string(ev.Value), Rev: ev.ModRevision, Cursor: ev.Cursor}
}

// clusterID returns the cluster ID of the server behind c.
func clusterID(t *testing.T, c *clientv3.Client) uint64 {
	t.Helper()
	resp, err := c.Get(ctxFor(t), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	return resp.Header.ClusterId
}

// recvN reads n events that are not progress notifications from conn.
func recvN(t *testing.T, ctx context.Context, conn stream.Conn[etcd.Event], n int) []got {
	t.Helper()
	var out []got
	for len(out) < n {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv() after %d events = %v", len(out), err)
		}
		if !etcd.IsProgress(ev) {
			out = append(out, summarize(ev))
		}
	}
	return out
}

func TestSourceEvents(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	r1 := put(t, c, p+"a", "1")
	r2 := put(t, c, p+"b", "2")
	put(t, c, "/elsewhere"+p, "not watched")
	del, err := c.Delete(ctx, p+"a")
	if err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	r3 := del.Header.Revision
	r4 := txnPut(t, c, p+"c", p+"d")

	conn, err := newSource(t, c, p).Open(ctx, etcd.Cursor{Revision: r1 - 1})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	id := clusterID(t, c)
	want := []got{
		{Type: "put", Key: p + "a", Value: "1", Rev: r1, Cursor: etcd.Cursor{Revision: r1, Index: 1, Cluster: id}},
		{Type: "put", Key: p + "b", Value: "2", Rev: r2, Cursor: etcd.Cursor{Revision: r2, Index: 1, Cluster: id}},
		{Type: "delete", Key: p + "a", Rev: r3, Cursor: etcd.Cursor{Revision: r3, Index: 1, Cluster: id}},
		{Type: "put", Key: p + "c", Value: "v-" + p + "c", Rev: r4, Cursor: etcd.Cursor{Revision: r4, Index: 1, Cluster: id}},
		{Type: "put", Key: p + "d", Value: "v-" + p + "d", Rev: r4, Cursor: etcd.Cursor{Revision: r4, Index: 2, Cluster: id}},
	}
	if diff := cmp.Diff(want, recvN(t, ctx, conn, len(want))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestSourceResumesInsideRevision opens a watch after every position of a
// five-key transaction and checks that exactly the rest of it follows.
func TestSourceResumesInsideRevision(t *testing.T) {
	c := newClient(t)
	p := newPrefix(t)
	keys := []string{p + "k0", p + "k1", p + "k2", p + "k3", p + "k4"}
	rev := txnPut(t, c, keys...)
	next := put(t, c, p+"after", "x")

	tests := []struct {
		name  string
		after etcd.Cursor
		first string // the first key delivered
		n     int    // events of the transaction delivered
	}{
		{name: "before the revision", after: etcd.Cursor{Revision: rev - 1}, first: keys[0], n: 5},
		{name: "after the first event", after: etcd.Cursor{Revision: rev, Index: 1}, first: keys[1], n: 4},
		{name: "after the third event", after: etcd.Cursor{Revision: rev, Index: 3}, first: keys[3], n: 2},
		{name: "after the last event", after: etcd.Cursor{Revision: rev, Index: 5}, first: p + "after", n: 0},
		{name: "after the whole revision", after: etcd.Cursor{Revision: rev}, first: p + "after", n: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t)
			conn, err := newSource(t, c, p).Open(ctx, tt.after)
			if err != nil {
				t.Fatalf("Open(%v) = %v", tt.after, err)
			}
			defer conn.Close()
			evs := recvN(t, ctx, conn, tt.n+1)
			if evs[0].Key != tt.first {
				t.Errorf("first key after %v = %s, want %s", tt.after, evs[0].Key, tt.first)
			}
			for i, ev := range evs[:tt.n] {
				want := etcd.Cursor{Revision: rev, Index: 5 - tt.n + i + 1, Cluster: clusterID(t, c)}
				if ev.Cursor != want {
					t.Errorf("event %d cursor = %v, want %v", i, ev.Cursor, want)
				}
			}
			if last := evs[tt.n]; last.Rev != next {
				t.Errorf("event after the transaction at revision %d, want %d", last.Rev, next)
			}
		})
	}
}

// TestSourceProgress checks that a quiet prefix gets progress events that
// move its cursor up to revisions written elsewhere.
func TestSourceProgress(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	start := put(t, c, p+"a", "1")
	elsewhere := put(t, c, "/elsewhere"+p, "x")

	conn, err := newSource(t, c, p).Open(ctx, etcd.Cursor{Revision: start})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv() = %v", err)
		}
		if !etcd.IsProgress(ev) {
			t.Fatalf("Recv() = %v event %s, want only progress on a quiet prefix", ev.Type, ev.Key)
		}
		if c, err := etcd.Extract(ev); !errors.Is(err, cursorProgressOnly) || c != ev.Cursor {
			t.Fatalf("Extract(progress) = %v, %v; want %v, ProgressOnly", c, err, ev.Cursor)
		}
		if ev.Cursor.Index != 0 {
			t.Fatalf("progress cursor %v, want a whole revision", ev.Cursor)
		}
		if ev.Cursor.Revision >= elsewhere {
			return
		}
	}
}

func TestSourceCompacted(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	first := put(t, c, p+"a", "1")
	last := put(t, c, p+"a", "2")
	if err := server.Compact(ctx, c, last); err != nil {
		t.Fatalf("Compact() = %v", err)
	}
	// Resuming after the first event needs its revision, which is gone.
	conn, err := newSource(t, c, p).Open(ctx, etcd.Cursor{Revision: first, Index: 1})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer conn.Close()
	_, err = conn.Recv(ctx)
	if !errors.Is(err, rpctypes.ErrCompacted) || !errors.Is(err, errclass.ErrExpired) {
		t.Fatalf("Recv() = %v, want an error matching rpctypes.ErrCompacted and errclass.ErrExpired", err)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Expired {
		t.Errorf("Classify(%v) = %v, want expired", err, d)
	}
}

func TestSourceCloseEndsRecv(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	conn, err := newSource(t, c, newPrefix(t)).Open(ctx, etcd.Cursor{})
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := conn.Recv(ctx); err != nil {
				errc <- err
				return
			}
		}
	}()
	if err := conn.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("second Close() = %v", err)
	}
	if err := <-errc; err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Recv() after Close = %v, want a failure", err)
	}
}

func TestSourceClientClosed(t *testing.T) {
	c, err := server.Client()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	src := newSource(t, c, newPrefix(t))
	c.Close()
	_, err = src.Open(ctxFor(t), etcd.Cursor{})
	if err == nil {
		t.Fatal("Open() on a closed client = nil, want a failure")
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, d)
	}
}

func TestSourceInvalidCursor(t *testing.T) {
	for _, after := range []etcd.Cursor{{Revision: -1}, {Revision: 3, Index: -2}} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			_, err := newSource(t, newClient(t), "p").Open(context.Background(), after)
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("Open(%v) = %v, want %v", after, err, stream.ErrInvalidOption)
			}
		})
	}
}

// TestSourceOtherHistory opens cursors of another history against a real
// server: another cluster's, and one beyond the server's revision (as a
// cursor saved before the data was wiped or restored from an older
// snapshot would be).
func TestSourceOtherHistory(t *testing.T) {
	c := newClient(t)
	id := clusterID(t, c)
	now := put(t, c, newPrefix(t)+"a", "1")
	tests := []struct {
		name  string
		after etcd.Cursor
		want  string
	}{
		{name: "another cluster", after: etcd.Cursor{Revision: now, Cluster: id + 1}, want: fmt.Sprintf("the cluster ID was %x, now %x", id+1, id)},
		{name: "beyond the revision", after: etcd.Cursor{Revision: now + 1000, Cluster: id}, want: "the revision went back"},
		{name: "beyond the revision, no ID", after: etcd.Cursor{Revision: now + 1000}, want: "the revision went back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := newSource(t, c, newPrefix(t)).Open(ctxFor(t), tt.after)
			if err == nil {
				conn.Close()
			}
			if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%+v) = %v, want an error matching %v that says %q", tt.after, err, stream.ErrSourceChanged, tt.want)
			}
			if d := errclass.Default().Classify(err); d.Action != errclass.Expired {
				t.Errorf("Classify(%v) = %v, want expired", err, d)
			}
		})
	}
}
