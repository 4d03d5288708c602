package redis_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
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

// TestSourceReplacedUnderBlockedRead: a reader that caught up is blocked
// in XREAD when the stream is replaced: ErrSourceChanged before any entry
// of the new stream is handed over.
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
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			ids := add(t, rdb, "s", 0, 3)
			src, _ := redis.NewSource(rdb, "s")
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
						tt.replace(t, rdb)
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
		})
	}
}

// TestSourceRestartedOnRecreatedStream: a reader restarted with a saved
// cursor finds a stream recreated and longer, from which nothing was ever
// removed (entries-added equals the length): its cursor was never an
// entry of it, so ErrSourceChanged, not Expired.
func TestSourceRestartedOnRecreatedStream(t *testing.T) {
	_, rdb := server(t)
	// The old stream's IDs are explicit, so that the new one (IDs of now)
	// cannot hold the cursor's ID by chance.
	for _, id := range []string{"1-1", "1-2", "1-3"} {
		if err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Del(t.Context(), "s")
	add(t, rdb, "s", 10, 10)
	src, _ := redis.NewSource(rdb, "s")
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
