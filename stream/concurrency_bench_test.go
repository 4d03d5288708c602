package stream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/resumable-go/resumable/stream"
)

// BenchmarkConcurrencyOverhead measures what ordered concurrency costs per
// event with a handler that does nothing, against one handler, in one run:
// one op is one event on one long connection. The handler goroutines, the
// window and the key table are made once per Run; the steady state
// allocates nothing.
func BenchmarkConcurrencyOverhead(b *testing.B) {
	key64 := func(e benchEvent) int64 { return e.Offset % 64 }
	oneKey := func(benchEvent) int { return 0 }
	cases := []struct {
		name string
		opts []stream.Option
	}{
		{name: "n=1"},
		{name: "n=1/keys=64", opts: []stream.Option{stream.WithConcurrency(1), stream.WithOrderKey(key64)}},
		{name: "n=16", opts: []stream.Option{stream.WithConcurrency(16)}},
		{name: "n=16/keys=64", opts: []stream.Option{stream.WithConcurrency(16), stream.WithOrderKey(key64)}},
		{name: "n=16/keys=1", opts: []stream.Option{stream.WithConcurrency(16), stream.WithOrderKey(oneKey)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var sum atomic.Int64
			benchConsume(b, -1, func(r *stream.Resumer[benchEvent, int64]) error {
				return r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
					sum.Add(e.Offset)
					return nil
				})
			}, c.opts...)
		})
	}
}

// BenchmarkHandWrittenPool is the pool a user would write instead of
// WithConcurrency, for the price of ours: n goroutines, each fed by a
// channel of its own, events dispatched by key hash (or round robin), the
// same source and no-op handler, one op per event. It keeps per-key order
// but no cursor: nothing here knows which events finished, which is the
// part WithConcurrency adds. Compare with BenchmarkConcurrencyOverhead's
// n=16 rows in one run.
func BenchmarkHandWrittenPool(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		name := "n=16"
		if keyed {
			name = "n=16/keys=64"
		}
		b.Run(name, func(b *testing.B) {
			const n = 16
			src := &counterSource{total: int64(b.N), perConn: -1}
			conn, _ := src.Open(context.Background(), 0)
			var sum atomic.Int64
			var wg sync.WaitGroup
			feeds := make([]chan benchEvent, n)
			for i := range feeds {
				feeds[i] = make(chan benchEvent, 64/n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for e := range feeds[i] {
						sum.Add(e.Offset)
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; ; i++ {
				e, err := conn.Recv(context.Background())
				if err != nil {
					break
				}
				k := i % n
				if keyed {
					k = int(e.Offset%64) % n
				}
				feeds[k] <- e
			}
			for _, f := range feeds {
				close(f)
			}
			wg.Wait()
			b.StopTimer()
		})
	}
}
