package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// runUntil runs r until the handler saw the entry with ID last, and
// returns the IDs handled.
func runUntil(t *testing.T, r *stream.Resumer[redis.Entry, string], last string) []string {
	t.Helper()
	var got []string
	err := r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		if e.ID == last {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	return got
}

func TestSourceResumesAfterCursor(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 10)
	src, err := redis.NewSource(rdb, "s", redis.WithCount(3))
	if err != nil {
		t.Fatal(err)
	}
	store := cursor.NewMemory("")
	r, err := redis.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids[:6], runUntil(t, r, ids[5])); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	more := add(t, rdb, "s", 10, 3)
	src2, _ := redis.NewSource(rdb, "s")
	r2, err := redis.NewResumer(src2, store)
	if err != nil {
		t.Fatal(err)
	}
	want := append(ids[6:], more...)
	if diff := cmp.Diff(want, runUntil(t, r2, more[2])); diff != "" {
		t.Errorf("second run (-want +got):\n%s", diff)
	}
}

// TestSourceWaitsForNewEntries: a reader at the end blocks, then gets an
// entry added afterwards.
func TestSourceWaitsForNewEntries(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 2)
	src, _ := redis.NewSource(rdb, "s", redis.WithBlock(50*time.Millisecond))
	r, _ := redis.NewResumer(src, cursor.NewMemory(ids[1]))
	var id string
	var wg sync.WaitGroup
	wg.Go(func() {
		awaitBlocked(t, rdb, "xread")
		id = add(t, rdb, "s", 2, 1)[0]
	})
	var got []string
	err := r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
		got = append(got, e.ID)
		return stream.ErrStop
	})
	wg.Wait()
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{id}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSourceChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, rdb *goredis.Client)
	}{
		{name: "deleted", change: func(t *testing.T, rdb *goredis.Client) { rdb.Del(context.Background(), "s") }},
		{name: "deleted and added to", change: func(t *testing.T, rdb *goredis.Client) {
			rdb.Del(context.Background(), "s")
			add(t, rdb, "s", 100, 2)
		}},
		{name: "flushed", change: func(t *testing.T, rdb *goredis.Client) { rdb.FlushAll(context.Background()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			ids := add(t, rdb, "s", 0, 5)
			src, _ := redis.NewSource(rdb, "s", redis.WithCount(2), redis.WithBlock(20*time.Millisecond))
			r, _ := redis.NewResumer(src, cursor.NewMemory(""))
			var got []string
			err := r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
				got = append(got, e.ID)
				if e.ID == ids[len(ids)-1] {
					tt.change(t, rdb)
				}
				return nil
			})
			if !errors.Is(err, stream.ErrSourceChanged) {
				t.Fatalf("Run() = %v, want an error matching ErrSourceChanged", err)
			}
			if diff := cmp.Diff(ids, got); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSourceCursorOfAnotherStream: a saved cursor beyond the stream's
// last ID, or for a stream that is missing, is ErrSourceChanged at Open.
func TestSourceCursorOfAnotherStream(t *testing.T) {
	_, rdb := server(t)
	add(t, rdb, "s", 0, 2)
	for _, after := range []string{"99999999999999-0"} {
		src, _ := redis.NewSource(rdb, "s")
		r, _ := redis.NewResumer(src, cursor.NewMemory(after))
		err := r.Run(t.Context(), func(context.Context, redis.Entry) error { return nil })
		if !errors.Is(err, stream.ErrSourceChanged) {
			t.Errorf("Run() after %s = %v, want ErrSourceChanged", after, err)
		}
	}
	src, _ := redis.NewSource(rdb, "missing")
	r, _ := redis.NewResumer(src, cursor.NewMemory("1-0"))
	if err := r.Run(t.Context(), func(context.Context, redis.Entry) error { return nil }); !errors.Is(err, stream.ErrSourceChanged) {
		t.Errorf("Run() on a missing stream = %v, want ErrSourceChanged", err)
	}
}

// TestSourceTrimmedPastCursor: entries after the saved cursor were
// trimmed: Expired, and the resync hook takes over.
func TestSourceTrimmedPastCursor(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 10)
	if err := rdb.XTrimMaxLen(t.Context(), "s", 3).Err(); err != nil {
		t.Fatal(err)
	}
	src, _ := redis.NewSource(rdb, "s")
	r, _ := redis.NewResumer(src, cursor.NewMemory(ids[2]))
	err := r.Run(t.Context(), func(context.Context, redis.Entry) error { return nil })
	if !errors.Is(err, errclass.ErrExpired) || errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Run() = %v, want Expired, not ErrSourceChanged", err)
	}

	var causes []error
	src2, _ := redis.NewSource(rdb, "s")
	r2, _ := redis.NewResumer(src2, cursor.NewMemory(ids[2]), stream.WithResync(func(_ context.Context, cause error, emit func(redis.Entry) error) (string, error) {
		causes = append(causes, cause)
		return ids[6], nil // the resync's own snapshot covers up to here
	}))
	if diff := cmp.Diff(ids[7:], runUntil(t, r2, ids[9])); diff != "" {
		t.Errorf("after the resync (-want +got):\n%s", diff)
	}
	if len(causes) != 1 || !errors.Is(causes[0], errclass.ErrExpired) {
		t.Errorf("resync causes = %v, want one Expired", causes)
	}
}

// TestSourceTrimmedUpToPosition: a reader that caught up knows its
// position's place in the stream, so a trim that removed exactly the
// entries it read is no loss, while one more is.
func TestSourceTrimmedUpToPosition(t *testing.T) {
	for _, tt := range []struct {
		name    string
		added   int // entries added after the reader stopped
		maxlen  int64
		expired bool
	}{
		{name: "exactly up to the cursor", added: 3, maxlen: 3},
		{name: "one past the cursor", added: 3, maxlen: 2, expired: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			add(t, rdb, "s", 0, 4)
			src, _ := redis.NewSource(rdb, "s", redis.WithBlock(20*time.Millisecond))
			r, _ := redis.NewResumer(src, cursor.NewMemory(""))
			var wg sync.WaitGroup
			n := 0
			err := r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
				n++
				switch n {
				case 4:
					// Caught up: once the reader blocks (its read before
					// learned where it stands), add one more.
					wg.Go(func() {
						awaitBlocked(t, rdb, "xread")
						add(t, rdb, "s", 4, 1)
					})
				case 5:
					return stream.ErrStop
				}
				return nil
			})
			wg.Wait()
			if err != nil {
				t.Fatalf("Run() = %v", err)
			}
			var more []string
			for i := range tt.added {
				id, err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", MaxLen: tt.maxlen, Values: []string{"n", fmt.Sprint(i)}}).Result()
				if err != nil {
					t.Fatal(err)
				}
				more = append(more, id)
			}
			var got []string
			err = r.Run(t.Context(), func(_ context.Context, e redis.Entry) error {
				got = append(got, e.ID)
				if e.ID == more[len(more)-1] {
					return stream.ErrStop
				}
				return nil
			})
			if tt.expired {
				if !errors.Is(err, errclass.ErrExpired) {
					t.Errorf("Run() = %v, want Expired", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(more, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// awaitBlocked waits until a client of the server is blocked in cmd.
func awaitBlocked(t *testing.T, rdb *goredis.Client, cmd string) {
	awaitBlockedN(t, rdb, cmd, 1)
}

// awaitBlockedN waits until n clients of the server are blocked in cmd.
func awaitBlockedN(t *testing.T, rdb *goredis.Client, cmd string, n int) {
	end := time.Now().Add(redistest.Timeout)
	for time.Now().Before(end) {
		list, err := rdb.ClientList(context.Background()).Result()
		if err != nil {
			t.Error(err)
			return
		}
		blocked := 0
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " cmd="+cmd+" ") && strings.Contains(line, " flags=b ") {
				blocked++
			}
		}
		if blocked >= n {
			return
		}
		time.Sleep(time.Millisecond) // polling the server's state, bounded
	}
	t.Errorf("fewer than %d clients blocked in %s after %v", n, cmd, redistest.Timeout)
}

// TestStopEndsBlockingRead: a reader blocked in XREAD or XREADGROUP with
// a block time of ten minutes returns as soon as its context ends (its
// socket closed), not when the block time runs out; then the same client reads
// again, the connection of the blocked read given back.
func TestStopEndsBlockingRead(t *testing.T) {
	for _, cmd := range []string{"xread", "xreadgroup"} {
		t.Run(cmd, func(t *testing.T) {
			_, rdb := server(t)
			add(t, rdb, "s", 0, 1)
			var r *stream.Resumer[redis.Entry, string]
			if cmd == "xread" {
				src, err := redis.NewSource(rdb, "s", redis.WithBlock(10*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				r, _ = redis.NewResumer(src, cursor.NewMemory(""))
			} else {
				r, _ = redis.NewGroupResumer(newGroup(t, rdb, "c", redis.WithBlock(10*time.Minute)))
			}
			// Rounds 0–2 end the context once the read blocks; the others
			// at once, so that it may end before the read reaches the
			// server (the unblocking must wait for it) or before it starts.
			for round := range 20 {
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() {
					done <- r.Run(ctx, func(context.Context, redis.Entry) error { return nil })
				}()
				if round < 3 {
					awaitBlocked(t, rdb, cmd)
				}
				cancel()
				guard := time.NewTimer(redistest.Timeout) // a hang ends here, not after the block time
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) && (round < 3 || err != nil) {
						t.Fatalf("round %d: Run() = %v, want context.Canceled", round, err)
					}
				case <-guard.C:
					t.Fatalf("round %d: Run() still blocked %v after its context ended", round, redistest.Timeout)
				}
				guard.Stop()
			}
			if st := rdb.PoolStats(); st.TotalConns > 4 {
				t.Errorf("the client's pool holds %d connections after 20 runs, want the blocked reads' given back", st.TotalConns)
			}
		})
	}
}

// TestNextCount: without WithCount, a Source's reads double through a
// backlog up to 1,000 entries, as many as fit in 1 MiB (each taken as large
// as the largest of those it looks at) but never below 100, and go back to
// 100 once a read comes back short.
func TestNextCount(t *testing.T) {
	sizes := func(n, size int) []int { return slices.Repeat([]int{size}, n) }
	tests := []struct {
		name  string
		count int64
		sizes []int
		want  int64
	}{
		{name: "short read", count: 400, sizes: sizes(399, 10), want: 100},
		{name: "nothing read", count: 100, sizes: nil, want: 100},
		{name: "full read", count: 100, sizes: sizes(100, 10), want: 200},
		{name: "full read near the bound", count: 800, sizes: sizes(800, 10), want: 1000},
		{name: "full read at the bound", count: 1000, sizes: sizes(1000, 10), want: 1000},
		// 1 MiB holds 255 entries of 4 KiB and 15+1+4096 bytes.
		{name: "4 KiB entries", count: 200, sizes: sizes(200, 4<<10), want: 255},
		{name: "entries grew", count: 800, sizes: sizes(800, 20<<10), want: 100},
		{name: "100 KiB entries", count: 100, sizes: sizes(100, 100<<10), want: 100},
		{name: "a large entry last", count: 400, sizes: append(sizes(399, 10), 100<<10), want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redis.NextCount(tt.count, tt.sizes); got != tt.want {
				t.Errorf("NextCount(%d, %d entries) = %d, want %d", tt.count, len(tt.sizes), got, tt.want)
			}
		})
	}
}

// TestSourceReadsGrowThroughBacklog: a Source without WithCount reads a
// backlog of 3,000 small entries in 6 reads (100, 200, 400, 800, 1,000,
// 1,000); with WithCount(100) in 30.
func TestSourceReadsGrowThroughBacklog(t *testing.T) {
	tests := []struct {
		name  string
		opts  []redis.Option
		reads int
	}{
		{name: "default", reads: 7}, // 1, 100, 200, 400, 800, 1000, 499
		{name: "WithCount(100)", opts: []redis.Option{redis.WithCount(100)}, reads: 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rdb := server(t)
			ids := addMany(t, rdb, "s", 3000)
			src, _ := redis.NewSource(rdb, "s", tt.opts...)
			r, _ := redis.NewResumer(src, cursor.NewMemory(""))
			got := runUntil(t, r, ids[len(ids)-1])
			if diff := cmp.Diff(ids, got); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
			if st := commandStat(t, rdb, "xread"); st.calls != tt.reads {
				t.Errorf("XREAD %+v, want %d calls", st, tt.reads)
			}
		})
	}
}

// addMany appends n small entries to key in one pipeline and returns their
// IDs.
func addMany(t *testing.T, rdb *goredis.Client, key string, n int) []string {
	t.Helper()
	cmds := make([]*goredis.StringCmd, n)
	_, err := rdb.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.XAdd(t.Context(), &goredis.XAddArgs{Stream: key, Values: []string{"n", fmt.Sprint(i)}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids
}

// NewResumer saves at most once an interval (100ms), and at Run's end:
// never once an entry by default (a cursor.File would fsync each), and
// once an entry when asked (stream.WithCheckpointEvery(1) with
// stream.WithCheckpointInterval(0)).
func TestNewResumerSavesByInterval(t *testing.T) {
	_, rdb := server(t)
	const n = 2000
	_, err := rdb.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
		for i := range n {
			p.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", Values: []string{"n", fmt.Sprint(i)}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last, err := rdb.XRevRangeN(t.Context(), "s", "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("XREVRANGE = %v, %v", last, err)
	}
	for _, c := range []struct {
		name    string
		opts    []stream.Option
		perSave bool
	}{
		{name: "default"},
		{name: "every entry", opts: []stream.Option{stream.WithCheckpointEvery(1), stream.WithCheckpointInterval(0)}, perSave: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := redis.NewSource(rdb, "s")
			if err != nil {
				t.Fatal(err)
			}
			var saves atomic.Int64
			hooks := stream.WithHooks(stream.Hooks[string]{OnSave: func(stream.SaveEvent[string]) { saves.Add(1) }})
			store := cursor.NewMemory("")
			r, err := redis.NewResumer(src, store, append(c.opts, hooks)...)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if got := len(runUntil(t, r, last[0].ID)); got != n {
				t.Fatalf("handled %d entries, want %d", got, n)
			}
			took := time.Since(start)
			if got, _ := store.Load(t.Context()); got != last[0].ID {
				t.Errorf("Store holds %q after Run, want the last entry %q", got, last[0].ID)
			}
			// By interval: one save at most each 100ms of the run, and the
			// final one.
			most := int64(took/(100*time.Millisecond)) + 1
			switch got := saves.Load(); {
			case c.perSave && got != n:
				t.Errorf("saves = %d, want %d (one an entry)", got, n)
			case !c.perSave && got > most:
				t.Errorf("saves = %d in %v, want at most %d (one each 100ms, and the final one)", got, took, most)
			}
		})
	}
}
