package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// batches records the sequence numbers of each batch a RunBatch handler
// receives.
type batches struct {
	mu  sync.Mutex
	got [][]int64
}

func (b *batches) record(_ context.Context, evs []ev) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	seqs := make([]int64, len(evs))
	for i, e := range evs {
		seqs[i] = e.Seq
	}
	b.got = append(b.got, seqs)
	return nil
}

func (b *batches) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n []int
	for _, g := range b.got {
		n = append(n, len(g))
	}
	return n
}

// runLive starts r.RunBatch on a live stream, recording its batches; stop
// cancels it and returns what RunBatch returned.
func runLive(r *stream.Resumer[ev, int64]) (b *batches, stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	b = &batches{}
	done := make(chan error, 1)
	go func() { done <- r.RunBatch(ctx, b.record) }()
	return b, func() error {
		cancel()
		return <-done
	}
}

// A batch is handed over when full, and at the end of the stream, and the
// cursor of its last event is committed once per batch.
func TestRunBatchFullAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var commits []int64
		r := newResumer(t, streamtest.NewSource(letters(250)), stream.WithBatch(100, time.Hour),
			stream.WithHooks(stream.Hooks[int64]{OnCommit: func(e stream.CommitEvent[int64]) { commits = append(commits, e.Cursor) }}))
		var b batches
		if err := r.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([]int{100, 100, 50}, b.sizes()); diff != "" {
			t.Errorf("batch sizes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int64{100, 200, 250}, commits); diff != "" {
			t.Errorf("commits (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Events != 250 || st.Cursor != 250 {
			t.Errorf("Stats() = %d events at cursor %d, want 250 at 250", st.Events, st.Cursor)
		}
	})
}

// On a live stream a batch that is not full is handed over once linger has
// passed since its first event, and not before.
func TestRunBatchLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(3))
		src.SetEndOfLog(streamtest.Wait)
		r := newResumer(t, src, stream.WithBatch(100, time.Second))
		b, stop := runLive(r)
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if n := len(b.sizes()); n != 0 {
			t.Fatalf("%d batches before the linger passed, want 0", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if diff := cmp.Diff([]int{3}, b.sizes()); diff != "" {
			t.Fatalf("batch sizes after the linger (-want +got):\n%s", diff)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("RunBatch() = %v, want %v", err, context.Canceled)
		}
		if got := r.Cursor(); got != 3 {
			t.Errorf("Cursor() = %d, want 3", got)
		}
	})
}

// With linger 0 a batch is what was read when the handler is free: never
// a wait for more, whatever the batch's size.
func TestRunBatchNoLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(1))
		src.SetEndOfLog(streamtest.Wait)
		r := newResumer(t, src, stream.WithBatch(100, 0))
		b, stop := runLive(r)
		synctest.Wait()
		if diff := cmp.Diff([]int{1}, b.sizes()); diff != "" {
			t.Fatalf("batch sizes (-want +got):\n%s", diff)
		}
		_ = stop()
	})
}

// A connection's end hands the batch over before the reopen.
func TestRunBatchConnectionEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(10), streamtest.Step{Kind: streamtest.EndAfter, K: 7})
		r := newResumer(t, src, stream.WithBatch(100, time.Hour))
		var b batches
		if err := r.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([][]int64{seqs(1, 7), seqs(8, 10)}, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if opens := src.Opens(); len(opens) != 2 || opens[1].After != 7 {
			t.Errorf("Opens = %v, want a second one after 7", opens)
		}
	})
}

// A failed batch commits nothing of itself: the next run delivers it again,
// whole, and continues.
func TestRunBatchFailureRedeliversWholeBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(25))
		store := cursor.NewMemory[int64](0)
		errSink := errors.New("sink down")
		var b batches
		calls := 0
		failSecond := func(ctx context.Context, evs []ev) error {
			if calls++; calls == 2 {
				return errSink
			}
			return b.record(ctx, evs)
		}
		r, err := stream.New(src, extract, store, stream.WithBatch(10, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.RunBatch(context.Background(), failSecond); !errors.Is(err, errSink) {
			t.Fatalf("RunBatch() = %v, want %v", err, errSink)
		}
		if got, _ := store.Load(context.Background()); got != 10 {
			t.Fatalf("saved cursor %d, want 10 (the first batch only)", got)
		}
		r2, err := stream.New(src, extract, store, stream.WithBatch(10, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("second RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([][]int64{seqs(1, 10), seqs(11, 20), seqs(21, 25)}, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
	})
}

// WithHandlerRetry retries the whole batch in place; ErrStop commits the
// batch it came with and ends Run cleanly.
func TestRunBatchRetryAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b batches
		calls := 0
		handle := func(ctx context.Context, evs []ev) error {
			calls++
			if calls == 1 {
				return errors.New("flaky")
			}
			_ = b.record(ctx, evs)
			if calls == 3 {
				return stream.ErrStop
			}
			return nil
		}
		r := newResumer(t, streamtest.NewSource(letters(50)), stream.WithBatch(10, time.Hour),
			stream.WithHandlerRetry(3, backoff.Constant(time.Second)))
		if err := r.RunBatch(context.Background(), handle); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([][]int64{seqs(1, 10), seqs(11, 20)}, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Cursor != 20 || st.HandlerRetries != 1 || st.Events != 20 {
			t.Errorf("Stats() = cursor %d, %d retries, %d events; want 20, 1, 20", st.Cursor, st.HandlerRetries, st.Events)
		}
	})
}

// Progress-only events are folded into the batch's commit; a batch of only
// progress-only events commits without calling the handler.
func TestRunBatchProgressOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := []string{"a", "beat", "b", "beat", "beat"}
		progressAt := func(e ev) (int64, error) {
			if e.Value == "beat" {
				return e.Seq, cursor.ProgressOnly
			}
			return e.Seq, nil
		}
		src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.EndAfter, K: 3})
		r, err := stream.New(src, progressAt, cursor.NewMemory[int64](0), stream.WithBatch(10, time.Hour), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		var b batches
		if err := r.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([][]int64{{1, 3}}, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Cursor != 5 || st.Events != 2 {
			t.Errorf("Stats() = cursor %d, %d events; want 5, 2", st.Cursor, st.Events)
		}
	})
}

// A resync's replay is handed over in batches, and its cursor committed
// once the replay was handled.
func TestRunBatchResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.ExpireAfter, K: 0})
		resync := func(_ context.Context, _ error, emit func(ev) error) (int64, error) {
			for i := range int64(25) {
				if err := emit(ev{Seq: 100 + i}); err != nil {
					return 0, err
				}
			}
			return 0, nil
		}
		r := newResumer(t, src, stream.WithBatch(10, time.Hour), stream.WithResync(stream.ResyncFunc[ev, int64](resync)))
		var b batches
		if err := r.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([]int{10, 10, 5, 3}, b.sizes()); diff != "" {
			t.Errorf("batch sizes (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Resyncs != 1 || st.Events != 28 {
			t.Errorf("Stats() = %d resyncs, %d events; want 1, 28", st.Resyncs, st.Events)
		}
	})
}

// WithBatchEnd hands a batch over at each end marker: a batch never spans
// two source transactions, and one larger than max is split.
func TestRunBatchEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := []string{"x", "x", "end", "x", "end", "x", "x", "x", "x", "x", "end"}
		src := streamtest.NewSource(log)
		src.SetEndOfLog(streamtest.Wait)
		r := newResumer(t, src, stream.WithBatch(4, 0), stream.WithBatchEnd(func(e ev) bool { return e.Value == "end" }))
		b, stop := runLive(r)
		synctest.Wait()
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("RunBatch() = %v, want %v", err, context.Canceled)
		}
		want := [][]int64{seqs(1, 3), seqs(4, 5), seqs(6, 9), seqs(10, 11)}
		if diff := cmp.Diff(want, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
	})
}

// Events read while a batch lingers are activity: the idle watchdog never
// closes a connection that delivers events more often than its timeout,
// however long the batch waits to fill.
func TestRunBatchLingerIsNoIdleness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var conns []*slowConn
		src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
			c := &slowConn{next: after, last: 6, every: 7 * time.Second}
			conns = append(conns, c)
			return c, nil
		})
		r := newResumer(t, src, stream.WithBatch(100, time.Hour), stream.WithIdleTimeout(10*time.Second))
		var b batches
		if err := r.RunBatch(context.Background(), b.record); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if diff := cmp.Diff([][]int64{seqs(1, 6)}, b.got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if len(conns) != 1 || conns[0].closedEarly {
			t.Errorf("%d connections, the first closed before its end: %t; want one, not", len(conns), conns[0].closedEarly)
		}
	})
}

// slowConn delivers the events after next up to last, one every so often,
// then ends the stream; once closed, its Recv fails.
type slowConn struct {
	mu          sync.Mutex
	next, last  int64
	every       time.Duration
	closed      bool
	closedEarly bool // closed before the end of the stream
}

func (c *slowConn) Recv(context.Context) (ev, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == c.last {
		return ev{}, stream.ErrEndOfStream
	}
	c.mu.Unlock()
	time.Sleep(c.every)
	c.mu.Lock()
	if c.closed {
		return ev{}, errors.New("slowConn: closed")
	}
	c.next++
	return ev{Seq: c.next}, nil
}

func (c *slowConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closedEarly = c.closedEarly || (!c.closed && c.next < c.last)
	c.closed = true
	return nil
}

// Cancelling ctx while a batch fills commits nothing of it.
func TestRunBatchCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(3))
		src.SetEndOfLog(streamtest.Wait)
		r := newResumer(t, src, stream.WithBatch(10, time.Hour))
		b, stop := runLive(r)
		synctest.Wait()
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("RunBatch() = %v, want %v", err, context.Canceled)
		}
		if len(b.got) != 0 || r.Cursor() != 0 {
			t.Errorf("%d batches, cursor %d; want none, 0", len(b.got), r.Cursor())
		}
	})
}

// The combinations that make no sense are refused, never ignored.
func TestRunBatchRefused(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	park := stream.WithDeadLetter(func(context.Context, ev, error) error { return nil })
	handleBatch := func(context.Context, []ev) error { return nil }
	tests := []struct {
		name string
		opts []stream.Option
		run  func(r *stream.Resumer[ev, int64]) error
	}{
		{name: "RunBatch with concurrency", opts: []stream.Option{stream.WithConcurrency(2)},
			run: func(r *stream.Resumer[ev, int64]) error { return r.RunBatch(context.Background(), handleBatch) }},
		{name: "RunBatch with a dead letter", opts: []stream.Option{park},
			run: func(r *stream.Resumer[ev, int64]) error { return r.RunBatch(context.Background(), handleBatch) }},
		{name: "RunBatch with a nil handler",
			run: func(r *stream.Resumer[ev, int64]) error { return r.RunBatch(context.Background(), nil) }},
		{name: "Run with WithBatch", opts: []stream.Option{stream.WithBatch(10, 0)},
			run: func(r *stream.Resumer[ev, int64]) error { return r.Run(context.Background(), record(new([]int64))) }},
		{name: "All with WithBatch", opts: []stream.Option{stream.WithBatch(10, 0)},
			run: func(r *stream.Resumer[ev, int64]) error {
				for _, err := range r.All(context.Background()) {
					return err
				}
				return nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newResumer(t, src, tc.opts...)
			if err := tc.run(r); !errors.Is(err, stream.ErrInvalidOption) {
				t.Fatalf("got %v, want an error matching %v", err, stream.ErrInvalidOption)
			}
		})
	}
	for _, opt := range []stream.Option{stream.WithBatch(0, 0), stream.WithBatch(5, -time.Second), stream.WithBatchEnd(func(string) bool { return true })} {
		if _, err := stream.New(src, extract, cursor.NewMemory[int64](0), opt); !errors.Is(err, stream.ErrInvalidOption) {
			t.Errorf("New() = %v, want an error matching %v", err, stream.ErrInvalidOption)
		}
	}
}

// BenchmarkRunBatch measures the cost per event of RunBatch against Run on
// one long connection, with a handler that does nothing: one op is one
// event. The reader goroutine reads ahead while a batch is handled; the
// linger lets every batch fill.
func BenchmarkRunBatch(b *testing.B) {
	b.Run("Run", func(b *testing.B) {
		var sum int64
		benchConsume(b, -1, func(r *stream.Resumer[benchEvent, int64]) error {
			return r.Run(context.Background(), func(_ context.Context, e benchEvent) error {
				sum += e.Offset
				return nil
			})
		})
	})
	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			var sum int64
			benchConsume(b, -1, func(r *stream.Resumer[benchEvent, int64]) error {
				return r.RunBatch(context.Background(), func(_ context.Context, evs []benchEvent) error {
					for _, e := range evs {
						sum += e.Offset
					}
					return nil
				})
			}, stream.WithBatch(size, time.Second))
		})
	}
}
