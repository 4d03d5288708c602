package stream_test

// The pipeline runs itself (issue 41): events read are handled and
// committed while Run's goroutine blocks in an Open, the open limiter or a
// restart delay; a handler's failure ends a blocked Open at once; a panic
// on any goroutine that runs user code reaches Run's caller after the Conn
// was closed and the committed cursor saved; the window bounds what is
// read; the committer saves at a connection's end, by interval, never
// counts shutdown as a failure, and a Store that never saves spends the
// retry budget.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// firstPage returns a Source whose first Open gives events 1..n of one key
// and whose later Opens call then.
func firstPage(n int, then func(ctx context.Context) ([]ev, error)) stream.Source[ev, int64] {
	var opens atomic.Int64
	return stream.Pages(func(ctx context.Context, _ int64) ([]ev, error) {
		if opens.Add(1) > 1 {
			return then(ctx)
		}
		evs := make([]ev, n)
		for i := range evs {
			evs[i] = ev{Seq: int64(i + 1), Value: "k"}
		}
		return evs, nil
	})
}

// blockUntilDone blocks until ctx ends.
func blockUntilDone(ctx context.Context) ([]ev, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// blockingLimiter lets the first Wait through and blocks every later one
// until its ctx ends.
type blockingLimiter struct{ calls atomic.Int64 }

func (l *blockingLimiter) Wait(ctx context.Context) error {
	if l.calls.Add(1) == 1 {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func byValue(e ev) string { return e.Value }

// Defects 1, 2 and 4: while the supervisor blocks (the next Open of a long
// poll, the open limiter, a restart delay), events queued behind their key
// start and finished ones are committed and saved.
func TestPipelineRunsWhileTheSupervisorBlocks(t *testing.T) {
	tests := []struct {
		name string
		then func(ctx context.Context) ([]ev, error)
		opts []stream.Option
	}{
		{name: "next Open blocks", then: blockUntilDone},
		{name: "open limiter waits", then: blockUntilDone, opts: []stream.Option{stream.WithOpenLimiter(&blockingLimiter{})}},
		{name: "restart delay", then: blockUntilDone, opts: []stream.Option{stream.WithMinRestartDelay(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := cursor.NewMemory[int64](0)
				opts := append([]stream.Option{stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(4), stream.WithOrderKey(byValue)}, tt.opts...)
				r, err := stream.New(firstPage(3, tt.then), extract, store, opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					done <- r.Run(ctx, func(ctx context.Context, _ ev) error {
						time.Sleep(time.Second) // the key's events one after another
						return nil
					})
				}()
				time.Sleep(time.Minute) // three handler seconds, well within the block
				synctest.Wait()
				if st := r.Stats(); st.Events != 3 || st.Cursor != 3 {
					t.Errorf("while blocked: Stats() Events = %d, Cursor = %d, want 3 and 3", st.Events, st.Cursor)
				}
				if got, _ := store.Load(context.Background()); got != 3 {
					t.Errorf("while blocked: Store holds %d, want 3", got)
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want context.Canceled", err)
				}
			})
		})
	}
}

// Defect 3: a handler's failure ends Run while the next Open blocks; the
// Open's context ends with it.
func TestPipelineFailureEndsABlockedOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("handler: boom")
		openEnded := make(chan struct{})
		src := firstPage(3, func(ctx context.Context) ([]ev, error) {
			<-ctx.Done()
			close(openEnded)
			return nil, ctx.Err()
		})
		r := newResumer(t, src, stream.WithConcurrency(4), stream.WithOrderKey(byValue))
		start := time.Now()
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			time.Sleep(time.Second)
			if e.Seq == 2 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("Run() = %v, want %v", err, boom)
		}
		select {
		case <-openEnded:
		default:
			t.Error("the blocked Open's context did not end")
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("Run returned after %v (fake), want 2s: the two handler calls", took)
		}
		if got := r.Cursor(); got != 1 {
			t.Errorf("Cursor() = %d, want 1", got)
		}
	})
}

// closeCounter is a Conn over a fixed list that calls then once the list is
// spent, and counts Close.
type closeCounter struct {
	events []ev
	then   func(ctx context.Context) (ev, error)
	closes atomic.Int64
}

func (c *closeCounter) Recv(ctx context.Context) (ev, error) {
	if len(c.events) > 0 {
		e := c.events[0]
		c.events = c.events[1:]
		return e, nil
	}
	return c.then(ctx)
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

// panickyStore panics in its first Save, then saves.
type panickyStore struct {
	cursor.Memory[int64]
	panicked atomic.Bool
}

func (s *panickyStore) Save(ctx context.Context, c int64) error {
	if !s.panicked.Swap(true) {
		panic("store: boom")
	}
	return s.Memory.Save(ctx, c)
}

// Defects 5 and 7: a panic in Recv, in the order key or in Store.Save under
// WithConcurrency reaches Run's caller (the process lives), after the Conn
// was closed and the committed cursor saved. Events 1 and 2 are handled
// before a fault in Recv or the key; the panicking Save may come at event
// 1's commit, before event 2 starts, which then never does.
func TestPipelinePanicsReachRun(t *testing.T) {
	tests := []struct {
		name        string
		recv        func(ctx context.Context) (ev, error) // after events 1, 2 and 3
		key         func(ev) string
		panickySave bool
		wantPanic   string
		wantCursor  int64
	}{
		{name: "Recv", recv: func(context.Context) (ev, error) { panic("recv: boom") }, wantPanic: "recv: boom", wantCursor: 2},
		{name: "order key", key: func(e ev) string {
			if e.Seq == 3 {
				panic("key: boom")
			}
			return e.Value
		}, wantPanic: "key: boom", wantCursor: 2},
		{name: "Store.Save", panickySave: true, wantPanic: "store: boom", wantCursor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var handled atomic.Int64
				twoHandled := make(chan struct{})
				conn := &closeCounter{events: []ev{{Seq: 1, Value: "a"}, {Seq: 2, Value: "b"}}}
				conn.then = func(ctx context.Context) (ev, error) {
					select {
					case <-twoHandled:
					case <-ctx.Done(): // Save panicked at event 1's commit: event 2 never starts
						return ev{}, ctx.Err()
					}
					if len(conn.events) == 0 && tt.recv != nil {
						return tt.recv(ctx)
					}
					if tt.key != nil {
						conn.then = func(ctx context.Context) (ev, error) { <-ctx.Done(); return ev{}, ctx.Err() }
						return ev{Seq: 3, Value: "c"}, nil
					}
					<-ctx.Done()
					return ev{}, ctx.Err()
				}
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					if opens.Add(1) > 1 {
						return nil, stream.ErrEndOfStream
					}
					return conn, nil
				})
				var store cursor.Store[int64] = cursor.NewMemory[int64](0)
				if tt.panickySave {
					store = &panickyStore{}
				}
				opts := []stream.Option{stream.WithConcurrency(4)}
				if tt.key != nil {
					opts = append(opts, stream.WithOrderKey(tt.key))
				}
				r, err := stream.New(src, extract, store, opts...)
				if err != nil {
					t.Fatal(err)
				}
				panicked, err := runBounded(t, context.Background(), r, func(_ context.Context, e ev) error {
					if handled.Add(1) == 2 {
						close(twoHandled)
					}
					return nil
				})
				if fmt.Sprint(panicked) != tt.wantPanic {
					t.Fatalf("Run panicked with %v (returned %v), want %q", panicked, err, tt.wantPanic)
				}
				if conn.closes.Load() == 0 {
					t.Error("the Conn was not closed")
				}
				got, _ := store.Load(context.Background())
				if c := r.Cursor(); got != c || c < tt.wantCursor {
					t.Errorf("Store holds %d, Cursor() = %d, want both the committed cursor, at least %d", got, c, tt.wantCursor)
				}
			})
		})
	}
}

// Defect 10: with WithCheckpointEvery(0), a connection that ended while an
// event ran is saved once that event is committed, while the next Open
// (a long poll) blocks.
func TestPipelineSavesAtAConnectionsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := cursor.NewMemory[int64](0)
		r, err := stream.New(firstPage(3, blockUntilDone), extract, store, stream.WithConcurrency(4), stream.WithCheckpointEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- r.Run(ctx, func(_ context.Context, e ev) error {
				if e.Seq == 3 {
					<-gate
				}
				return nil
			})
		}()
		synctest.Wait() // the page ended; event 3 runs
		if got, _ := store.Load(context.Background()); got != 0 {
			t.Errorf("before event 3 finished: Store holds %d, want 0", got)
		}
		close(gate)
		synctest.Wait()
		if got, _ := store.Load(context.Background()); got != 3 {
			t.Errorf("after event 3 finished: Store holds %d, want 3", got)
		}
		cancel()
		<-done
	})
}

// tickingConn delivers an event every tick, for ever.
type tickingConn struct {
	tick time.Duration
	seq  int64
}

func (c *tickingConn) Recv(ctx context.Context) (ev, error) {
	select {
	case <-time.After(c.tick):
	case <-ctx.Done():
		return ev{}, ctx.Err()
	}
	c.seq++
	return ev{Seq: c.seq, Value: fmt.Sprint(c.seq % 7)}, nil
}

func (c *tickingConn) Close() error { return nil }

// slowSave takes its time to save.
type slowSave struct {
	cursor.Memory[int64]
	took time.Duration
}

func (s *slowSave) Save(ctx context.Context, c int64) error {
	time.Sleep(s.took)
	return s.Memory.Save(ctx, c)
}

// Defect 11: under WithConcurrency, WithCheckpointInterval(d) waits d after
// a save ended before the next starts, however long saves take.
func TestPipelineIntervalSaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			saves []time.Time
		)
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			return &tickingConn{tick: 100 * time.Millisecond}, nil
		})
		store := &slowSave{took: 700 * time.Millisecond}
		r, err := stream.New(src, extract, cursor.Store[int64](store), stream.WithConcurrency(4), stream.WithCheckpointInterval(time.Second),
			stream.WithHooks(stream.Hooks[int64]{OnSave: func(e stream.SaveEvent[int64]) {
				if !e.Final {
					mu.Lock()
					saves = append(saves, time.Now())
					mu.Unlock()
				}
			}}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Millisecond)
		defer cancel()
		err = r.Run(ctx, func(context.Context, ev) error { time.Sleep(30 * time.Millisecond); return nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run() = %v, want context.DeadlineExceeded", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(saves) < 3 || len(saves) > 6 {
			t.Errorf("%d saves in 10s, want 3 to 6: a 0.7s save each 1s after the last", len(saves))
		}
		for i := 1; i < len(saves); i++ {
			if gap := saves[i].Sub(saves[i-1]); gap < 1700*time.Millisecond {
				t.Errorf("saves %d and %d ended %v apart, want at least 1.7s (1s, then a 0.7s save)", i-1, i, gap)
			}
		}
	})
}

// blockingSave blocks every Save that is not final until ctx ends, and
// says when one blocks.
type blockingSave struct {
	cursor.Memory[int64]
	blocked chan struct{}
}

func (s *blockingSave) Save(ctx context.Context, c int64) error {
	if _, final := ctx.Deadline(); final { // the final save runs with the final-save timeout
		return s.Memory.Save(ctx, c)
	}
	s.blocked <- struct{}{}
	<-ctx.Done()
	return fmt.Errorf("store: %w", ctx.Err())
}

// Defect 12: a connection-end save cut short by ctx's end is no failure:
// neither counted in SaveErrors nor hooked with its error; the final save
// saves.
func TestSaveCutByShutdownIsNoFailure(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &blockingSave{blocked: make(chan struct{}, 1)}
				var hooked []error
				r, err := stream.New(firstPage(2, func(context.Context) ([]ev, error) { return nil, nil }), extract, cursor.Store[int64](store),
					stream.WithConcurrency(n), stream.WithCheckpointEvery(0), stream.WithPollInterval(time.Hour),
					stream.WithHooks(stream.Hooks[int64]{OnSave: func(e stream.SaveEvent[int64]) {
						if !e.Final {
							hooked = append(hooked, e.Err)
						}
					}}))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx, func(context.Context, ev) error { return nil }) }()
				<-store.blocked // the connection-end save
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want context.Canceled", err)
				}
				st := r.Stats()
				if st.SaveErrors != 0 || len(hooked) != 0 {
					t.Errorf("SaveErrors = %d, OnSave errors %v; want none: shutdown is no failure", st.SaveErrors, hooked)
				}
				if got, _ := store.Load(context.Background()); got != 2 {
					t.Errorf("Store holds %d after the final save, want 2", got)
				}
			})
		})
	}
}

// countingConn counts the events Recv delivered, for ever.
type countingConn struct{ read atomic.Int64 }

func (c *countingConn) Recv(ctx context.Context) (ev, error) {
	n := c.read.Add(1)
	return ev{Seq: n, Value: "v"}, nil
}

func (c *countingConn) Close() error { return nil }

// Defect 13: WithWindow(w) with one stuck event reads at most w events.
func TestPipelineReadsAtMostTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := &countingConn{}
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return conn, nil })
		r := newResumer(t, src, stream.WithConcurrency(4), stream.WithWindow(16))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- r.Run(ctx, func(ctx context.Context, e ev) error {
				if e.Seq == 1 {
					<-ctx.Done() // stuck: holds the window
				}
				return nil
			})
		}()
		synctest.Wait()
		if got := conn.read.Load(); got != 16 {
			t.Errorf("%d events read with event 1 stuck, want 16: the window", got)
		}
		if got := r.Stats().InFlight; got != 16 {
			t.Errorf("InFlight = %d, want 16", got)
		}
		cancel()
		<-done
	})
}

// Defect 14: a Store whose Save fails for ever spends the retry budget
// although every connection moves the cursor in memory.
func TestSaveFailingForEverExhaustsRetries(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
					opens.Add(1)
					return newScriptConn(io.EOF, ev{Seq: after + 1}), nil
				})
				store := &flakyStore{fail: errors.New("store: disk full")}
				r, err := stream.New(src, extract, cursor.Store[int64](store), stream.WithConcurrency(n), stream.WithWindow(8),
					stream.WithBackoff(backoff.Exponential(backoff.WithMaxRetries(3), backoff.WithInitialInterval(time.Second))))
				if err != nil {
					t.Fatal(err)
				}
				_, err = runBounded(t, context.Background(), r, func(context.Context, ev) error { return nil })
				if !errors.Is(err, stream.ErrRetriesExhausted) {
					t.Errorf("Run() = %v, want ErrRetriesExhausted", err)
				}
				// One and three retries, and under WithConcurrency the
				// connections that opened before the first save failed: at
				// most the window's worth, read before a handler finished.
				most := int64(4)
				if n > 1 {
					most += 8
				}
				if got := opens.Load(); got > most {
					t.Errorf("%d Opens, want at most %d", got, most)
				}
			})
		})
	}
}

// Defect 17: after a break out of All, OnStop's error is nil, not the
// internal "loop body stopped".
func TestBreakOutOfAllStopsWithoutError(t *testing.T) {
	var stopErr error
	stopped := false
	r := newResumer(t, firstPage(5, blockUntilDone), stream.WithHooks(stream.Hooks[int64]{OnStop: func(e stream.StopEvent[int64]) {
		stopped, stopErr = true, e.Err
	}}))
	for e, err := range r.All(context.Background()) {
		if err != nil {
			t.Fatalf("All yielded %v", err)
		}
		if e.Seq == 2 {
			break
		}
	}
	if !stopped || stopErr != nil {
		t.Errorf("OnStop called %v with %v, want called with nil", stopped, stopErr)
	}
	if got := r.Cursor(); got != 1 {
		t.Errorf("Cursor() = %d, want 1: the event broken on is not committed", got)
	}
}

// Defect 18: WithBatchEnd without RunBatch is refused by Run and All.
func TestBatchEndNeedsRunBatch(t *testing.T) {
	r := newResumer(t, firstPage(1, func(context.Context) ([]ev, error) { return nil, stream.ErrEndOfStream }),
		stream.WithBatchEnd(func(ev) bool { return true }))
	if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run() = %v, want ErrInvalidOption", err)
	}
	yields := 0
	for _, err := range r.All(context.Background()) {
		yields++
		if !errors.Is(err, stream.ErrInvalidOption) {
			t.Errorf("All yielded %v, want ErrInvalidOption", err)
		}
	}
	if yields != 1 {
		t.Errorf("All yielded %d times, want once", yields)
	}
}

// TestPipelineReopensAtCommittedCursor: under WithConcurrency, a Run whose
// first Open failed opens again at once (no backoff) after the Store's
// cursor, never after the zero cursor. The next Open once raced with the
// committer finishing the supervisor's save: while it ran, the pipeline
// said the committed cursor lagged the last event read, and the last
// event read of a Run that read none is the zero cursor (found by
// TestCombinations: "Open after 0 while the committed cursor is 3").
func TestPipelineReopensAtCommittedCursor(t *testing.T) {
	for i := range 300 {
		var opens []int64
		src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
			opens = append(opens, after)
			if len(opens) == 1 {
				return nil, errors.New("injected: connection refused")
			}
			return nil, stream.ErrEndOfStream
		})
		r, err := stream.New(src, extract, cursor.NewMemory[int64](5), stream.WithConcurrency(2), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); err != nil {
			t.Fatalf("run %d: Run() = %v", i, err)
		}
		if diff := cmp.Diff([]int64{5, 5}, opens); diff != "" {
			t.Fatalf("run %d: Opens after (-want +got):\n%s", i, diff)
		}
	}
}

// TestPipelineResyncCommitPanicReachesRun: under WithConcurrency, a Store
// whose Save panics as a resync's cursor is committed makes Run panic with
// the Store's value, each time. The supervisor learned of the panic from
// its call to the committer before the committer recorded it, and could
// find the pipeline settled without it: Run returned nil (found by
// TestCombinations: "Run returned nil, but no Conn reported the end of the
// stream").
func TestPipelineResyncCommitPanicReachesRun(t *testing.T) {
	for i := range 300 {
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			return nil, errclass.CursorExpired(errors.New("injected: cursor gone"))
		})
		resync := func(context.Context, error, func(ev) error) (int64, error) { return 10, nil }
		r, err := stream.New(src, extract, &panickyStore{}, stream.WithConcurrency(2), stream.WithResync(resync))
		if err != nil {
			t.Fatal(err)
		}
		panicked, err := runBounded(t, context.Background(), r, func(context.Context, ev) error { return nil })
		if fmt.Sprint(panicked) != "store: boom" {
			t.Fatalf("run %d: Run panicked with %v and returned %v, want the Store's panic", i, panicked, err)
		}
	}
}
