package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// txn50 writes 50 keys under prefix in one transaction and returns them, in
// the transaction's order, with its revision.
func txn50(t *testing.T, c *clientv3.Client, prefix string) ([]string, int64) {
	t.Helper()
	keys := make([]string, 50)
	ops := make([]clientv3.Op, 50)
	for i := range keys {
		// Not in key order: a revision's events come in the order of the
		// transaction's operations.
		keys[i] = fmt.Sprintf("%sk%02d", prefix, (i*7)%50)
		ops[i] = clientv3.OpPut(keys[i], "v")
	}
	resp, err := c.Txn(ctxFor(t)).Then(ops...).Commit()
	if err != nil {
		t.Fatalf("Txn() = %v", err)
	}
	return keys, resp.Header.Revision
}

// TestTxnCut cuts a stream after 10 of the 50 events of one transaction:
// every event is handled exactly once, in order.
//
// A cut of the network under the watch itself never reaches the stream in
// the middle of a revision: etcd sends a revision's events in one watch
// response, and the client resumes a broken gRPC stream by itself after
// the last response it received, so the events already received are
// delivered from memory. What does end a stream in the middle of a
// revision is the consumer's side: the process stops (and another resumes
// from the saved cursor), or a Save fails because etcd is unreachable from
// the process (and the stream reopens after its in-memory cursor). Both
// are tested here, against three members.
func TestTxnCut(t *testing.T) {
	c := cluster.Start(t, 3)

	t.Run("the process stops and another resumes", func(t *testing.T) {
		ctx := ctxFor(t)
		first := c.Client(t, c.Endpoint(0))
		keys, rev := txn50(t, first, "/cut/stop/")
		newStore := func(cl *clientv3.Client) cursor.Store[etcd.Cursor] {
			s, err := etcd.NewStore(cl, "/cut/stop-cursor", cursor.JSON[etcd.Cursor](), etcd.Cursor{Revision: rev - 1})
			if err != nil {
				t.Fatalf("NewStore() = %v", err)
			}
			return s
		}
		var got []string
		handle := func(_ context.Context, ev etcd.Event) error {
			got = append(got, string(ev.Key))
			if len(got) == 10 || len(got) == 50 {
				return stream.ErrStop
			}
			return nil
		}
		r, err := etcd.NewResumer(first, "/cut/stop/", newStore(first))
		if err != nil {
			t.Fatalf("NewResumer() = %v", err)
		}
		if err := r.Run(ctx, handle); err != nil {
			t.Fatalf("Run() = %v", err)
		}
		second := c.Client(t, c.Endpoint(2)) // another member
		saved, err := newStore(second).Load(ctx)
		if err != nil || compareCursors(saved, etcd.Cursor{Revision: rev, Index: 10}) != 0 {
			t.Fatalf("saved cursor = %v, %v; want %v", saved, err, etcd.Cursor{Revision: rev, Index: 10})
		}
		r2, err := etcd.NewResumer(second, "/cut/stop/", newStore(second))
		if err != nil {
			t.Fatalf("NewResumer() = %v", err)
		}
		if err := r2.Run(ctx, handle); err != nil {
			t.Fatalf("Run() = %v", err)
		}
		if diff := cmp.Diff(keys, got); diff != "" {
			t.Errorf("keys handled (-want +got):\n%s", diff)
		}
	})

	t.Run("etcd unreachable for the Save after event 10", func(t *testing.T) {
		ctx := ctxFor(t)
		watcher := c.Client(t)
		proxy, err := cluster.NewProxy(c.Endpoint(1))
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		saver := c.Client(t, proxy.Addr())
		keys, rev := txn50(t, watcher, "/cut/save/")
		store, err := etcd.NewStore(saver, "/cut/save-cursor", cursor.JSON[etcd.Cursor](), etcd.Cursor{Revision: rev - 1},
			etcd.WithTimeout(500*time.Millisecond))
		if err != nil {
			t.Fatalf("NewStore() = %v", err)
		}
		var (
			mu     sync.Mutex
			opens  []etcd.Cursor
			failed int
		)
		r, err := etcd.NewResumer(watcher, "/cut/save/", store,
			stream.WithBackoff(backoff.Constant(100*time.Millisecond)),
			stream.WithHooks(stream.Hooks[etcd.Cursor]{
				OnConnect: func(ev stream.ConnectEvent[etcd.Cursor]) {
					mu.Lock()
					opens = append(opens, ev.After)
					mu.Unlock()
				},
				OnSave: func(ev stream.SaveEvent[etcd.Cursor]) {
					if ev.Err != nil {
						failed++
						proxy.Restore()
					}
				},
			}))
		if err != nil {
			t.Fatalf("NewResumer() = %v", err)
		}
		var got []string
		err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
			got = append(got, string(ev.Key))
			switch len(got) {
			case 10:
				proxy.Cut()
			case 50:
				return stream.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
		if diff := cmp.Diff(keys, got); diff != "" {
			t.Errorf("keys handled (-want +got):\n%s", diff)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []etcd.Cursor{{Revision: rev - 1}, {Revision: rev, Index: 10}}
		if failed == 0 || len(opens) < 2 || !cmp.Equal(want, opens[:2], cmpopts.IgnoreFields(etcd.Cursor{}, "Cluster")) {
			t.Errorf("opened after %v with %d failed saves, want a reopen after %v", opens, failed, want[1])
		}
		if saved, err := store.Load(ctx); err != nil || compareCursors(saved, etcd.Cursor{Revision: rev, Index: 50}) != 0 {
			t.Errorf("saved cursor = %v, %v; want %v", saved, err, etcd.Cursor{Revision: rev, Index: 50})
		}
	})
}

// TestCompactionPastCursor resumes a stream whose cursor was compacted
// away: a resync between markers gives the state of the prefix at a
// current revision, and every change after that revision follows, once.
func TestCompactionPastCursor(t *testing.T) {
	c := cluster.Start(t, 3)
	cl := c.Client(t)
	ctx := ctxFor(t)
	const p = "/compact/"
	var writes []int64
	for i := range 20 {
		resp, err := cl.Put(ctx, fmt.Sprintf("%sk%02d", p, i%8), fmt.Sprint(i))
		if err != nil {
			t.Fatalf("Put() = %v", err)
		}
		writes = append(writes, resp.Header.Revision)
	}
	store, err := etcd.NewStore(cl, "/compact-cursor", cursor.JSON[etcd.Cursor](), etcd.Cursor{Revision: writes[0] - 1})
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	r, err := etcd.NewResumer(cl, p, store)
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	n := 0
	if err := r.Run(ctx, func(context.Context, etcd.Event) error {
		if n++; n == 5 {
			return stream.ErrStop
		}
		return nil
	}); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	// The stream is stopped; history moves on and is compacted past it.
	if _, err := cl.Delete(ctx, p+"k03"); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	resp, err := cl.Put(ctx, p+"k09", "late")
	if err != nil {
		t.Fatalf("Put() = %v", err)
	}
	if _, err := cl.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("Compact() = %v", err)
	}

	// Resume while a writer keeps changing the prefix.
	w := startWriter(t, cl, p+"live/", []string{"a", "b"}, 5*time.Millisecond)
	r2, err := etcd.NewResumer(cl, p, store)
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	var (
		replay []string    // the resync's puts
		after  []event     // the changes after the resync
		at     etcd.Cursor // the resync's revision
		marks  []string
	)
	err = r2.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		switch {
		case ev.ResyncStart || ev.ResyncEnd:
			marks = append(marks, map[bool]string{true: "start", false: "end"}[ev.ResyncStart])
			at = ev.Cursor
		case len(marks) == 1:
			replay = append(replay, fmt.Sprintf("%s@%d", ev.Key, ev.ModRevision))
		default:
			after = append(after, event{Key: string(ev.Key), Rev: ev.ModRevision})
			if len(after) == 100 {
				return stream.ErrStop
			}
		}
		return nil
	})
	w.halt()
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if diff := cmp.Diff([]string{"start", "end"}, marks); diff != "" {
		t.Fatalf("markers (-want +got):\n%s", diff)
	}
	state, err := cl.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithRev(at.Revision))
	if err != nil {
		t.Fatalf("Get(at %d) = %v", at.Revision, err)
	}
	var want []string
	for _, kv := range state.Kvs {
		want = append(want, fmt.Sprintf("%s@%d", kv.Key, kv.ModRevision))
	}
	if diff := cmp.Diff(want, replay); diff != "" {
		t.Errorf("replay at %v (-want +got):\n%s", at, diff)
	}
	for _, k := range replay {
		if strings.HasPrefix(k, p+"k03@") {
			t.Errorf("the replay holds %s, deleted before the resync", k)
		}
	}
	// Nothing lost after the resync: every change after its revision, up to
	// the last one handled, each once, in order.
	hist := history(t, cl, p, at.Revision+1)
	if len(hist) < len(after) {
		t.Fatalf("history after %v has %d changes, fewer than the %d handled", at, len(hist), len(after))
	}
	if diff := cmp.Diff(hist[:len(after)], after); diff != "" {
		t.Errorf("changes after the resync (-want +got):\n%s", diff)
	}
	if st := r2.Stats(); st.Resyncs != 1 || st.Expired != 1 {
		t.Errorf("Stats() resyncs %d, expired %d; want 1, 1", st.Resyncs, st.Expired)
	}
	t.Logf("resynced at %v: %d keys replayed, then %d changes", at, len(replay), len(after))
}
