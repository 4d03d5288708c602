package stream_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// BenchmarkConcurrencyOverhead measures what ordered concurrency costs per
// event with a handler that does nothing, against one handler, in one run:
// one op is one event on one long connection. The handler goroutines, the
// window and the key table are made once per Run; the steady state
// allocates nothing.
func BenchmarkConcurrencyOverhead(b *testing.B) {
	key64 := func(e benchEvent) int64 { return e.Offset % 64 }
	key1000 := func(e benchEvent) int64 { return e.Offset % 1000 }
	oneKey := func(benchEvent) int { return 0 }
	cases := []struct {
		name string
		opts []stream.Option
	}{
		{name: "n=1"},
		{name: "n=1/keys=64", opts: []stream.Option{stream.WithConcurrency(1), stream.WithOrderKey(key64)}},
		{name: "n=16", opts: []stream.Option{stream.WithConcurrency(16)}},
		{name: "n=16/keys=64", opts: []stream.Option{stream.WithConcurrency(16), stream.WithOrderKey(key64)}},
		{name: "n=16/keys=1000", opts: []stream.Option{stream.WithConcurrency(16), stream.WithOrderKey(key1000)}},
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
// n=16 rows in one run, or read BenchmarkConcurrencyVsPool's ratio.
func BenchmarkHandWrittenPool(b *testing.B) {
	for _, keys := range []int64{0, 64, 1000} {
		name := "n=16"
		if keys > 0 {
			name = fmt.Sprintf("n=16/keys=%d", keys)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			handPool(16, keys, int64(b.N))
			b.StopTimer()
		})
	}
}

// handPool runs total events through the hand-written pool of n
// goroutines, dispatched by the key offset%keys (round robin when keys
// is 0).
func handPool(n int, keys, total int64) {
	src := &counterSource{total: total, perConn: -1}
	conn, _ := src.Open(context.Background(), 0)
	var sum atomic.Int64
	var wg sync.WaitGroup
	feeds := make([]chan benchEvent, n)
	for i := range feeds {
		feeds[i] = make(chan benchEvent, max(1, 64/n))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range feeds[i] {
				sum.Add(e.Offset)
			}
		}()
	}
	for i := 0; ; i++ {
		e, err := conn.Recv(context.Background())
		if err != nil {
			break
		}
		k := i % n
		if keys > 0 {
			k = int(e.Offset%keys) % n
		}
		feeds[k] <- e
	}
	for _, f := range feeds {
		close(f)
	}
	wg.Wait()
}

// BenchmarkConcurrencyVsPool runs WithConcurrency(16) and the hand-written
// pool of 16 goroutines over the same 1,000 keys in rounds of 200,000
// events (which side goes first alternates), so both see the machine in
// the same state, and reports each side's median ns per event and the
// median of the rounds' ratios (the goal: ratio ≤ 2.5). No-op handlers, default window (64,
// as the pool's 16 channels of 4).
//
//	go test ./stream -run '^$' -bench ConcurrencyVsPool -benchtime 1x
func BenchmarkConcurrencyVsPool(b *testing.B) {
	const rounds, events = 15, 200_000
	key := func(e benchEvent) int64 { return e.Offset % 1000 }
	var ours, pool, ratio []float64
	for b.Loop() {
		for round := range rounds {
			var o, h float64
			if round%2 == 0 { // which side goes first alternates
				o, h = ordered(b, key, events), pooled(events)
			} else {
				h, o = pooled(events), ordered(b, key, events)
			}
			ours, pool, ratio = append(ours, o), append(pool, h), append(ratio, o/h)
		}
	}
	b.ReportMetric(median(ours), "ours-ns/event")
	b.ReportMetric(median(pool), "pool-ns/event")
	b.ReportMetric(median(ratio), "ratio")
}

// ordered runs events through WithConcurrency(16) keyed by key, and
// returns the ns per event.
func ordered(b *testing.B, key func(benchEvent) int64, events int64) float64 {
	src := &counterSource{total: events, perConn: -1}
	r, err := stream.New[benchEvent, int64](src, benchExtract, cursor.NewMemory[int64](0),
		stream.WithConcurrency(16), stream.WithOrderKey(key))
	if err != nil {
		b.Fatal(err)
	}
	var sum atomic.Int64
	start := time.Now()
	err = r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
		sum.Add(e.Offset)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(events)
}

// pooled runs events through the hand-written pool of 16 goroutines over
// 1,000 keys, and returns the ns per event.
func pooled(events int64) float64 {
	start := time.Now()
	handPool(16, 1000, events)
	return float64(time.Since(start).Nanoseconds()) / float64(events)
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
