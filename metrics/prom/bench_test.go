package prom_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/metrics/prom"
	"github.com/resumable-go/resumable/stream"
)

// loopSource serves one long connection of increasing offsets while next
// says so, then ends the stream. It allocates nothing per event.
type loopSource struct {
	conn loopConn
}

func (s *loopSource) Open(_ context.Context, after int64) (stream.Conn[int64], error) {
	s.conn.off = after
	return &s.conn, nil
}

type loopConn struct {
	off  int64
	next func() bool
}

func (c *loopConn) Recv(context.Context) (int64, error) {
	if !c.next() {
		return 0, stream.ErrEndOfStream
	}
	c.off++
	return c.off, nil
}

func (c *loopConn) Close() error { return nil }

func identity(v int64) (int64, error) { return v, nil }

// runLoop runs a Resumer over a loopSource until next says stop.
func runLoop(b *testing.B, next func() bool, opts ...stream.Option) {
	src := &loopSource{conn: loopConn{next: next}}
	r, err := stream.New[int64, int64](src, identity, cursor.NewMemory[int64](0),
		append([]stream.Option{stream.WithBackoff(backoff.Constant(0)), stream.WithCheckpointEvery(0)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Run(context.Background(), func(context.Context, int64) error { return nil }); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRun measures Run per event (one op is one event) without hooks,
// with the metrics hooks, and with the metrics hooks beside a set of the
// user's own.
func BenchmarkRun(b *testing.B) {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		b.Fatal(err)
	}
	withMetrics := func() (stream.Option, func()) {
		h, detach := prom.Hooks[int64](c, "bench")
		return stream.WithHooks(h), detach
	}
	b.Run("hooks=none", func(b *testing.B) {
		b.ReportAllocs()
		runLoop(b, b.Loop)
	})
	b.Run("hooks=prom", func(b *testing.B) {
		opt, detach := withMetrics()
		defer detach()
		b.ReportAllocs()
		runLoop(b, b.Loop, opt)
	})
	b.Run("hooks=prom+user", func(b *testing.B) {
		opt, detach := withMetrics()
		defer detach()
		var n int
		user := stream.WithHooks(stream.Hooks[int64]{OnCommit: func(stream.CommitEvent[int64]) { n++ }})
		b.ReportAllocs()
		runLoop(b, b.Loop, opt, user)
	})
}

// BenchmarkCollect measures a scrape of ten thousand attached streams
// under ten names; one op is one Collect.
func BenchmarkCollect(b *testing.B) {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		h, detach := prom.Hooks[int64](c, fmt.Sprintf("group-%d", i%10))
		defer detach()
		h.OnConnect(stream.ConnectEvent[int64]{})
		h.OnCommit(stream.CommitEvent[int64]{})
	}
	ch := make(chan prometheus.Metric, 1024)
	b.ReportAllocs()
	for b.Loop() {
		go func() {
			c.Collect(ch)
			close(ch)
		}()
		for range ch {
		}
		ch = make(chan prometheus.Metric, 1024)
	}
}

// BenchmarkOnCommit measures the per-event hook alone (one op is one call),
// for one stream, and for GOMAXPROCS streams of one name in parallel.
func BenchmarkOnCommit(b *testing.B) {
	c, err := prom.NewCollector("resumable")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("one", func(b *testing.B) {
		h, detach := prom.Hooks[int64](c, "bench")
		defer detach()
		b.ReportAllocs()
		for b.Loop() {
			h.OnCommit(stream.CommitEvent[int64]{Cursor: 1})
		}
	})
	b.Run("parallel-shared-name", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			h, detach := prom.Hooks[int64](c, "bench")
			defer detach()
			for pb.Next() {
				h.OnCommit(stream.CommitEvent[int64]{Cursor: 1})
			}
		})
	})
}
