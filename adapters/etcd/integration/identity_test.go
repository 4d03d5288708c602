package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/adapters/etcd/internal/cluster"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// The tests of this file replace the etcd behind an endpoint under streams
// whose cursors were kept outside it, as a backup or a wipe does to a
// consumer: the data directory wiped and a fresh etcd started with the same
// flags, and a snapshot of an older revision restored with etcdutl. Both
// keep the cluster ID (it derives from the peer URLs and the token); the
// revision, below the cursors', is what gives them away.

// counting counts the Opens of a Resumer, refused ones included.
type counting struct{ opens atomic.Int64 }

// newCounted returns NewResumer's Resumer over prefix (without its resync
// unless resync is set) and its count of Opens.
func newCounted(t *testing.T, cl *clientv3.Client, prefix string, store cursor.Store[etcd.Cursor], resync bool, hooks stream.Hooks[etcd.Cursor]) (*stream.Resumer[etcd.Event, etcd.Cursor], *counting) {
	t.Helper()
	src := &counting{}
	count := stream.Hooks[etcd.Cursor]{
		OnConnect: func(stream.ConnectEvent[etcd.Cursor]) { src.opens.Add(1) },
		OnDisconnect: func(ev stream.DisconnectEvent[etcd.Cursor]) {
			if !ev.Opened {
				src.opens.Add(1)
			}
		},
	}
	opts := []stream.Option{stream.WithHooks(hooks), stream.WithHooks(count)}
	if !resync {
		opts = append(opts, stream.WithResync[etcd.Event, etcd.Cursor](nil))
	}
	r, err := etcd.NewResumer(cl, prefix, store, opts...)
	if err != nil {
		t.Fatalf("NewResumer() = %v", err)
	}
	return r, src
}

// putAll writes the keys under prefix and returns the last revision.
func putAll(t *testing.T, cl *clientv3.Client, prefix string, keys ...string) int64 {
	t.Helper()
	var rev int64
	for _, k := range keys {
		resp, err := cl.Put(ctxFor(t), prefix+k, "v")
		if err != nil {
			t.Fatalf("Put(%s) = %v", prefix+k, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// status returns the cluster ID and current revision behind cl.
func status(t *testing.T, cl *clientv3.Client) (uint64, int64) {
	t.Helper()
	resp, err := cl.Get(ctxFor(t), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get() = %v", err)
	}
	return resp.Header.ClusterId, resp.Header.Revision
}

// handleAll runs a stream over prefix from its start until it handled n
// events, and returns its cursor.
func handleAll(t *testing.T, cl *clientv3.Client, prefix string, n int) etcd.Cursor {
	t.Helper()
	store := cursor.NewMemory(etcd.Cursor{})
	r, _ := newCounted(t, cl, prefix, store, false, stream.Hooks[etcd.Cursor]{})
	handled := 0
	if err := r.Run(ctxFor(t), func(context.Context, etcd.Event) error {
		if handled++; handled == n {
			return stream.ErrStop
		}
		return nil
	}); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	cur, _ := store.Load(context.Background())
	if cur.Cluster == 0 {
		t.Fatalf("cursor %+v has no cluster ID", cur)
	}
	return cur
}

// resyncing is a stream over a prefix with NewResumer's resync, run until
// it handled the key "after", which the test writes once it resynced.
type resyncing struct {
	r        *stream.Resumer[etcd.Event, etcd.Cursor]
	src      *counting
	prefix   string
	ready    chan struct{} // closed once its first connection is open
	resynced chan struct{} // closed at its first resync
	done     chan struct{} // closed when run returned

	// What Run returned and what it handled: the keys of the replay, then
	// those of the changes after it. Read them once run returned.
	err           error
	replay, after []string
}

func newResyncing(t *testing.T, cl *clientv3.Client, prefix string, cur etcd.Cursor) *resyncing {
	t.Helper()
	s := &resyncing{prefix: prefix, ready: make(chan struct{}), resynced: make(chan struct{}), done: make(chan struct{})}
	var connected, resynced sync.Once
	s.r, s.src = newCounted(t, cl, prefix, cursor.NewMemory(cur), true, stream.Hooks[etcd.Cursor]{
		OnConnect: func(stream.ConnectEvent[etcd.Cursor]) { connected.Do(func() { close(s.ready) }) },
		OnResync:  func(stream.ResyncEvent[etcd.Cursor]) { resynced.Do(func() { close(s.resynced) }) },
	})
	return s
}

func (s *resyncing) run(ctx context.Context) {
	inReplay := false
	s.err = s.r.Run(ctx, func(ctx context.Context, ev etcd.Event) error {
		key := strings.TrimPrefix(string(ev.Key), s.prefix)
		switch {
		case ev.ResyncStart:
			inReplay = true
		case ev.ResyncEnd:
			inReplay = false
		case inReplay:
			s.replay = append(s.replay, key)
		default:
			s.after = append(s.after, key)
			if key == "after" {
				return stream.ErrStop
			}
		}
		return nil
	})
}

// start runs s in a goroutine until it handled "after", which it writes
// through cl once s resynced; wait returns when s's Run did.
func (s *resyncing) start(t *testing.T, cl *clientv3.Client) (wait func()) {
	t.Helper()
	ctx := ctxFor(t)
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
	return func() {
		t.Helper()
		select {
		case <-s.resynced:
			putAll(t, cl, s.prefix, "after")
		case <-s.done:
		}
		<-s.done
	}
}

// checkStopsAtFirstOpen checks that a stream resuming after cur, without a
// resync hook, stops at its first Open with ErrSourceChanged, having
// handled nothing.
func checkStopsAtFirstOpen(t *testing.T, cl *clientv3.Client, prefix string, cur etcd.Cursor, wantMsg string) {
	t.Helper()
	r, src := newCounted(t, cl, prefix, cursor.NewMemory(cur), false, stream.Hooks[etcd.Cursor]{})
	handled := 0
	err := r.Run(ctxFor(t), func(context.Context, etcd.Event) error {
		handled++
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("Run() after %v = %v, want an error matching %v that says %q", cur, err, stream.ErrSourceChanged, wantMsg)
	}
	if n := src.opens.Load(); handled != 0 || n != 1 {
		t.Errorf("handled %d events in %d Opens, want 0 in 1", handled, n)
	}
	t.Logf("a stream after %v stops at its first Open: %v", cur, err)
}

// checkStoreRefuses checks that a Store that read and wrote the cluster
// before it was replaced refuses both now.
func checkStoreRefuses(t *testing.T, s cursor.Store[etcd.Cursor], cur etcd.Cursor) {
	t.Helper()
	ctx := ctxFor(t)
	if err := s.Save(ctx, cur); !errors.Is(err, stream.ErrSourceChanged) {
		t.Errorf("Store.Save() after the replacement = %v, want %v", err, stream.ErrSourceChanged)
	}
	if _, err := s.Load(ctx); !errors.Is(err, stream.ErrSourceChanged) {
		t.Errorf("Store.Load() after the replacement = %v, want %v", err, stream.ErrSourceChanged)
	}
}

// savedStore returns a Store at key that read the cluster and wrote cur.
func savedStore(t *testing.T, cl *clientv3.Client, key string, cur etcd.Cursor) cursor.Store[etcd.Cursor] {
	t.Helper()
	s, err := etcd.NewStore(cl, key, cursor.JSON[etcd.Cursor](), etcd.Cursor{})
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	if _, err := s.Load(ctxFor(t)); err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if err := s.Save(ctxFor(t), cur); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	return s
}

// TestIdentityWiped wipes the data directory of a one-member etcd and
// starts a fresh one with the same flags at the same endpoint, under a
// stream whose watch is open: the stream finds out, resyncs from the new
// history and goes on, and everything written to the new etcd is handled.
// A stream started afterwards from a cursor of the old history stops at
// its first Open; a Store that used the old etcd refuses the new one.
func TestIdentityWiped(t *testing.T) {
	c := cluster.Start(t, 1)
	cl := c.Client(t)
	const p = "/wiped/"
	putAll(t, cl, p, names("k", 20)...)
	cur := handleAll(t, cl, p, 20)
	store := savedStore(t, cl, "/wiped-cursor", cur)

	live := newResyncing(t, cl, p, cur)
	wait := live.start(t, cl)
	defer wait()
	select {
	case <-live.ready:
	case <-live.done:
		t.Fatalf("the live stream ended before it connected: %v", live.err)
	}

	c.Kill(t, 0)
	c.Wipe(t, 0)
	c.Restart(t, 0)
	id, rev := status(t, cl)
	if id != cur.Cluster || rev >= cur.Revision {
		t.Fatalf("the fresh etcd is cluster %x at revision %d; the test needs cluster %x below revision %d", id, rev, cur.Cluster, cur.Revision)
	}
	written := names("new", 3)
	putAll(t, cl, p, written...)

	wait()
	if live.err != nil {
		t.Fatalf("the live stream's Run() = %v", live.err)
	}
	handled := append(slices.Clone(live.replay), live.after...)
	for _, k := range append(written, "after") {
		if !slices.Contains(handled, k) {
			t.Errorf("the live stream never handled %s, written to the fresh etcd (replay %v, then %v)", k, live.replay, live.after)
		}
	}
	for _, k := range handled {
		if strings.HasPrefix(k, "k") {
			t.Errorf("the live stream handled %s of the wiped history after the wipe", k)
		}
	}
	st := live.r.Stats()
	if st.Expired != 1 || st.Resyncs != 1 || !errors.Is(st.LastError, stream.ErrSourceChanged) {
		t.Errorf("Stats() expired %d, resyncs %d, last error %v; want 1, 1, %v", st.Expired, st.Resyncs, st.LastError, stream.ErrSourceChanged)
	}
	if n := live.src.opens.Load(); n > 10 {
		t.Errorf("the live stream opened %d times across the wipe, want a few (no spin)", n)
	}
	t.Logf("live stream: %d opens, %d retried; replayed %v, then %v; %v", live.src.opens.Load(), st.Retried, live.replay, live.after, st.LastError)

	checkStopsAtFirstOpen(t, cl, p, cur, fmt.Sprintf("the revision went back from %d to", cur.Revision))
	checkStoreRefuses(t, store, cur)
}

// TestIdentityRestored restores a snapshot taken before the last writes
// (etcdutl snapshot restore, with the member's own flags) and writes to the
// restored etcd: a stream resuming after the newer cursor stops at its
// first Open, and with a resync it handles what the restored etcd holds,
// the writes below its cursor's revision included, which a watch from that
// revision would have skipped.
func TestIdentityRestored(t *testing.T) {
	c := cluster.Start(t, 1)
	cl := c.Client(t)
	const p = "/restored/"
	putAll(t, cl, p, names("k", 5)...)
	snap := c.Snapshot(t, 0)
	_, snapRev := status(t, cl)
	putAll(t, cl, p, names("k", 10)[5:]...)
	cur := handleAll(t, cl, p, 10)
	store := savedStore(t, cl, "/restored-cursor", cur)

	c.Kill(t, 0)
	c.Restore(t, 0, snap)
	c.Restart(t, 0)
	id, rev := status(t, cl)
	if id != cur.Cluster || rev != snapRev {
		t.Fatalf("the restored etcd is cluster %x at revision %d; want cluster %x at the snapshot's revision %d", id, rev, cur.Cluster, snapRev)
	}
	written := names("restored", 2)
	if last := putAll(t, cl, p, written...); last >= cur.Revision {
		t.Fatalf("the writes after the restore reached revision %d; the test needs them below the cursor's %d", last, cur.Revision)
	}

	checkStopsAtFirstOpen(t, cl, p, cur, fmt.Sprintf("the revision went back from %d to %d", cur.Revision, snapRev+int64(len(written))))

	got := newResyncing(t, cl, p, cur)
	got.start(t, cl)()
	if got.err != nil {
		t.Fatalf("Run() = %v", got.err)
	}
	want := append(names("k", 5), written...)
	if !slices.Equal(want, got.replay) || !slices.Equal([]string{"after"}, got.after) {
		t.Errorf("handled the replay %v, then %v; want the replay %v, then [after]", got.replay, got.after, want)
	}
	if st := got.r.Stats(); st.Expired != 1 || st.Resyncs != 1 || got.src.opens.Load() != 2 {
		t.Errorf("Stats() expired %d, resyncs %d, with %d Opens; want 1, 1, 2 (the refused one and the one after the resync)", st.Expired, st.Resyncs, got.src.opens.Load())
	}

	checkStoreRefuses(t, store, cur)
}
