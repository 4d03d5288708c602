package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// multi runs cmds in one MULTI/EXEC.
func multi(t *testing.T, rdb *goredis.Client, cmds func(p goredis.Pipeliner)) {
	t.Helper()
	if _, err := rdb.TxPipelined(context.Background(), func(p goredis.Pipeliner) error {
		cmds(p)
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// xadds queues n XADDs to s.
func xadds(p goredis.Pipeliner, n int) {
	for i := range n {
		p.XAdd(context.Background(), &goredis.XAddArgs{Stream: "s", Values: []any{"new", i}})
	}
}

// A way is how a Source reads the stream's identity: the script (EVALSHA),
// XINFO STREAM itself after the script's first look found the stream's
// first and last entries small, or XINFO STREAM where the server refuses
// scripts. Each way's client logs in as a user of its own, tune (when not
// nil) sets up the Source; check fails the test unless the way was taken.
type way struct {
	name   string
	client func(t *testing.T, srv *redistest.Server) *goredis.Client
	tune   func(src *redis.Source)
	check  func(t *testing.T, admin *goredis.Client)
}

// source returns a Source over s of reader, set up for w.
func (w way) source(reader *goredis.Client, opts ...redis.Option) *redis.Source {
	src, _ := redis.NewSource(reader, "s", opts...)
	if w.tune != nil {
		w.tune(src)
	}
	return src
}

var (
	scriptWay = way{name: "script", client: func(t *testing.T, srv *redistest.Server) *goredis.Client {
		return userClient(t, srv, "+@all")
	}, tune: redis.UseScript, check: checkScriptOnly}
	smallWay = way{name: "small entries", client: func(t *testing.T, srv *redistest.Server) *goredis.Client {
		return userClient(t, srv, "+@all")
	}, check: checkScriptThenXInfo}
	refusedWay = way{name: "xinfo", client: func(t *testing.T, srv *redistest.Server) *goredis.Client {
		return userClient(t, srv, "+@all", "-eval", "-evalsha")
	}, check: func(t *testing.T, admin *goredis.Client) {
		if st := commandStat(t, admin, "evalsha"); st.rejected == 0 {
			t.Errorf("EVALSHA %+v, want a call refused", st)
		}
		if st := commandStat(t, admin, "xinfo|stream"); st.calls == 0 {
			t.Errorf("XINFO STREAM %+v, want calls", st)
		}
	}}
	ways = []way{scriptWay, smallWay, refusedWay}
)

// scriptRuns returns how many times the Source's script ran, and the
// calls of XINFO STREAM (the script's included).
func scriptRuns(t *testing.T, admin *goredis.Client) (ran, xinfo int) {
	stats := commandStats(t, admin)
	sha, eval, x := stats["evalsha"], stats["eval"], stats["xinfo|stream"]
	return sha.calls - sha.failed + eval.calls - eval.failed, x.calls // NOSCRIPT fails before the script runs
}

// checkScriptOnly fails t unless the script ran, and no XINFO STREAM of
// its own.
func checkScriptOnly(t *testing.T, admin *goredis.Client) {
	if ran, xinfo := scriptRuns(t, admin); ran == 0 || xinfo != ran {
		t.Errorf("scripts run %d, XINFO STREAM %d: want scripts run, each calling XINFO STREAM once, and no XINFO STREAM of its own", ran, xinfo)
	}
}

// checkScriptThenXInfo fails t unless the script ran (the first look),
// then XINFO STREAM of its own.
func checkScriptThenXInfo(t *testing.T, admin *goredis.Client) {
	if ran, xinfo := scriptRuns(t, admin); ran == 0 || xinfo <= ran {
		t.Errorf("scripts run %d, XINFO STREAM %d: want the script run, then XINFO STREAM of its own", ran, xinfo)
	}
}

// userClient returns a client of srv that logs in as a new user with the
// ACL rules rules, closed when t ends.
func userClient(t *testing.T, srv *redistest.Server, rules ...string) *goredis.Client {
	t.Helper()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer admin.Close()
	args := []any{"ACL", "SETUSER", "reader", "reset", "on", ">secret", "~*", "&*"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := admin.Do(t.Context(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr, Username: "reader", Password: "secret"})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// stat is a line of INFO COMMANDSTATS.
type stat struct{ calls, failed, rejected int }

// commandStat returns the server's counts for cmd ("evalsha",
// "xinfo|stream").
func commandStat(t *testing.T, rdb *goredis.Client, cmd string) stat {
	t.Helper()
	return commandStats(t, rdb)[cmd]
}

// commandStats returns every command's stat from one INFO commandstats,
// by name: counts taken together, while a reader may be reading.
func commandStats(t *testing.T, rdb *goredis.Client) map[string]stat {
	t.Helper()
	text, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := make(map[string]stat)
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, rest, _ := strings.Cut(rest, ":")
		var st stat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "calls":
				st.calls = n
			case "failed_calls":
				st.failed = n
			case "rejected_calls":
				st.rejected = n
			}
		}
		stats[cmd] = st
	}
	return stats
}

// TestSourceReplacedUnderBlockedRead: a reader that caught up is blocked
// in XREAD when the stream is replaced: ErrSourceChanged before any entry
// of the new stream is handed over, whichever way the reader reads the
// stream's identity.
func TestSourceReplacedUnderBlockedRead(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, rdb *goredis.Client)
	}{
		{name: "DEL and 10 XADD in one MULTI", replace: func(t *testing.T, rdb *goredis.Client) {
			multi(t, rdb, func(p goredis.Pipeliner) {
				p.Del(context.Background(), "s")
				xadds(p, 10)
			})
		}},
		{name: "DEL then XADD", replace: func(t *testing.T, rdb *goredis.Client) {
			rdb.Del(context.Background(), "s")
			add(t, rdb, "s", 100, 1)
		}},
	}
	for _, tt := range tests {
		for _, w := range ways {
			t.Run(tt.name+"/"+w.name, func(t *testing.T) {
				srv, rdb := server(t)
				sourceReplacedUnderBlockedRead(t, rdb, w.source(w.client(t, srv)), tt.replace)
				w.check(t, rdb)
			})
		}
	}
}

// sourceReplacedUnderBlockedRead is TestSourceReplacedUnderBlockedRead
// with src, a Source over s.
func sourceReplacedUnderBlockedRead(t *testing.T, rdb *goredis.Client, src *redis.Source, replace func(t *testing.T, rdb *goredis.Client)) {
	ids := add(t, rdb, "s", 0, 3)
	store := cursor.NewMemory("")
	r, _ := redis.NewResumer(src, store)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err := r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		if e.ID == ids[2] {
			wg.Go(func() {
				awaitBlocked(t, rdb, "xread")
				replace(t, rdb)
			})
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want ErrSourceChanged", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if c, _ := store.Load(t.Context()); c != ids[2] {
		t.Errorf("cursor saved = %s, want %s", c, ids[2])
	}
}

// TestSourceScriptFlushed: the server's script cache is emptied (SCRIPT
// FLUSH, as a restart does) under a reader: it reads on (EVALSHA fails
// with NOSCRIPT, EVAL loads the script), and still catches a replacement.
func TestSourceScriptFlushed(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 3)
	src := scriptWay.source(rdb, redis.WithCount(1))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err := r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		switch e.ID {
		case ids[0]:
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Error(err)
			}
		case ids[2]:
			wg.Go(func() {
				awaitBlocked(t, rdb, "xread")
				multi(t, rdb, func(p goredis.Pipeliner) {
					p.Del(context.Background(), "s")
					xadds(p, 10)
				})
			})
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want ErrSourceChanged", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	// The script is loaded at the first read, and again after the flush.
	if st := commandStat(t, rdb, "evalsha"); st.failed != 2 {
		t.Errorf("EVALSHA %+v, want 2 calls failed (NOSCRIPT)", st)
	}
	if st := commandStat(t, rdb, "eval"); st.calls != 2 {
		t.Errorf("EVAL %+v, want 2 calls", st)
	}
}

// TestSourceIdentityByEntrySize: a Source looks at the stream's identity
// with its script while the stream's first or last entries are large
// (XINFO STREAM would send them whole with every read), and with XINFO
// STREAM itself once they are small.
func TestSourceIdentityByEntrySize(t *testing.T) {
	_, rdb := server(t)
	large, err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", Values: []string{"n", strings.Repeat("x", 8<<10)}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := append([]string{large}, add(t, rdb, "s", 0, 4)...)
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(1))
	redis.NoAnchor(src) // every read with the full look, whose way is tested
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err = r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		switch e.ID {
		case ids[2]:
			checkScriptOnly(t, rdb)
			// The large entry goes: the next look finds small ones.
			if err := rdb.XTrimMinID(ctx, "s", ids[2]).Err(); err != nil {
				t.Error(err)
			}
		case ids[4]:
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	checkScriptThenXInfo(t, rdb)
}

// TestSourceRestartedOnRecreatedStream: a reader restarted with a saved
// cursor finds a stream recreated and longer, from which nothing was ever
// removed (entries-added equals the length): its cursor was never an
// entry of it, so ErrSourceChanged, not Expired. (Open's look is a
// fresh Source's first: the script, or XINFO STREAM where it is refused.)
func TestSourceRestartedOnRecreatedStream(t *testing.T) {
	for _, w := range []way{scriptWay, refusedWay} {
		t.Run(w.name, func(t *testing.T) {
			srv, rdb := server(t)
			sourceRestartedOnRecreatedStream(t, rdb, w.source(w.client(t, srv)))
			w.check(t, rdb)
		})
	}
}

// sourceRestartedOnRecreatedStream is TestSourceRestartedOnRecreatedStream
// with src, a Source over s.
func sourceRestartedOnRecreatedStream(t *testing.T, rdb *goredis.Client, src *redis.Source) {
	// The old stream's IDs are explicit, so that the new one (IDs of now)
	// cannot hold the cursor's ID by chance.
	for _, id := range []string{"1-1", "1-2", "1-3"} {
		if err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Del(t.Context(), "s")
	add(t, rdb, "s", 10, 10)
	r, _ := redis.NewResumer(src, cursor.NewMemory("1-3"))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	err := r.Run(ctx, func(context.Context, redis.Entry) error { return nil })
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want ErrSourceChanged", err)
	}
}

// TestGroupReplacedUnderBlockedRead: a consumer that caught up is blocked
// in XREADGROUP when the group or the stream is replaced in one MULTI,
// and Redis serves the blocked read from the new one: ErrSourceChanged
// before any of it is handed over.
func TestGroupReplacedUnderBlockedRead(t *testing.T) {
	tests := []struct {
		name    string
		replace func(p goredis.Pipeliner)
	}{
		{name: "group destroyed and created at $", replace: func(p goredis.Pipeliner) {
			p.XGroupDestroy(context.Background(), "s", "g")
			p.XGroupCreate(context.Background(), "s", "g", "$")
			xadds(p, 1)
		}},
		{name: "stream deleted, group created with MKSTREAM, 10 added", replace: func(p goredis.Pipeliner) {
			p.Del(context.Background(), "s")
			p.XGroupCreateMkStream(context.Background(), "s", "g", "0")
			xadds(p, 10)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			ctx := t.Context()
			rdb.XGroupCreateMkStream(ctx, "s", "g", "0")
			add(t, rdb, "s", 0, 3)
			// A dead consumer holds 3 entries.
			if err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "dead", Streams: []string{"s", ">"}, Count: 3, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			ids := add(t, rdb, "s", 3, 3)
			g := newGroup(t, rdb, "c1")
			var wg sync.WaitGroup
			defer wg.Wait()
			r, err := redis.NewGroupResumer(g)
			if err != nil {
				t.Fatal(err)
			}
			gctx, cancel := context.WithTimeout(ctx, guard)
			defer cancel()
			var got []string
			err = r.Run(gctx, g.Handler(func(_ context.Context, e redis.Entry) error {
				got = append(got, e.ID)
				if e.ID == ids[2] {
					wg.Go(func() {
						awaitBlocked(t, rdb, "xreadgroup")
						multi(t, rdb, tt.replace)
					})
				}
				return nil
			}))
			if !errors.Is(err, stream.ErrSourceChanged) {
				t.Fatalf("Run() = %v, want ErrSourceChanged", err)
			}
			if diff := cmp.Diff(ids, got); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupRefusesSecondLiveConsumer: a second process (here a second
// client) running a consumer name that a live one runs is refused at
// Open; once the first stopped, the name is free again.
func TestGroupRefusesSecondLiveConsumer(t *testing.T) {
	srv, rdb := server(t)
	add(t, rdb, "s", 0, 1)
	first := newGroup(t, rdb, "c1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r1, _ := redis.NewGroupResumer(first)
	done := make(chan error, 1)
	handled := make(chan struct{})
	go func() {
		done <- r1.Run(ctx, first.Handler(func(context.Context, redis.Entry) error {
			close(handled)
			return nil
		}))
	}()
	<-handled

	other := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer other.Close()
	second := newGroup(t, other, "c1")
	r2, _ := redis.NewGroupResumer(second)
	gctx, gcancel := context.WithTimeout(t.Context(), guard)
	defer gcancel()
	err := r2.Run(gctx, second.Handler(func(context.Context, redis.Entry) error { return nil }))
	if !errors.Is(err, redis.ErrConsumerInUse) {
		t.Errorf("second Run() = %v, want ErrConsumerInUse", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("first Run() = %v, want context.Canceled", err)
	}
	third := newGroup(t, other, "c1")
	add(t, rdb, "s", 1, 1)
	if _, err := handleUntil(t, third, 1, nil); err != nil {
		t.Errorf("Run() after the first stopped = %v, want nil", err)
	}
}

// TestSourceOnRing: a Source on a Ring (its script, XINFO STREAM and reads
// go through the Ring's pipelines, its blocking reads through the Ring
// itself) reads the stream and catches its replacement.
func TestSourceOnRing(t *testing.T) {
	srv, rdb := server(t)
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	defer ring.Close()
	ids := add(t, rdb, "s", 0, 5)
	src, err := redis.NewSource(ring, "s", redis.WithCount(2), redis.WithBlock(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err = r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		if e.ID == ids[len(ids)-1] {
			rdb.Del(context.Background(), "s")
			add(t, rdb, "s", 100, 2)
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want ErrSourceChanged", err)
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	smallWay.check(t, rdb)
}
