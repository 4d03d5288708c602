package stream_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// benchEvent is a small event, as a watch or log entry would be after
// decoding.
type benchEvent struct {
	Offset int64
	Kind   uint8
}

func benchExtract(e benchEvent) (int64, error) { return e.Offset, nil }

// counterSource serves offsets after..total, ending each connection cleanly
// after perConn events (0: never), then ends the stream. Its connections are
// reused so that the steady state allocates nothing.
type counterSource struct {
	total, perConn int64
	conn           counterConn
}

func (s *counterSource) Open(_ context.Context, after int64) (stream.Conn[benchEvent], error) {
	s.conn = counterConn{next: after, total: s.total, left: s.perConn}
	return &s.conn, nil
}

type counterConn struct {
	next, total, left int64
}

func (c *counterConn) Recv(context.Context) (benchEvent, error) {
	if c.next >= c.total {
		return benchEvent{}, stream.ErrEndOfStream
	}
	if c.left == 0 {
		return benchEvent{}, io.EOF
	}
	c.left--
	c.next++
	return benchEvent{Offset: c.next}, nil
}

func (c *counterConn) Close() error { return nil }

var connSizes = []int64{1, 8, 64, -1} // -1: one long-lived connection

func connName(n int64) string {
	if n < 0 {
		return "conn=long"
	}
	return fmt.Sprintf("conn=%d", n)
}

// benchConsume runs consume over a Resumer on a counterSource of b.N events
// in connections of per events, timing only consume; one op is one event.
func benchConsume(b *testing.B, per int64, consume func(r *stream.Resumer[benchEvent, int64]) error, opts ...stream.Option) {
	src := &counterSource{total: int64(b.N), perConn: per}
	r, err := stream.New[benchEvent, int64](src, benchExtract, cursor.NewMemory[int64](0),
		append([]stream.Option{stream.WithBackoff(backoff.Constant(0))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	err = consume(r)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if got := r.Cursor(); got != int64(b.N) {
		b.Fatalf("Cursor() = %d, want %d", got, b.N)
	}
}

// BenchmarkRun measures the cost per event of Run, reconnects folded in: one
// op is one event.
func BenchmarkRun(b *testing.B) {
	for _, per := range connSizes {
		b.Run(connName(per), func(b *testing.B) {
			var sum int64
			benchConsume(b, per, func(r *stream.Resumer[benchEvent, int64]) error {
				return r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
					sum += e.Offset
					return nil
				})
			})
		})
	}
}

// BenchmarkRunIdleTimeout measures what the idle watchdog costs per event:
// the same Run with it off and on (compare the two in one run).
func BenchmarkRunIdleTimeout(b *testing.B) {
	for _, w := range []struct {
		name string
		opts []stream.Option
	}{
		{name: "watchdog=off"},
		{name: "watchdog=on", opts: []stream.Option{stream.WithIdleTimeout(time.Minute)}},
	} {
		b.Run(w.name, func(b *testing.B) {
			var sum int64
			benchConsume(b, -1, func(r *stream.Resumer[benchEvent, int64]) error {
				return r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
					sum += e.Offset
					return nil
				})
			}, w.opts...)
		})
	}
}

// BenchmarkAll measures the cost per event of the All iterator.
func BenchmarkAll(b *testing.B) {
	for _, per := range connSizes {
		b.Run(connName(per), func(b *testing.B) {
			var sum int64
			benchConsume(b, per, func(r *stream.Resumer[benchEvent, int64]) error {
				for e, err := range r.All(context.Background()) {
					if err != nil {
						return err
					}
					sum += e.Offset
				}
				return nil
			})
		})
	}
}

// BenchmarkReconnect measures one resume cycle (Open → first event → clean
// end) with zero delays: one op is one reconnect.
func BenchmarkReconnect(b *testing.B) {
	src := &counterSource{total: int64(b.N), perConn: 1}
	r, err := stream.New[benchEvent, int64](src, benchExtract, cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)), stream.WithCheckpointEvery(0))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := r.Run(context.Background(), func(context.Context, benchEvent) error { return nil }); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChannel is the baseline a channel-based watcher pays per event: a
// goroutine hand-off through an unbuffered channel.
func BenchmarkChannel(b *testing.B) {
	ch := make(chan benchEvent)
	go func() {
		defer close(ch)
		for i := range b.N {
			ch <- benchEvent{Offset: int64(i + 1)}
		}
	}()
	var sum int64
	b.ReportAllocs()
	for e := range ch {
		sum += e.Offset
	}
}

// BenchmarkRunFileStore measures Run with the durable file store at several
// checkpoint cadences: one op is one event.
func BenchmarkRunFileStore(b *testing.B) {
	cadences := []struct {
		name string
		opts []stream.Option
	}{
		{name: "every=1"},
		{name: "every=100", opts: []stream.Option{stream.WithCheckpointEvery(100)}},
		{name: "interval=1s", opts: []stream.Option{stream.WithCheckpointInterval(time.Second)}},
	}
	for _, c := range cadences {
		b.Run(c.name, func(b *testing.B) {
			store, err := cursor.NewFile(filepath.Join(b.TempDir(), "bench.cursor"), int64(0), cursor.Int64())
			if err != nil {
				b.Fatal(err)
			}
			src := &counterSource{total: int64(b.N), perConn: -1}
			r, err := stream.New[benchEvent, int64](src, benchExtract, store, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if err := r.Run(context.Background(), func(context.Context, benchEvent) error { return nil }); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRunFailureOptions measures what handler retry and the dead
// letter cost on the clean path (no handler fails): the same Run with the
// options off and on (compare the two in one run).
func BenchmarkRunFailureOptions(b *testing.B) {
	park := func(context.Context, benchEvent, error) error { return nil }
	for _, w := range []struct {
		name string
		opts []stream.Option
	}{
		{name: "options=off"},
		{name: "options=on", opts: []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0)), stream.WithDeadLetter(park)}},
	} {
		b.Run(w.name, func(b *testing.B) {
			var sum int64
			benchConsume(b, -1, func(r *stream.Resumer[benchEvent, int64]) error {
				return r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
					sum += e.Offset
					return nil
				})
			}, w.opts...)
		})
	}
}
