package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/resumable-go/resumable/stream"
)

// BenchmarkSerial reads a one-partition topic of 100,000 records through a
// fresh group member per pass, with a handler that does nothing: the
// adapter with one handler against the loop franz-go's examples show
// (PollFetches, handle, CommitRecords). A pass includes joining the group.
//
//	go test ./adapters/kafka -run '^$' -bench Serial -benchtime 5x
func BenchmarkSerial(b *testing.B) {
	const n = 100_000
	c := newCluster(b, 1, "orders")
	c.produce(b, records("orders", 1, n, 400)...)
	groups := 0
	b.Run("resumable", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			groups++
			consume(b, c, fmt.Sprintf("g%d", groups), n)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("franz-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			groups++
			handWritten(b, c, fmt.Sprintf("g%d", groups), n)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkWork reads 4,000 records of 400 keys on one partition, each
// handled in 2ms (a stand-in for a call to another service), with n
// handlers: Parallel Consumer's shape.
//
//	go test ./adapters/kafka -run '^$' -bench Work -benchtime 1x
func BenchmarkWork(b *testing.B) {
	const n = 4000
	c := newCluster(b, 1, "orders")
	c.produce(b, records("orders", 1, n, 400)...)
	groups := 0
	for _, handlers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("n=%d", handlers), func(b *testing.B) {
			for b.Loop() {
				groups++
				consume(b, c, fmt.Sprintf("g%d", groups), n, stream.WithConcurrency(handlers),
					stream.WithWindow(max(64, 4*handlers)), work(2*time.Millisecond))
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// work is an argument of consume: each handler call sleeps that long.
type work time.Duration

// consume runs a member of group until it handled n records.
func consume(b *testing.B, c *cluster, group string, n int, opts ...any) {
	var d time.Duration
	var sopts []stream.Option
	for _, o := range opts {
		switch o := o.(type) {
		case work:
			d = time.Duration(o)
		case stream.Option:
			sopts = append(sopts, o)
		}
	}
	g := c.group(b, group, []string{"orders"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	err := g.Run(ctx, func(context.Context, *kgo.Record) error {
		if d > 0 {
			time.Sleep(d)
		}
		if handled.Add(1) == int64(n) {
			cancel()
		}
		return nil
	}, sopts...)
	if ctx.Err() == nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(g.Stats().Pauses), "pauses")
}

// handWritten is the loop of franz-go's examples: poll, handle each
// record, commit the poll's records.
func handWritten(b *testing.B, c *cluster, group string, n int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	handle := func(*kgo.Record) error { return nil }
	for handled := 0; handled < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		recs := fs.Records()
		for _, r := range recs {
			if err := handle(r); err != nil {
				b.Fatal(err)
			}
		}
		handled += len(recs)
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			b.Fatal(err)
		}
	}
}
