package stream_test

import (
	"context"
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
