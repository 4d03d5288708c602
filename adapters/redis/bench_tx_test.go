package redis_test

import (
	"context"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
)

// BenchmarkTransactional writes one entry and the cursor per op: through
// Transactional (WATCH, the ownership check, MULTI/EXEC), beside a plain
// go-redis MULTI/EXEC of the same two writes without a fence, and an XADD
// followed by a Save (at least once: two round trips, no fence on the
// entry).
func BenchmarkTransactional(b *testing.B) {
	rdb := benchServer(b)
	ctx := context.Background()
	values := []string{"id", "1", "payload", "x"}
	b.Run("Transactional", func(b *testing.B) {
		key := newKey(b)
		s, err := redis.NewStore(rdb, key+".cursor", cursor.Int64(), 0)
		if err != nil {
			b.Fatal(err)
		}
		h := redis.Transactional(s, func(n int64) (int64, error) { return n, nil }, func(ctx context.Context, p goredis.Pipeliner, n int64) error {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: values})
			return nil
		})
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := h(ctx, int64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("multi-exec-unfenced", func(b *testing.B) {
		key := newKey(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			_, err := rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: values})
				p.HSet(ctx, key+".cursor", "cursor", strconv.Itoa(i+1))
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("xadd-then-save", func(b *testing.B) {
		key := newKey(b)
		s, err := redis.NewStore(rdb, key+".cursor", cursor.Int64(), 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: key, Values: values}).Err(); err != nil {
				b.Fatal(err)
			}
			if err := s.Save(ctx, int64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
