package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestSourceAnchoredReads: through a backlog, a read after an entry the
// Source read asks for that entry too instead of looking at the stream's
// identity: 20 reads of 5 entries, and only the first look (Open's) and
// the first read's (no entry read yet) reach XINFO STREAM.
func TestSourceAnchoredReads(t *testing.T) {
	_, rdb := server(t)
	ids := add(t, rdb, "s", 0, 100)
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(5), redis.WithBlock(time.Minute)) // the full look's clock does not run out
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	if diff := cmp.Diff(ids, runUntil(t, r, ids[len(ids)-1])); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	stats := commandStats(t, rdb)
	if looks, reads := stats["xinfo|stream"].calls, stats["xread"].calls; looks != 2 || reads != 20 {
		t.Errorf("XINFO STREAM %d times (the script's included), XREAD %d: want 2 looks (Open, the first read) and 20 reads", looks, reads)
	}
}

// TestSourceAnchorChanged: the entry a reader stands on is there again, in
// a stream replaced in one MULTI, with other fields and values (explicit
// IDs): ErrSourceChanged before the new stream's next entry is handed over.
// The same entry with the same fields and values would pass for the
// stream read so far: a copy, as far as the anchor can tell.
func TestSourceAnchorChanged(t *testing.T) {
	_, rdb := server(t)
	for _, id := range []string{"1-1", "1-2", "1-3", "1-4"} {
		if err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(1))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	var got []string
	err := r.Run(ctx, func(_ context.Context, e redis.Entry) error {
		if got = append(got, e.ID); e.ID == "1-2" {
			multi(t, rdb, func(p goredis.Pipeliner) {
				p.Del(context.Background(), "s")
				for _, id := range []string{"1-2", "1-3", "1-4", "1-5", "1-6"} {
					p.XAdd(context.Background(), &goredis.XAddArgs{Stream: "s", ID: id, Values: []string{"n", "new " + id}})
				}
			})
		}
		return nil
	})
	if !errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "other fields and values") {
		t.Fatalf("Run() = %v, want ErrSourceChanged for the entry 1-2 changed", err)
	}
	if diff := cmp.Diff([]string{"1-1", "1-2"}, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

// TestSourceLargeEntryNotAnchor: a read after an entry larger than 4 KiB
// does not ask for it again (it would travel with every read): it comes
// with the full look instead.
func TestSourceLargeEntryNotAnchor(t *testing.T) {
	_, rdb := server(t)
	var ids []string
	for range 4 {
		id, err := rdb.XAdd(t.Context(), &goredis.XAddArgs{Stream: "s", Values: []string{"n", strings.Repeat("x", 8<<10)}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	src, _ := redis.NewSource(rdb, "s", redis.WithCount(1), redis.WithBlock(time.Minute))
	r, _ := redis.NewResumer(src, cursor.NewMemory(""))
	runUntil(t, r, ids[len(ids)-1])
	stats := commandStats(t, rdb)
	if looks, reads := stats["xinfo|stream"].calls, stats["xread"].calls; looks != 5 || reads != 4 {
		t.Errorf("XINFO STREAM %d times (the script's included), XREAD %d: want a look with each of the 4 reads, and Open's", looks, reads)
	}
}
