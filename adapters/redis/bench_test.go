package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
	"github.com/resumable-go/resumable/stream"
)

// fill adds n small entries to key, in pipelines of 1000.
func fill(b *testing.B, rdb *goredis.Client, key string, n int) {
	b.Helper()
	for done := 0; done < n; {
		k := min(1000, n-done)
		_, err := rdb.Pipelined(context.Background(), func(p goredis.Pipeliner) error {
			for range k {
				p.XAdd(context.Background(), &goredis.XAddArgs{Stream: key, Values: []string{"k", "v"}})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		done += k
	}
}

// keys counts the streams the benchmarks made, so that each run has its own.
var keys atomic.Int64

func newKey(b *testing.B) string { return fmt.Sprintf("%s-%d", b.Name(), keys.Add(1)) }

func benchServer(b *testing.B) *goredis.Client {
	srv := redistest.Start(b)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// BenchmarkGroup consumes b.N entries with a Group and a handler that does
// nothing, beside the plain go-redis loop it replaces (XREADGROUP COUNT
// 100, then one XACK of the batch), on the same server.
func BenchmarkGroup(b *testing.B) {
	rdb := benchServer(b)
	b.Run("resumable", func(b *testing.B) {
		key := newKey(b)
		fill(b, rdb, key, b.N)
		g, err := redis.NewGroup(rdb, key, "g", "c1")
		if err != nil {
			b.Fatal(err)
		}
		r, err := redis.NewGroupResumer(g)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		n := 0
		err = r.Run(context.Background(), g.Handler(func(context.Context, redis.Entry) error {
			n++
			if n == b.N {
				return stream.ErrStop
			}
			return nil
		}))
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("go-redis-loop", func(b *testing.B) {
		key := newKey(b)
		fill(b, rdb, key, b.N)
		ctx := context.Background()
		if err := rdb.XGroupCreate(ctx, key, "g", "0").Err(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		for n := 0; n < b.N; {
			res, err := rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c1", Streams: []string{key, ">"}, Count: 100, Block: time.Second}).Result()
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 0, len(res[0].Messages))
			for _, m := range res[0].Messages {
				ids = append(ids, m.ID)
				n++
			}
			if err := rdb.XAck(ctx, key, "g", ids...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSource reads b.N entries with a Source (its cursor in memory)
// and a handler that does nothing, beside the plain go-redis loop it
// replaces (XREAD COUNT 100 from the last ID read), on the same server. Run
// with -count the two alternate, so that they share the machine's load.
func BenchmarkSource(b *testing.B) {
	rdb := benchServer(b)
	b.Run("resumable", func(b *testing.B) {
		key := newKey(b)
		fill(b, rdb, key, b.N)
		src, err := redis.NewSource(rdb, key)
		if err != nil {
			b.Fatal(err)
		}
		r, err := redis.NewResumer(src, cursor.NewMemory(""))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		n := 0
		err = r.Run(context.Background(), func(context.Context, redis.Entry) error {
			n++
			if n == b.N {
				return stream.ErrStop
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
	// The Source's connection alone, without a Resumer: what the adapter
	// adds to the plain loop, apart from the stream's own work.
	b.Run("conn", func(b *testing.B) {
		key := newKey(b)
		fill(b, rdb, key, b.N)
		src, err := redis.NewSource(rdb, key)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		c, err := src.Open(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		for range b.N {
			if _, err := c.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-redis-loop", func(b *testing.B) {
		key := newKey(b)
		fill(b, rdb, key, b.N)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		defer reportCPU(b)()
		last := "0-0"
		for n := 0; n < b.N; {
			res, err := rdb.XRead(ctx, &goredis.XReadArgs{Streams: []string{key, last}, Count: 100, Block: time.Second}).Result()
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range res[0].Messages {
				last = m.ID
				n++
			}
		}
	})
}

// BenchmarkGroupConcurrency consumes b.N entries with a handler that takes
// 2ms, one at a time and 16 at a time.
func BenchmarkGroupConcurrency(b *testing.B) {
	rdb := benchServer(b)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("handlers=%d", n), func(b *testing.B) {
			key := newKey(b)
			fill(b, rdb, key, b.N)
			g, err := redis.NewGroup(rdb, key, "g", "c1")
			if err != nil {
				b.Fatal(err)
			}
			r, err := redis.NewGroupResumer(g, stream.WithConcurrency(n))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			handled := make(chan struct{}, b.N)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- r.Run(ctx, g.Handler(func(context.Context, redis.Entry) error {
					time.Sleep(2 * time.Millisecond) // the handler's work
					handled <- struct{}{}
					return nil
				}))
			}()
			for range b.N {
				<-handled
			}
			b.StopTimer()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				b.Fatal(err)
			}
		})
	}
}
