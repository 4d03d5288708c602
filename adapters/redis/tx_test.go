package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// ev is an event of the handler tests: its cursor is n.
type ev struct{ n int64 }

func evCursor(e ev) (int64, error) { return e.n, nil }

// copyTo returns an fn that queues an XADD of the event's n to the stream
// out, counting its calls in calls.
func copyTo(out string, calls *int) func(context.Context, goredis.Pipeliner, ev) error {
	return func(ctx context.Context, p goredis.Pipeliner, e ev) error {
		*calls++
		p.XAdd(ctx, &goredis.XAddArgs{Stream: out, Values: []string{"n", strconv.FormatInt(e.n, 10)}})
		return nil
	}
}

// ns returns the field n of every entry of the stream key.
func ns(t *testing.T, rdb goredis.UniversalClient, key string) []string {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, m := range msgs {
		got = append(got, m.Values["n"].(string))
	}
	return got
}

// loadedStore returns an int64 Store of the key "cur", loaded.
func loadedStore(t *testing.T, rdb goredis.UniversalClient) *redis.Store[int64] {
	t.Helper()
	s, err := redis.NewStore(rdb, "cur", cursor.Int64(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// storedCursor returns the cursor a new Store of "cur" loads (it takes
// the key over).
func storedCursor(t *testing.T, rdb goredis.UniversalClient) int64 {
	t.Helper()
	s, err := redis.NewStore(rdb, "cur", cursor.Int64(), 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTransactionalCommit: each call writes the event's commands and its
// cursor; the Resumer's Save of that cursor afterwards sends nothing.
func TestTransactionalCommit(t *testing.T) {
	_, rdb := server(t)
	ctx := t.Context()
	s := loadedStore(t, rdb)
	if s.CommitsInHandler() {
		t.Fatal("CommitsInHandler() before Transactional = true")
	}
	var calls int
	h := redis.Transactional(s, evCursor, copyTo("out", &calls))
	if !s.CommitsInHandler() {
		t.Fatal("CommitsInHandler() after Transactional = false")
	}
	for n := int64(1); n <= 3; n++ {
		if err := h(ctx, ev{n}); err != nil {
			t.Fatalf("handler(%d) = %v", n, err)
		}
	}
	var cnt counter
	rdb.AddHook(&cnt)
	if err := s.Save(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n := cnt.n.Load(); n != 0 {
		t.Errorf("Save of the committed cursor sent %d commands, want 0", n)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if c := storedCursor(t, rdb); c != 3 {
		t.Errorf("stored cursor = %d, want 3", c)
	}
}

// TestTransactionalFnError: an fn that fails sends nothing: no effect, no
// cursor.
func TestTransactionalFnError(t *testing.T) {
	_, rdb := server(t)
	boom := errors.New("boom")
	h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", "1"}})
		return boom
	})
	if err := h(t.Context(), ev{1}); !errors.Is(err, boom) {
		t.Fatalf("handler = %v, want %v", err, boom)
	}
	if got := ns(t, rdb, "out"); len(got) != 0 {
		t.Errorf("out = %v, want nothing", got)
	}
	if c := storedCursor(t, rdb); c != 0 {
		t.Errorf("stored cursor = %d, want 0", c)
	}
}

// TestTransactionalFencedAtCheck: a predecessor whose successor loaded
// the key does not call fn and writes nothing.
func TestTransactionalFencedAtCheck(t *testing.T) {
	_, rdb := server(t)
	var calls int
	h := redis.Transactional(loadedStore(t, rdb), evCursor, copyTo("out", &calls))
	if err := h(t.Context(), ev{1}); err != nil {
		t.Fatal(err)
	}
	loadedStore(t, rdb) // the successor
	wantChanged(t, "predecessor's handler", h(t.Context(), ev{2}))
	if calls != 1 {
		t.Errorf("fn called %d times, want 1 (not after the successor loaded)", calls)
	}
	if diff := cmp.Diff([]string{"1"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if c := storedCursor(t, rdb); c != 1 {
		t.Errorf("stored cursor = %d, want 1", c)
	}
}

// clients returns the kinds of client a test runs on, all of srv: a
// *Client (the WATCH pipelined with the ownership check) and a one-shard
// Ring (go-redis's Watch of the key, as on a ClusterClient).
func clients(t *testing.T, srv *redistest.Server) map[string]goredis.UniversalClient {
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	cl := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = ring.Close(); _ = cl.Close() })
	return map[string]goredis.UniversalClient{"Client": cl, "Ring": ring}
}

// TestTransactionalFencedInFlight: the successor loads while the
// predecessor's fn runs (its ownership already checked): the
// predecessor's EXEC is refused, and nothing of it is written.
func TestTransactionalFencedInFlight(t *testing.T) {
	srv, _ := server(t)
	for name, rdb := range clients(t, srv) {
		t.Run(name, func(t *testing.T) {
			rdb.FlushAll(t.Context())
			var successor *redis.Store[int64]
			h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
				successor = loadedStore(t, rdb)
				p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", "1"}})
				p.Set(ctx, "effect", "1", 0)
				return nil
			})
			wantChanged(t, "predecessor's handler", h(t.Context(), ev{1}))
			if successor == nil {
				t.Fatal("fn was not called: the fault did not fire")
			}
			if got := ns(t, rdb, "out"); len(got) != 0 {
				t.Errorf("out = %v, want nothing", got)
			}
			if n := rdb.Exists(t.Context(), "effect").Val(); n != 0 {
				t.Errorf("EXISTS effect = %d, want 0", n)
			}
			var calls int
			if err := redis.Transactional(successor, evCursor, copyTo("out", &calls))(t.Context(), ev{1}); err != nil {
				t.Fatalf("successor's handler = %v", err)
			}
			if diff := cmp.Diff([]string{"1"}, ns(t, rdb, "out")); diff != "" {
				t.Errorf("out (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTransactionalLeavesNoWatch: a transaction that ends before its
// EXEC (fn failed, the Store was fenced out, the event was committed
// already) leaves no WATCH on the connection it gives back to the pool,
// where a touch of the key would make the next EXEC on it fail: here the
// next event's, whose fn would then be called twice (checked by taking
// the UNWATCH out: fn called 3 times).
func TestTransactionalLeavesNoWatch(t *testing.T) {
	srv, other := server(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	boom := errors.New("boom")
	var calls int
	h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
		calls++
		if e.n == 1 {
			return boom
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		n    int64
	}{{name: "fn failed", n: 1}, {name: "committed already", n: 2}, {name: "fenced out", n: 3}} {
		t.Run(tc.name, func(t *testing.T) {
			switch tc.n {
			case 2:
				if err := h(t.Context(), ev{2}); err != nil {
					t.Fatal(err)
				}
			case 3:
				loadedStore(t, other)
			}
			h(t.Context(), ev{tc.n})
			other.HSet(t.Context(), "cur", "touched", tc.n) // would fire a WATCH left behind
			_, err := rdb.TxPipelined(t.Context(), func(p goredis.Pipeliner) error {
				p.Set(t.Context(), "k", tc.name, 0)
				return nil
			})
			if got := other.Get(t.Context(), "k").Val(); err != nil || got != tc.name {
				t.Fatalf("the user's MULTI/EXEC after the handler = %v, and k = %q, want nil and %q", err, got, tc.name)
			}
		})
	}
	if calls != 2 {
		t.Errorf("fn called %d times, want 2 (events 1 and 2, once each)", calls)
	}
}

// TestTransactionalLostReply: the reply to EXEC is lost after Redis ran
// it. The handler fails (the stream retries it); called again with the
// same event it finds the cursor written and does not call fn again.
func TestTransactionalLostReply(t *testing.T) {
	srv, rdb := server(t)
	px := redistest.NewProxy(t, srv)
	via := goredis.NewClient(&goredis.Options{Addr: px.Addr, MaxRetries: 3})
	t.Cleanup(func() { _ = via.Close() })
	var calls int
	h := redis.Transactional(loadedStore(t, via), evCursor, copyTo("out", &calls))
	fired := px.CutReply("\r\nexec\r\n")
	err := h(t.Context(), ev{1})
	select { // the proxy closes the connection just before it reports the cut
	case <-fired:
	case <-time.After(redistest.Timeout):
		t.Fatalf("the EXEC reply was not cut; handler = %v", err)
	}
	if err == nil || permanent(err) {
		t.Fatalf("handler with its EXEC reply lost = %v, want an error the stream retries", err)
	}
	if err := h(t.Context(), ev{1}); err != nil {
		t.Fatalf("handler again = %v", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1", calls)
	}
	if err := h(t.Context(), ev{2}); err != nil {
		t.Fatalf("handler of the next event = %v", err)
	}
	if diff := cmp.Diff([]string{"1", "2"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
}

// TestTransactionalStop: an fn that returns stream.ErrStop has its
// commands executed with the cursor.
func TestTransactionalStop(t *testing.T) {
	_, rdb := server(t)
	h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", "1"}})
		return stream.ErrStop
	})
	if err := h(t.Context(), ev{1}); !errors.Is(err, stream.ErrStop) {
		t.Fatalf("handler = %v, want ErrStop", err)
	}
	if diff := cmp.Diff([]string{"1"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if c := storedCursor(t, rdb); c != 1 {
		t.Errorf("stored cursor = %d, want 1", c)
	}
}

// TestTransactionalCommandFails: Redis has no rollback: a command that
// fails when EXEC runs it leaves the others and the cursor written; the
// handler's error is Permanent, so the stream stops. A command Redis
// refuses when it is queued aborts the whole transaction.
func TestTransactionalCommandFails(t *testing.T) {
	_, rdb := server(t)
	rdb.Set(t.Context(), "str", "x", 0)
	h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", "1"}})
		if e.n == 1 {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: "str", Values: []string{"n", "1"}}) // WRONGTYPE at EXEC
		} else {
			p.Do(ctx, "nosuchcommand") // refused when queued
		}
		return nil
	})
	err := h(t.Context(), ev{1})
	if err == nil || !permanent(err) || !goredis.HasErrorPrefix(errors.Unwrap(errors.Unwrap(err)), "WRONGTYPE") {
		t.Fatalf("handler = %v, want a Permanent WRONGTYPE error", err)
	}
	err = h(t.Context(), ev{2})
	if err == nil || !permanent(err) {
		t.Fatalf("handler = %v, want a Permanent error", err)
	}
	if diff := cmp.Diff([]string{"1"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if c := storedCursor(t, rdb); c != 1 {
		t.Errorf("stored cursor = %d, want 1 (event 1's, written with its other commands)", c)
	}
}

// TestTransactionalExecInFn: an fn that executes or discards the
// pipeline itself is a Permanent error, and nothing is written.
func TestTransactionalExecInFn(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(context.Context, goredis.Pipeliner)
	}{
		{name: "Exec", end: func(ctx context.Context, p goredis.Pipeliner) { p.Exec(ctx) }},
		{name: "Discard", end: func(ctx context.Context, p goredis.Pipeliner) { p.Discard() }},
		{name: "TxPipeline().Exec", end: func(ctx context.Context, p goredis.Pipeliner) { p.TxPipeline().Exec(ctx) }},
		{name: "Pipelined", end: func(ctx context.Context, p goredis.Pipeliner) {
			p.Pipelined(ctx, func(goredis.Pipeliner) error { return nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := server(t)
			h := redis.Transactional(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, e ev) error {
				p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", "1"}})
				tc.end(ctx, p)
				return nil
			})
			if err := h(t.Context(), ev{1}); err == nil || !permanent(err) {
				t.Fatalf("handler = %v, want a Permanent error", err)
			}
			if got := ns(t, rdb, "out"); len(got) != 0 {
				t.Errorf("out = %v, want nothing", got)
			}
		})
	}
}

// TestTransactionalBatch: a batch's commands and the cursor of its last
// event are one MULTI/EXEC; an empty batch sends nothing.
func TestTransactionalBatch(t *testing.T) {
	_, rdb := server(t)
	var calls int
	h := redis.TransactionalBatch(loadedStore(t, rdb), evCursor, func(ctx context.Context, p goredis.Pipeliner, evs []ev) error {
		calls++
		for _, e := range evs {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: []string{"n", strconv.FormatInt(e.n, 10)}})
		}
		return nil
	})
	for _, batch := range [][]ev{{{1}, {2}}, nil, {{3}}} {
		if err := h(t.Context(), batch); err != nil {
			t.Fatalf("handler(%v) = %v", batch, err)
		}
	}
	if calls != 2 {
		t.Errorf("fn called %d times, want 2 (not for the empty batch)", calls)
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	if c := storedCursor(t, rdb); c != 3 {
		t.Errorf("stored cursor = %d, want 3", c)
	}
}

// TestTransactionalResumer copies a stream into another through a
// Resumer, one event per MULTI/EXEC, then through RunBatch; a Resumer
// with WithConcurrency above 1 refuses the Store.
func TestTransactionalResumer(t *testing.T) {
	_, rdb := server(t)
	add(t, rdb, "in", 0, 10)
	src, err := redis.NewSource(rdb, "in")
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t, rdb, "{in}.cursor")
	relay := func(ctx context.Context, p goredis.Pipeliner, e redis.Entry) error {
		p.XAdd(ctx, &goredis.XAddArgs{Stream: "out", Values: e.Values})
		if e.Values["n"] == "9" || e.Values["n"] == "19" {
			return stream.ErrStop
		}
		return nil
	}
	r, err := redis.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(t.Context(), redis.Transactional(store, redis.Extract, relay)); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	add(t, rdb, "in", 10, 10)
	if err := r.RunBatch(t.Context(), redis.TransactionalBatch(store, redis.Extract, func(ctx context.Context, p goredis.Pipeliner, es []redis.Entry) error {
		var err error
		for _, e := range es {
			if err = relay(ctx, p, e); err != nil && !errors.Is(err, stream.ErrStop) {
				return err
			}
		}
		return err
	})); err != nil {
		t.Fatalf("RunBatch() = %v", err)
	}
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint(i))
	}
	if diff := cmp.Diff(want, ns(t, rdb, "out")); diff != "" {
		t.Errorf("out (-want +got):\n%s", diff)
	}
	r2, err := redis.NewResumer(src, store, stream.WithConcurrency(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Run(t.Context(), redis.Transactional(store, redis.Extract, relay)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run() with WithConcurrency(2) = %v, want ErrInvalidOption", err)
	}
}
