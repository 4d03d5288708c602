package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// txnKeys returns n keys under p, in the order a transaction writes them.
func txnKeys(p string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%sk%02d", p, i)
	}
	return keys
}

// collect returns a handler that appends each event's key to *keys and
// returns stream.ErrStop once it holds stopAt keys (never when stopAt is 0).
func collect(keys *[]string, stopAt int) func(context.Context, etcd.Event) error {
	return func(_ context.Context, ev etcd.Event) error {
		*keys = append(*keys, string(ev.Key))
		if len(*keys) == stopAt {
			return stream.ErrStop
		}
		return nil
	}
}

// TestResumerStopsInsideTransaction stops a stream after 10 of the 50
// events of one transaction, with the cursor in etcd, and resumes it from a
// new client: the other 40 follow, each once, in order.
func TestResumerStopsInsideTransaction(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	keys := txnKeys(p, 50)
	rev := txnPut(t, c, keys...)

	store, err := etcd.NewStore(c, p+"cursor", etcd.CursorCodec(), etcd.Cursor{Revision: rev - 1})
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	r, err := etcd.NewResumer(c, p+"k", store)
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	var first []string
	if err := r.Run(ctx, collect(&first, 10)); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if saved, _ := newStore(t, c, p+"cursor").Load(ctx); saved != (etcd.Cursor{Revision: rev, Index: 10, Cluster: clusterID(t, c)}) {
		t.Fatalf("saved cursor = %+v, want revision %d event 10 of the server's cluster", saved, rev)
	}

	c2 := newClient(t)
	r2, err := etcd.NewResumer(c2, p+"k", newStore(t, c2, p+"cursor"))
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	var rest []string
	if err := r2.Run(ctx, collect(&rest, 40)); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if diff := cmp.Diff(keys, append(first, rest...)); diff != "" {
		t.Errorf("keys handled (-want +got):\n%s", diff)
	}
}

// breaking wraps a Source so that its connections fail after every few
// events, as a connection cut would: the Resumer reopens after its cursor.
type breaking struct {
	src   stream.Source[etcd.Event, etcd.Cursor]
	every int
	opens atomic.Int64
}

var errCut = errors.New("test: connection cut")

func (b *breaking) Open(ctx context.Context, after etcd.Cursor) (stream.Conn[etcd.Event], error) {
	b.opens.Add(1)
	conn, err := b.src.Open(ctx, after)
	if err != nil {
		return nil, err
	}
	return &breakingConn{Conn: conn, left: b.every}, nil
}

type breakingConn struct {
	stream.Conn[etcd.Event]
	left int
}

func (c *breakingConn) Recv(ctx context.Context) (etcd.Event, error) {
	if c.left == 0 {
		return etcd.Event{}, errCut
	}
	ev, err := c.Conn.Recv(ctx)
	if err == nil && !etcd.IsProgress(ev) {
		c.left--
	}
	return ev, err
}

// TestResumerCutInsideTransaction cuts the connection every 7 events while
// a 50-key transaction streams: every event arrives once, in order.
func TestResumerCutInsideTransaction(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	keys := txnKeys(p, 50)
	rev := txnPut(t, c, keys...)
	src := &breaking{src: newSource(t, c, p), every: 7}
	r, err := stream.New(src, etcd.Extract, cursor.NewMemory(etcd.Cursor{Revision: rev - 1}),
		stream.WithBackoff(backoff.Constant(0)), stream.WithCursorOrder(etcd.Compare))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	var got []string
	if err := r.Run(ctx, collect(&got, 50)); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if diff := cmp.Diff(keys, got); diff != "" {
		t.Errorf("keys handled (-want +got):\n%s", diff)
	}
	if n := src.opens.Load(); n != 8 {
		t.Errorf("opens = %d, want 8 (a cut every 7 events of 50)", n)
	}
	if st := r.Stats(); st.Cursor != (etcd.Cursor{Revision: rev, Index: 50, Cluster: clusterID(t, c)}) {
		t.Errorf("cursor = %+v, want revision %d event 50 of the server's cluster", st.Cursor, rev)
	}
}

// TestResumerResync resumes from a compacted cursor: a resync streams the
// prefix as of a current revision between markers, in pages, and the stream
// goes on with the changes after it.
func TestResumerResync(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	old := put(t, c, p+"gone", "1")
	put(t, c, p+"b", "2")
	put(t, c, p+"a", "3")
	put(t, c, p+"c", "4")
	if _, err := c.Delete(ctx, p+"gone"); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	now := put(t, c, p+"d", "5")
	if err := server.Compact(ctx, c, now); err != nil {
		t.Fatalf("Compact() = %v", err)
	}

	var resyncs []stream.ResyncEvent[etcd.Cursor]
	r, err := etcd.NewResumer(c, p, cursor.NewMemory(etcd.Cursor{Revision: old, Index: 1}),
		stream.WithResync(etcd.Resync(c, p, 2)),
		stream.WithHooks(stream.Hooks[etcd.Cursor]{OnResync: func(ev stream.ResyncEvent[etcd.Cursor]) { resyncs = append(resyncs, ev) }}))
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	var events []got
	after := int64(0)
	err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		events = append(events, summarize(ev))
		switch {
		case ev.ResyncEnd:
			after = put(t, c, p+"e", "6")
		case string(ev.Key) == p+"e":
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	id := clusterID(t, c)
	at := etcd.Cursor{Revision: now, Cluster: id}
	want := []got{
		{Type: "resync-start", Cursor: at},
		{Type: "put", Key: p + "a", Value: "3", Rev: old + 2, Cursor: at},
		{Type: "put", Key: p + "b", Value: "2", Rev: old + 1, Cursor: at},
		{Type: "put", Key: p + "c", Value: "4", Rev: old + 3, Cursor: at},
		{Type: "put", Key: p + "d", Value: "5", Rev: now, Cursor: at},
		{Type: "resync-end", Cursor: at},
		{Type: "put", Key: p + "e", Value: "6", Rev: after, Cursor: etcd.Cursor{Revision: after, Index: 1, Cluster: id}},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(resyncs) != 1 || resyncs[0].To != at {
		t.Errorf("resyncs = %+v, want one to %v", resyncs, at)
	}
}

// TestResumerProgressMovesQuietCursor checks that a quiet prefix's saved
// cursor follows the revisions written elsewhere, without a handler call.
func TestResumerProgressMovesQuietCursor(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	p := newPrefix(t)
	start := put(t, c, p+"a", "1")
	elsewhere := put(t, c, "/elsewhere"+p, "x")
	store := newStore(t, c, p+"cursor")
	if err := store.Save(ctx, etcd.Cursor{Revision: start}); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	r, err := etcd.NewResumer(c, p+"a", store, stream.WithHooks(stream.Hooks[etcd.Cursor]{
		OnSave: func(ev stream.SaveEvent[etcd.Cursor]) {
			if ev.Err == nil && ev.Cursor.Revision >= elsewhere {
				cancel()
			}
		},
	}))
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		t.Errorf("handler called with %v %s on a quiet prefix", ev.Type, ev.Key)
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	saved, err := newStore(t, c, p+"cursor").Load(context.Background())
	if err != nil || saved.Revision < elsewhere || saved.Index != 0 {
		t.Errorf("saved cursor = %v, %v; want a whole revision at or after %d", saved, err, elsewhere)
	}
	if st := r.Stats(); st.Progress == 0 || st.Events != 0 {
		t.Errorf("Stats() progress %d, events %d; want progress only", st.Progress, st.Events)
	}
}

// TestResumerFencedStops checks that a Resumer whose fenced Save is refused
// stops with the refusal, without retrying.
func TestResumerFencedStops(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	put(t, c, p+"owner", "me")
	fence := clientv3.Compare(clientv3.Value(p+"owner"), "=", "me")
	rev := txnPut(t, c, p+"k1", p+"k2")
	store, err := etcd.NewStore(c, p+"cursor", etcd.CursorCodec(), etcd.Cursor{Revision: rev - 1}, etcd.WithFence(fence))
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	r, err := etcd.NewResumer(c, p+"k", store)
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	handled := 0
	err = r.Run(ctx, func(context.Context, etcd.Event) error {
		handled++
		if handled == 1 {
			put(t, c, p+"owner", "someone else")
		}
		return nil
	})
	if !errors.Is(err, etcd.ErrNotOwner) {
		t.Fatalf("Run() = %v, want %v", err, etcd.ErrNotOwner)
	}
	if handled != 1 {
		t.Errorf("handled %d events, want 1 (the Save after it was refused)", handled)
	}
	if st := r.Stats(); st.Retried != 0 {
		t.Errorf("Stats().Retried = %d, want 0", st.Retried)
	}
}

// TestResumerSourceChanged resumes a cursor beyond the server's revision (a
// cursor kept outside etcd while etcd was wiped or restored): without a
// resync hook Run stops at the first Open, having handled nothing; with
// NewResumer's the prefix is replayed and the stream goes on, with one
// Open.
func TestResumerSourceChanged(t *testing.T) {
	c := newClient(t)
	ctx := ctxFor(t)
	p := newPrefix(t)
	put(t, c, p+"a", "1")
	now := put(t, c, p+"b", "2")
	id := clusterID(t, c)
	saved := etcd.Cursor{Revision: now + 1000, Index: 1, Cluster: id}

	r, err := stream.New(newSource(t, c, p), etcd.Extract, cursor.NewMemory(saved))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		t.Errorf("handler called with %v %s", ev.Type, ev.Key)
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want %v", err, stream.ErrSourceChanged)
	}
	if st := r.Stats(); st.Opens != 0 || st.Expired != 1 || st.Retried != 0 {
		t.Errorf("Stats() opens %d, expired %d, retried %d; want 0, 1, 0", st.Opens, st.Expired, st.Retried)
	}

	r, err = etcd.NewResumer(c, p, cursor.NewMemory(saved))
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	var keys []string
	after := int64(0)
	err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		keys = append(keys, etcd.Kind(ev)+" "+strings.TrimPrefix(string(ev.Key), p))
		switch {
		case ev.ResyncEnd:
			after = put(t, c, p+"c", "3")
		case after != 0 && ev.ModRevision == after:
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	want := []string{"resync-start ", "put a", "put b", "resync-end ", "put c"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if st := r.Stats(); st.Opens != 1 || st.Resyncs != 1 || st.Cursor != (etcd.Cursor{Revision: after, Index: 1, Cluster: id}) {
		t.Errorf("Stats() opens %d, resyncs %d, cursor %+v; want 1, 1, revision %d event 1", st.Opens, st.Resyncs, st.Cursor, after)
	}
}
