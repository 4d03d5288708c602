package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A Resumer with a File store is cancelled midway; a fresh store on the same
// path and a new Resumer continue with no gap and, since Run saves as it
// returns, no redelivery.
func TestFileStoreResumesAfterCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stream.cursor")
	tests := []struct {
		name string
		opts []stream.Option
	}{
		{name: "save every event"},
		{name: "every 5 events", opts: []stream.Option{stream.WithCheckpointEvery(5)}},
		{name: "only at the end", opts: []stream.Option{stream.WithCheckpointEvery(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := path + "." + tt.name
			log := letters(40)
			var seen []int64
			life := func(stopAt int64) error {
				store, err := cursor.NewFile(path, int64(0), cursor.Int64())
				if err != nil {
					t.Fatalf("NewFile() = %v", err)
				}
				src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.BreakAfter, K: 7})
				r, err := stream.New(src, extract, store, tt.opts...)
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				return r.Run(ctx, func(_ context.Context, e ev) error {
					seen = append(seen, e.Seq)
					if e.Seq == stopAt {
						cancel()
					}
					return nil
				})
			}
			if err := life(23); !errors.Is(err, context.Canceled) {
				t.Fatalf("first Run() = %v, want %v", err, context.Canceled)
			}
			if err := life(-1); err != nil {
				t.Fatalf("second Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(seqs(1, 40), seen); diff != "" {
				t.Errorf("events over both lives (-want +got):\n%s", diff)
			}
		})
	}
}

// With a checkpoint every n events, the file is never more than n−1 events
// behind what the handler finished: the redelivery a crash can cause.
func TestFileStoreLagIsBounded(t *testing.T) {
	const n = 8
	path := filepath.Join(t.TempDir(), "stream.cursor")
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		t.Fatalf("NewFile() = %v", err)
	}
	r, err := stream.New(streamtest.NewSource(letters(50)), extract, store, stream.WithCheckpointEvery(n))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	maxLag := int64(0)
	err = r.Run(context.Background(), func(ctx context.Context, e ev) error {
		// A crash now would restart from what the file holds.
		fresh, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			return err
		}
		saved, err := fresh.Load(ctx)
		if err != nil {
			return err
		}
		committed := e.Seq - 1
		if saved > committed {
			t.Errorf("file holds %d, ahead of the committed %d", saved, committed)
		}
		maxLag = max(maxLag, committed-saved)
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if maxLag != n-1 {
		t.Errorf("largest lag = %d, want %d", maxLag, n-1)
	}
}

// cancelOnFirstSave is a memory Store whose first Save cancels Run's
// context and fails with its error, as a Store honouring ctx does when the
// process shuts down during the Save.
type cancelOnFirstSave struct {
	cursor.Memory[int64]
	mu     sync.Mutex
	saves  int
	cancel context.CancelFunc
}

// Defect 13: a clean shutdown (ctx cancelled while Store.Save runs) is
// counted and logged as a failure.
func TestShutdownDuringSaveIsNoFailure(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				store := &cancelOnFirstSave{cancel: cancel}
				src := streamtest.NewSource(letters(3))
				src.SetEndOfLog(streamtest.Wait)
				core, logs := observer.New(zapcore.InfoLevel)
				var retries atomic.Int64
				r, err := stream.New(src, extract, store, stream.WithConcurrency(n), stream.WithLogger(zap.New(core)),
					stream.WithHooks(stream.Hooks[int64]{OnRetry: func(stream.RetryEvent[int64]) { retries.Add(1) }}))
				if err != nil {
					t.Fatal(err)
				}
				err = r.Run(ctx, func(context.Context, ev) error { return nil })
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want %v", err, context.Canceled)
				}
				st := r.Stats()
				if st.Retried != 0 || st.Failed != 0 || st.SaveErrors != 0 {
					t.Errorf("Stats() Retried = %d, Failed = %d, SaveErrors = %d, want 0, 0, 0: a shutdown is no failure", st.Retried, st.Failed, st.SaveErrors)
				}
				if got := retries.Load(); got != 0 {
					t.Errorf("OnRetry called %d times, want 0", got)
				}
				for _, e := range logs.All() {
					t.Errorf("logged %s %q %v, want nothing at Info or above", e.Level, e.Message, e.ContextMap())
				}
				if c, _ := store.Load(context.Background()); c != r.Cursor() {
					t.Errorf("saved cursor %d, want the committed %d (the final save)", c, r.Cursor())
				}
			})
		})
	}
}

func TestRepeatedCursorIsNotSaved(t *testing.T) {
	store := &flakyStore{}
	var opens atomic.Int64
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		if opens.Add(1) > 1 {
			return nil, stream.ErrEndOfStream
		}
		return newScriptConn(io.EOF, ev{Seq: 1}, ev{Seq: 1, Value: "beat"}, ev{Seq: 1, Value: "beat"}), nil
	})
	r, err := stream.New(src, heartbeatExtract, store, stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if store.saves != 1 {
		t.Errorf("%d saves, want 1: heartbeats at the committed cursor write nothing", store.saves)
	}
}

func TestFailedSaveIsReportedOnce(t *testing.T) {
	store := &flakyStore{}
	store.setFail(errclass.Permanent(errors.New("disk on fire")))
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		return newScriptConn(io.EOF, ev{Seq: 1}), nil
	})
	r3, err := stream.New(src, extract, store)
	if err != nil {
		t.Fatal(err)
	}
	err = r3.Run(context.Background(), func(context.Context, ev) error { return nil })
	if err == nil {
		t.Fatal("Run() = nil, want the save's error")
	}
	if n := strings.Count(err.Error(), "disk on fire"); n != 1 {
		t.Errorf("Run() = %q: the save's error %d times, want once", err, n)
	}
	if got := r3.Stats().SaveErrors; got != 1 {
		t.Errorf("Stats().SaveErrors = %d, want 1 for one cursor", got)
	}
}

// failingSave is a Store that loads initial and fails every Save.
type failingSave[C any] struct {
	initial C
	err     error
}

// quietConn delivers its events, then blocks until ctx ends or it is
// closed: a stream that went quiet.
type quietConn struct {
	events []ev
	once   sync.Once
	closed chan struct{}
}

func newQuietConn(events ...ev) *quietConn {
	return &quietConn{events: events, closed: make(chan struct{})}
}

func (c *quietConn) Recv(ctx context.Context) (ev, error) {
	if len(c.events) > 0 {
		e := c.events[0]
		c.events = c.events[1:]
		return e, nil
	}
	select {
	case <-ctx.Done():
		return ev{}, ctx.Err()
	case <-c.closed:
		return ev{}, errors.New("quietConn: closed")
	}
}

func (c *quietConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// A stream that goes quiet under WithCheckpointInterval is saved once the
// interval has passed, not at its next event (which may never come): with
// one handler (Run's goroutine waits in Recv) and with several.
func TestQuietStreamSavedAfterInterval(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch bool
		opts  []stream.Option
	}{
		{name: "concurrency=1"},
		{name: "concurrency=4", opts: []stream.Option{stream.WithConcurrency(4)}},
		{name: "RunBatch", batch: true, opts: []stream.Option{stream.WithBatch(10, 0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					return newQuietConn(ev{Seq: 1}, ev{Seq: 2}, ev{Seq: 3}), nil
				})
				store := cursor.NewMemory[int64](0)
				r, err := stream.New(src, extract, cursor.Store[int64](store), append(c.opts, stream.WithCheckpointInterval(time.Second))...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					if c.batch {
						done <- r.RunBatch(ctx, func(context.Context, []ev) error { return nil })
						return
					}
					done <- r.Run(ctx, func(context.Context, ev) error { return nil })
				}()
				synctest.Wait() // all three handled; the stream is quiet
				if got := r.Stats().Cursor; got != 3 {
					t.Fatalf("Stats().Cursor = %d, want 3", got)
				}
				if got, _ := store.Load(ctx); got == 3 {
					t.Fatalf("Store holds 3 before the interval passed; the test shows nothing")
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if got, _ := store.Load(ctx); got != 3 {
					t.Errorf("Store holds %d one interval after the stream went quiet, want 3", got)
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want context.Canceled", err)
				}
			})
		})
	}
}

// The quiet save of a serial loop is a save like any: its failure ends the
// connection (counted, reopened), and its panic reaches Run's caller, even
// though Run's goroutine was waiting in Recv on a stream that stays quiet.
func TestQuietSaveFailureAndPanic(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "failure"
		if batch {
			name = "failure/RunBatch"
		}
		t.Run(name, func(t *testing.T) { quietSaveFails(t, batch) })
	}
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
				return newQuietConn(ev{Seq: 1}, ev{Seq: 2}), nil
			})
			store := &panicOnSave{at: 2}
			r, err := stream.New(src, extract, cursor.Store[int64](store), stream.WithCheckpointInterval(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			p, err := runBounded(t, context.Background(), r, func(context.Context, ev) error { return nil })
			if p != "quiet save" {
				t.Errorf("Run() panicked with %v (err %v), want the Store's panic", p, err)
			}
		})
	})
	t.Run("panic/RunBatch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
				return newQuietConn(ev{Seq: 1}, ev{Seq: 2}), nil
			})
			store := &panicOnSave{at: 2}
			r, err := stream.New(src, extract, cursor.Store[int64](store), stream.WithCheckpointInterval(time.Second), stream.WithBatch(10, 0))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan any, 1)
			go func() {
				defer func() { done <- recover() }()
				_ = r.RunBatch(context.Background(), func(context.Context, []ev) error { return nil })
			}()
			if p := <-done; p != "quiet save" {
				t.Errorf("RunBatch() panicked with %v, want the Store's panic", p)
			}
		})
	})
}

// quietSaveFails runs TestQuietSaveFailureAndPanic's failure under Run or
// RunBatch.
func quietSaveFails(t *testing.T, batch bool) {
	synctest.Test(t, func(t *testing.T) {
		var opens atomic.Int64
		src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
			if opens.Add(1) == 1 {
				return newQuietConn(ev{Seq: 1}, ev{Seq: 2}), nil
			}
			return newQuietConn(), nil
		})
		store := &nthSaveFails{n: 1, err: errors.New("disk full")} // the quiet save is the first
		opts := []stream.Option{stream.WithCheckpointInterval(time.Second), stream.WithBackoff(backoff.Constant(time.Millisecond))}
		if batch {
			opts = append(opts, stream.WithBatch(10, 0))
		}
		r, err := stream.New(src, extract, cursor.Store[int64](store), opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			if batch {
				done <- r.RunBatch(ctx, func(context.Context, []ev) error { return nil })
				return
			}
			done <- r.Run(ctx, func(context.Context, ev) error { return nil })
		}()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := r.Stats()
		if st.SaveErrors != 1 || st.Opens != 2 || st.Saves != 1 {
			t.Errorf("Stats() = %+v; want 1 failed quiet save that ended its connection, a reopen, and a quiet save on it", st)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run() = %v, want context.Canceled", err)
		}
	})
}

// panicOnSave panics saving cursor at, once.
type panicOnSave struct {
	cursor.Memory[int64]
	at   int64
	done bool
}

func (s *panicOnSave) Save(ctx context.Context, c int64) error {
	if c == s.at && !s.done {
		s.done = true
		panic("quiet save")
	}
	return s.Memory.Save(ctx, c)
}

// Under WithCheckpointEvery and WithCheckpointInterval together, a save by
// count moves the interval's start: the quiet save's timer, set before
// that save, fires early (while a handler runs), and the commit after it
// is no save by time. The timer's firing only tells a commit to look at
// the clock again (a commit skips the clock while the timer is set).
func TestIntervalCountsFromTheLastSaveByCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var saved []int64
		hooks := stream.Hooks[int64]{OnSave: func(e stream.SaveEvent[int64]) {
			mu.Lock()
			saved = append(saved, e.Cursor)
			mu.Unlock()
		}}
		r, err := stream.New(streamtest.NewSource(letters(4)), extract, cursor.Store[int64](cursor.NewMemory[int64](0)),
			stream.WithCheckpointEvery(2), stream.WithCheckpointInterval(time.Minute), stream.WithHooks(hooks))
		if err != nil {
			t.Fatal(err)
		}
		// Commits at 1s, 2s (the second: a save by count), 61s and 62s
		// (by count). The timer, set at the leave after the first commit,
		// fires at 60s, while event 3's handler runs: 59s after the save
		// at 2s.
		took := map[int64]time.Duration{1: time.Second, 2: time.Second, 3: 59 * time.Second, 4: time.Second}
		err = r.Run(context.Background(), func(_ context.Context, e ev) error {
			time.Sleep(took[e.Seq])
			if e.Seq == 4 {
				return stream.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]int64{2, 4}, saved); diff != "" {
			t.Errorf("saved cursors (-want +got):\n%s", diff)
		}
	})
}
