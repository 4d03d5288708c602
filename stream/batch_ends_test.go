package stream_test

// Where a batch ends (issue 41): a connection's end or failure never splits
// a transaction under WithBatchEnd; progress-only events after the last
// transaction are committed; a batch lingers from its first event's read;
// a Recv panic on the read-ahead goroutine reaches Run's caller; a silent
// connection the watchdog closes while a batch lingers is a failure; Stats
// count the events of a batch, progress-only ones included.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// txEnd marks the last event of a transaction.
func txEnd(e ev) bool { return e.Value == "end" }

// beatExtract is extract where a "beat" is progress-only.
func beatExtract(e ev) (int64, error) {
	if e.Value == "beat" {
		return e.Seq, cursor.ProgressOnly
	}
	return e.Seq, nil
}

// Defect 8: a connection that ends or breaks in the middle of a
// transaction hands nothing of it over; the next connection reads it whole.
func TestBatchEndSurvivesConnectionEnds(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  error
	}{
		{name: "clean end", end: io.EOF},
		{name: "failure", end: errors.New("conn: reset by peer")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tx := []ev{{Seq: 1, Value: "a"}, {Seq: 2, Value: "b"}, {Seq: 3, Value: "end"}}
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
					switch opens.Add(1) {
					case 1:
						return newScriptConn(tt.end, tx[:2]...), nil
					case 2:
						return newScriptConn(stream.ErrEndOfStream, tx[after:]...), nil
					}
					return nil, stream.ErrEndOfStream
				})
				r := newResumer(t, src, stream.WithBatch(100, 0), stream.WithBatchEnd(txEnd))
				var batches [][]int64
				err := r.RunBatch(context.Background(), func(_ context.Context, evs []ev) error {
					var b []int64
					for _, e := range evs {
						b = append(b, e.Seq)
					}
					batches = append(batches, b)
					return nil
				})
				if err != nil {
					t.Fatalf("RunBatch() = %v, want nil", err)
				}
				if diff := cmp.Diff([][]int64{{1, 2, 3}}, batches); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// Defects 9 and 15: under WithBatchEnd, progress-only events after the last
// transaction are committed while the connection stays open, and Stats
// count every event of a batch, progress-only ones included.
func TestBatchEndCommitsTrailingProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := newScriptConn(io.EOF, ev{Seq: 1, Value: "a"}, ev{Seq: 2, Value: "beat"}, ev{Seq: 3, Value: "end"},
			ev{Seq: 4, Value: "beat"}, ev{Seq: 5, Value: "beat"})
		conn.block = true
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return conn, nil })
		r, err := stream.New(src, beatExtract, cursor.NewMemory[int64](0), stream.WithBatch(100, 0), stream.WithBatchEnd(txEnd))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.RunBatch(ctx, func(context.Context, []ev) error { return nil }) }()
		synctest.Wait()
		st := r.Stats()
		if st.Cursor != 5 || st.Events != 2 || st.Progress != 3 {
			t.Errorf("Stats() Cursor = %d, Events = %d, Progress = %d; want 5, 2, 3", st.Cursor, st.Events, st.Progress)
		}
		cancel()
		<-done
	})
}

// Defect 19: a batch is handed over linger after its first event was read,
// with every event read by then.
func TestBatchLingersFromItsFirstRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		conn := &tickingConn{tick: 30 * time.Millisecond}
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return conn, nil })
		r := newResumer(t, src, stream.WithBatch(100, 100*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 620*time.Millisecond)
		defer cancel()
		var got []string
		err := r.RunBatch(ctx, func(_ context.Context, evs []ev) error {
			got = append(got, fmt.Sprintf("%d@%v", len(evs), time.Since(start)))
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("RunBatch() = %v, want context.DeadlineExceeded", err)
		}
		// Events are read every 30ms; each batch is due 100ms after its first.
		want := []string{"4@130ms", "4@250ms", "4@370ms", "4@490ms", "4@610ms"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("batches as size@time (-want +got):\n%s", diff)
		}
	})
}

// Defect 6: a Recv panic on RunBatch's read-ahead goroutine reaches Run's
// caller after the Conn was closed.
func TestBatchRecvPanicReachesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := &closeCounter{events: []ev{{Seq: 1}, {Seq: 2}}, then: func(context.Context) (ev, error) { panic("recv: boom") }}
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return conn, nil })
		store := cursor.NewMemory[int64](0)
		r, err := stream.New(src, extract, store, stream.WithBatch(10, 0))
		if err != nil {
			t.Fatal(err)
		}
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			_ = r.RunBatch(context.Background(), func(context.Context, []ev) error { return nil })
		}()
		if fmt.Sprint(panicked) != "recv: boom" {
			t.Fatalf("RunBatch panicked with %v, want recv: boom", panicked)
		}
		if conn.closes.Load() == 0 {
			t.Error("the Conn was not closed")
		}
		if got, _ := store.Load(context.Background()); got != r.Cursor() {
			t.Errorf("Store holds %d, want the committed cursor %d", got, r.Cursor())
		}
	})
}

// silentAfter delivers its events, then stays silent until closed, then
// fails.
type silentAfter struct {
	events []ev
	closed chan struct{}
	once   atomic.Bool
}

func (c *silentAfter) Recv(ctx context.Context) (ev, error) {
	if len(c.events) > 0 {
		e := c.events[0]
		c.events = c.events[1:]
		return e, nil
	}
	select {
	case <-c.closed:
		return ev{}, errors.New("conn: closed")
	case <-ctx.Done():
		return ev{}, ctx.Err()
	}
}

func (c *silentAfter) Close() error {
	if !c.once.Swap(true) {
		close(c.closed)
	}
	return nil
}

// Defect 16: the watchdog closing a silent connection while a batch
// lingers is a failure, though the batch is handed over after the close.
func TestBatchLingerIdleIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var opens atomic.Int64
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			if opens.Add(1) > 1 {
				return nil, stream.ErrEndOfStream
			}
			return &silentAfter{events: []ev{{Seq: 1}, {Seq: 2}}, closed: make(chan struct{})}, nil
		})
		var clean []bool
		r := newResumer(t, src, stream.WithBatch(100, time.Hour), stream.WithIdleTimeout(time.Second),
			stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) { clean = append(clean, e.Clean) }}))
		var handed []int
		if err := r.RunBatch(context.Background(), func(_ context.Context, evs []ev) error {
			handed = append(handed, len(evs))
			return nil
		}); err != nil {
			t.Fatalf("RunBatch() = %v, want nil", err)
		}
		if !slices.Equal(handed, []int{2}) {
			t.Errorf("batches of %v, want one of 2", handed)
		}
		st := r.Stats()
		if st.Retried != 1 || st.CleanEnds != 0 || !slices.Equal(clean, []bool{false}) {
			t.Errorf("Retried = %d, CleanEnds = %d, OnDisconnect clean %v; want 1, 0 and a failure", st.Retried, st.CleanEnds, clean)
		}
	})
}

// gatedConn delivers its events, then blocks until ctx ends, closing read
// once Recv was called after the last event (all of them are read).
type gatedConn struct {
	events []ev
	read   chan struct{}
}

func (c *gatedConn) Recv(ctx context.Context) (ev, error) {
	if len(c.events) > 0 {
		e := c.events[0]
		c.events = c.events[1:]
		return e, nil
	}
	if c.read != nil {
		close(c.read)
		c.read = nil
	}
	<-ctx.Done()
	return ev{}, ctx.Err()
}

func (c *gatedConn) Close() error { return nil }

// Under WithBatchEnd a batch holds as many whole transactions as were read
// already and fit in its max (issue 42: one transaction per batch capped a
// CDC relay at the target's commits per second), and never a part of one
// that fits: transactions of 1, 2 and 3 events, max 6, all read before the
// second batch is made.
func TestBatchEndPacksWholeTransactions(t *testing.T) {
	var events []ev
	var seq int64
	for i := range 24 {
		size := i%3 + 1
		for j := range size {
			seq++
			v := "change"
			if j == size-1 {
				v = "end"
			}
			events = append(events, ev{Seq: seq, Value: v})
		}
	}
	read := make(chan struct{})
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		return &gatedConn{events: slices.Clone(events), read: read}, nil
	})
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBatch(6, time.Hour), stream.WithBatchEnd(txEnd))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var batches [][]ev
	var got int
	err = r.RunBatch(ctx, func(_ context.Context, evs []ev) error {
		if len(batches) == 0 {
			<-read // every event is read before the next batch is made
		}
		batches = append(batches, slices.Clone(evs))
		if got += len(evs); got == len(events) {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunBatch() = %v, want context.Canceled", err)
	}
	var all []ev
	packed := 0
	for i, b := range batches {
		if len(b) > 6 || !txEnd(b[len(b)-1]) {
			t.Errorf("batch %d = %v: over max or not ending a transaction", i, b)
		}
		ends := 0
		for _, e := range b {
			if txEnd(e) {
				ends++
			}
		}
		if ends > 1 {
			packed++
		}
		all = append(all, b...)
	}
	if diff := cmp.Diff(events, all); diff != "" {
		t.Errorf("events handed over (-want +got):\n%s", diff)
	}
	// After the first, every batch but the last is two or three whole
	// transactions filling max (1+2+3 = 6).
	if packed < len(batches)-2 || len(batches) > 10 {
		t.Errorf("%d batches, %d with more than one transaction; want at most 10, all but the first and last packed", len(batches), packed)
	}
}
