package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// Regression tests for the defects of issue 31, found where features meet.
// TestSeamN is defect N of the issue.

// listConn delivers its events, then ends with end. Close does nothing, so
// it may run concurrently with Recv.
type listConn[T any] struct {
	evs []T
	end error
}

func (c *listConn[T]) Recv(context.Context) (T, error) {
	if len(c.evs) == 0 {
		var zero T
		return zero, c.end
	}
	e := c.evs[0]
	c.evs = c.evs[1:]
	return e, nil
}

func (c *listConn[T]) Close() error { return nil }

// listSource serves events (their cursors given by seq, in increasing
// order): each Open delivers those after its cursor, then the end of the
// stream.
func listSource[T any](events []T, seq func(T) int64) stream.Source[T, int64] {
	return stream.SourceFunc[T, int64](func(_ context.Context, after int64) (stream.Conn[T], error) {
		var out []T
		for _, e := range events {
			if seq(e) > after {
				out = append(out, e)
			}
		}
		return &listConn[T]{evs: out, end: stream.ErrEndOfStream}, nil
	})
}

// tally counts handler calls per sequence number; it is safe for
// concurrent use.
type tally struct {
	mu    sync.Mutex
	calls map[int64]int
	order []int64
}

func (h *tally) add(seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = make(map[int64]int)
	}
	h.calls[seq]++
	h.order = append(h.order, seq)
}

// missing returns the numbers in [1, n] never seen.
func (h *tally) missing(n int64) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int64
	for i := int64(1); i <= n; i++ {
		if h.calls[i] == 0 {
			out = append(out, i)
		}
	}
	return out
}

func (h *tally) seen() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}

// nthSaveFails is a memory Store whose nth Save fails, once, with err.
type nthSaveFails struct {
	cursor.Memory[int64]
	mu    sync.Mutex
	n     int
	saves int
	err   error
}

func (s *nthSaveFails) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	s.saves++
	fail := s.saves == s.n
	s.mu.Unlock()
	if fail {
		return s.err
	}
	return s.Memory.Save(ctx, c)
}

// Defect 1: one transient Store.Save failure under WithConcurrency(n > 1)
// ends all handling. how-it-decides.md: "A failed Save is classified like
// any failure": retried, and the stream goes on.
func TestSeam1TransientSaveFailureUnderConcurrency(t *testing.T) {
	tests := []struct {
		name string
		n    int
		live bool // the log stays open: Run goes on until cancelled
	}{
		{name: "n=1", n: 1},
		{name: "n=2", n: 2},
		{name: "n=4", n: 4},
		{name: "live n=1", n: 1, live: true},
		{name: "live n=2", n: 2, live: true},
		{name: "live n=4", n: 4, live: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &nthSaveFails{n: 3, err: errors.New("store: connection reset")}
				src := streamtest.NewSource(letters(20))
				if tt.live {
					src.SetEndOfLog(streamtest.Wait)
				}
				// A window of 4 leaves most of the log unread when the save
				// fails, whatever the goroutines' timing.
				r, err := stream.New(src, extract, store, stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(tt.n), stream.WithWindow(4))
				if err != nil {
					t.Fatal(err)
				}
				var h tally
				// A fake hour: a loop that stopped handling shows as a Run
				// that does not end (or a live log that does not move).
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				err = r.Run(ctx, func(_ context.Context, e ev) error { h.add(e.Seq); return nil })
				want := error(nil)
				if tt.live {
					want = context.DeadlineExceeded
				}
				if !errors.Is(err, want) || (want == nil && err != nil) {
					t.Errorf("Run() = %v, want %v", err, want)
				}
				if m := h.missing(20); len(m) > 0 {
					t.Errorf("events %v never handled (%d of 20 handled)", m, 20-len(m))
				}
				st := r.Stats()
				if st.Cursor != 20 {
					t.Errorf("Stats().Cursor = %d, want 20", st.Cursor)
				}
				if st.SaveErrors != 1 || st.Retried != 1 {
					t.Errorf("Stats() SaveErrors = %d, Retried = %d, want 1 and 1 (one failed save, retried once)", st.SaveErrors, st.Retried)
				}
				if c, _ := store.Load(context.Background()); c != 20 {
					t.Errorf("saved cursor %d, want 20", c)
				}
			})
		})
	}
}

// Defect 2: breaking out of All with WithHandlerRetry or WithDeadLetter
// panics. All's doc: "Breaking out of the loop … leaves the event it broke
// on uncommitted, to be delivered again by the next Run or All".
func TestSeam2BreakOutOfAllWithRetryOrDeadLetter(t *testing.T) {
	var parks atomic.Int64
	park := func(context.Context, ev, error) error { parks.Add(1); return nil }
	tests := []struct {
		name string
		opts []stream.Option
	}{
		{name: "handler retry", opts: []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0))}},
		{name: "dead letter", opts: []stream.Option{stream.WithDeadLetter(park)}},
		{name: "both", opts: []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0)), stream.WithDeadLetter(park)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parks.Store(0)
				store := cursor.NewMemory[int64](0)
				r, err := stream.New(streamtest.NewSource(letters(5)), extract, store,
					append([]stream.Option{stream.WithBackoff(backoff.Constant(0))}, tt.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				var seen []int64
				panicked := func() (p any) {
					defer func() { p = recover() }()
					for e, err := range r.All(context.Background()) {
						if err != nil {
							t.Errorf("All yielded %v", err)
							return nil
						}
						seen = append(seen, e.Seq)
						if e.Seq == 3 {
							break
						}
					}
					return nil
				}()
				if panicked != nil {
					t.Fatalf("breaking out of All panicked: %v", panicked)
				}
				if fmt.Sprint(seen) != "[1 2 3]" {
					t.Errorf("All yielded %v, want [1 2 3]", seen)
				}
				if got := parks.Load(); got != 0 {
					t.Errorf("the dead letter was called %d times, want 0: a break is no failure", got)
				}
				st := r.Stats()
				if st.Cursor != 2 || st.Parked != 0 || st.HandlerRetries != 0 {
					t.Errorf("Stats() Cursor = %d, Parked = %d, HandlerRetries = %d, want 2, 0, 0", st.Cursor, st.Parked, st.HandlerRetries)
				}
				if c, _ := store.Load(context.Background()); c != 2 {
					t.Errorf("saved cursor %d, want 2: the event broken on stays uncommitted", c)
				}
				var again []int64
				if err := r.Run(context.Background(), record(&again)); err != nil {
					t.Fatalf("Run() after the break = %v, want nil", err)
				}
				if fmt.Sprint(again) != "[3 4 5]" {
					t.Errorf("Run after the break handled %v, want [3 4 5]", again)
				}
			})
		})
	}
}

// Defect 3: Tokens never passes an empty page that carries a next token.
func TestSeam3TokensEmptyPageWithNextToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fetches := map[string]int{}
		fetch := func(_ context.Context, token string) ([]string, string, error) {
			mu.Lock()
			fetches[token]++
			mu.Unlock()
			switch token {
			case "":
				return []string{"a", "b"}, "t1", nil
			case "t1":
				return nil, "t2", nil // an empty page, with a next token
			case "t2":
				return []string{"c", "d"}, "t3", nil
			}
			return nil, "", nil // no later page yet
		}
		src, ext := stream.Tokens(fetch)
		r, err := stream.New(src, ext, cursor.NewMemory(""), stream.WithPollInterval(time.Second), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var seen []string
		err = r.Run(ctx, func(_ context.Context, it stream.TokenItem[string]) error {
			seen = append(seen, it.Item)
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run() = %v, want %v", err, context.DeadlineExceeded)
		}
		if fmt.Sprint(seen) != "[a b c d]" {
			t.Errorf("handled %v in a fake minute, want [a b c d]", seen)
		}
		mu.Lock()
		defer mu.Unlock()
		if fetches["t1"] > 2 {
			t.Errorf("the empty page t1 was fetched %d times in a fake minute, want at most 2 (fetches: %v)", fetches["t1"], fetches)
		}
		if got := r.Cursor(); got != "t3" {
			t.Errorf("Cursor() = %q, want %q", got, "t3")
		}
	})
}

// Defect 4: cancelling ctx after the Source reported ErrEndOfStream, while
// keyed events are still queued, makes Run return nil. Run's doc: "ctx's
// error when ctx ends".
func TestSeam4CancelAfterEndOfStreamWithQueuedEvents(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ended := make(chan struct{})
				var once sync.Once
				src := wrapConns(streamtest.NewSource(letters(6)), func(c stream.Conn[ev]) stream.Conn[ev] {
					return recvFunc{Conn: c, recv: func(ctx context.Context) (ev, error) {
						e, err := c.Recv(ctx)
						if errors.Is(err, stream.ErrEndOfStream) {
							once.Do(func() { close(ended) })
						}
						return e, err
					}}
				})
				r := newResumer(t, src, stream.WithConcurrency(n), stream.WithOrderKey(func(ev) string { return "one key" }))
				release := make(chan struct{})
				var h tally
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					done <- r.Run(ctx, func(_ context.Context, e ev) error {
						h.add(e.Seq)
						if e.Seq == 1 {
							<-release
						}
						return nil
					})
				}()
				<-ended         // all six read, events 2..6 queued behind event 1's key
				synctest.Wait() // the loop has taken the end in: only event 1's handler holds Run
				cancel()
				close(release)
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want %v (handled %v)", err, context.Canceled, h.seen())
				}
				if got := r.Cursor(); got > int64(len(h.seen())) {
					t.Errorf("Cursor() = %d beyond the %d events handled", got, len(h.seen()))
				}
			})
		})
	}
}

// Defect 5: after a handler error, ErrStop or cancellation, the events
// already queued still start. concurrency.md: "reading stops; running
// handlers finish".
func TestSeam5NothingStartsAfterAnEnd(t *testing.T) {
	boom := errors.New("handler: boom")
	tests := []struct {
		name       string
		first      error // what event 1 returns
		cancel     bool  // ctx is cancelled while events 1 and 2 run
		want       error
		wantCursor int64
	}{
		{name: "handler error", first: boom, want: boom, wantCursor: 0},
		{name: "ErrStop", first: stream.ErrStop, want: nil, wantCursor: 1},
		{name: "cancellation", cancel: true, want: context.Canceled, wantCursor: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newResumer(t, streamtest.NewSource(letters(100)), stream.WithConcurrency(2))
				gate1, gate2 := make(chan struct{}), make(chan struct{})
				var h tally
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					done <- r.Run(ctx, func(_ context.Context, e ev) error {
						h.add(e.Seq)
						switch e.Seq {
						case 1:
							<-gate1
							return tt.first
						case 2:
							<-gate2
						}
						return nil
					})
				}()
				synctest.Wait() // events 1 and 2 run; the window is full
				if tt.cancel {
					cancel()
				}
				close(gate1)
				synctest.Wait()
				close(gate2)
				err := <-done
				if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
					t.Errorf("Run() = %v, want %v", err, tt.want)
				}
				if got := h.seen(); len(got) != 2 {
					t.Errorf("%d handler calls (%v...), want 2: only the events running when it ended", len(got), got[:min(len(got), 5)])
				}
				if got := r.Cursor(); got != tt.wantCursor {
					t.Errorf("Cursor() = %d, want %d", got, tt.wantCursor)
				}
			})
		})
	}
}

// mutable is an event handed over by pointer, which a handler may change.
type mutable struct {
	Seq int64
	Key string
}

// Defect 6: the order key is computed again after the handler ran; a
// handler that changes its event strands the key's queue.
func TestSeam6OrderKeyOfAMutatedEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []*mutable
		for i := range 20 {
			events = append(events, &mutable{Seq: int64(i + 1), Key: []string{"a", "b"}[i%2]})
		}
		src := listSource(events, func(e *mutable) int64 { return e.Seq })
		r, err := stream.New(src, func(e *mutable) (int64, error) { return e.Seq, nil }, cursor.NewMemory[int64](0),
			stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(2),
			stream.WithOrderKey(func(e *mutable) string { return e.Key }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var h tally
		err = r.Run(ctx, func(_ context.Context, e *mutable) error {
			h.add(e.Seq)
			e.Key = "handled " + e.Key // the handler owns its event
			return nil
		})
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if m := h.missing(20); len(m) > 0 {
			t.Errorf("events %v never handled (%d of 20)", m, 20-len(m))
		}
		if got := r.Cursor(); got != 20 {
			t.Errorf("Cursor() = %d, want 20", got)
		}
	})
}

// Defect 7: hooks run concurrently on handler goroutines. The Hooks doc:
// "called on the Resumer's goroutine". Two hooks must never overlap,
// whatever n is; under -race the hooks' unlocked counter races as well.
func TestSeam7HooksNeverOverlap(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					inside   atomic.Bool
					overlaps atomic.Int64
					entered  = make(chan struct{}, 1)
					shared   int // unlocked on purpose: hooks are called one at a time (-race checks)
					calls    int
					first    = true
				)
				hook := func() {
					shared++
					if inside.Swap(true) {
						overlaps.Add(1)
						select {
						case entered <- struct{}{}:
						default:
						}
						return
					}
					calls++
					if first {
						first = false
						// The first hook lingers a fake second: a hook called
						// from another goroutine meanwhile enters and is seen.
						select {
						case <-entered:
						case <-time.After(time.Second):
						}
					}
					inside.Store(false)
				}
				hooks := stream.Hooks[int64]{
					OnHandlerError: func(stream.HandlerEvent[int64]) { hook() },
					OnCommit:       func(stream.CommitEvent[int64]) { hook() },
				}
				r := newResumer(t, streamtest.NewSource(letters(8)), stream.WithConcurrency(n),
					stream.WithHandlerRetry(2, backoff.Constant(0)),
					stream.WithDeadLetter(func(context.Context, ev, error) error { return nil }),
					stream.WithHooks(hooks))
				err := r.Run(context.Background(), func(context.Context, ev) error { return errors.New("handler: flaky") })
				if err != nil {
					t.Errorf("Run() = %v, want nil (every event parked)", err)
				}
				if got := overlaps.Load(); got > 0 {
					t.Errorf("a hook was called while another ran, %d times (n = %d)", got, n)
				}
				if want := 8*2 + 8; calls+int(overlaps.Load()) != want {
					t.Errorf("%d hook calls, want %d (two failed tries and a commit per event)", calls+int(overlaps.Load()), want)
				}
				if shared != calls+int(overlaps.Load()) {
					t.Errorf("the hooks' unlocked counter is %d after %d calls", shared, calls+int(overlaps.Load()))
				}
			})
		})
	}
}

// Defect 8: with WithHandlerRetry or WithDeadLetter, a handler that fails
// after ctx ended makes Run return the handler's error. failures.md: "any
// error once ctx ended … Run returns ctx's error".
func TestSeam8HandlerFailureAfterCancelReturnsCtxError(t *testing.T) {
	var parks atomic.Int64
	park := func(context.Context, ev, error) error { parks.Add(1); return nil }
	tests := []struct {
		name string
		n    int
		opt  stream.Option
	}{
		{name: "retry n=1", n: 1, opt: stream.WithHandlerRetry(3, backoff.Constant(0))},
		{name: "dead letter n=1", n: 1, opt: stream.WithDeadLetter(park)},
		{name: "retry n=2", n: 2, opt: stream.WithHandlerRetry(3, backoff.Constant(0))},
		{name: "dead letter n=2", n: 2, opt: stream.WithDeadLetter(park)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parks.Store(0)
				r := newResumer(t, streamtest.NewSource(letters(3)), tt.opt, stream.WithConcurrency(tt.n))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				dbDown := errors.New("db: connection refused")
				err := r.Run(ctx, func(_ context.Context, e ev) error {
					if e.Seq == 1 {
						cancel() // the shutdown begins while the handler runs
						return dbDown
					}
					return nil
				})
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want %v", err, context.Canceled)
				}
				if got := parks.Load(); got != 0 {
					t.Errorf("%d events parked, want 0: nothing is parked once ctx ended", got)
				}
				if got := r.Cursor(); got != 0 {
					t.Errorf("Cursor() = %d, want 0", got)
				}
			})
		})
	}
}

// Defect 9: WithHandlerRetry accepts a policy WithBackoff refuses.
func TestSeam9HandlerRetryRefusesAnInvalidPolicy(t *testing.T) {
	bad := backoff.Exponential(backoff.WithMultiplier(0.5))
	src := streamtest.NewSource(letters(1))
	if _, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(bad)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("New(WithBackoff(multiplier 0.5)) = %v, want %v", err, stream.ErrInvalidOption)
	}
	if _, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithHandlerRetry(5, bad)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithHandlerRetry(5, multiplier 0.5)) = %v, want %v", err, stream.ErrInvalidOption)
	}
}

// Defect 10: no OnCommit for the cursor a resync returns. concurrency.md:
// OnCommit is called "one for the cursor a resync returns, none per replayed
// event".
func TestSeam10OnCommitForTheResyncCursor(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
					if after == 0 {
						return nil, errclass.CursorExpired(errors.New("compacted"))
					}
					return nil, stream.ErrEndOfStream
				})
				var commits []int64
				var mu sync.Mutex
				r := newResumer(t, src, stream.WithConcurrency(n),
					stream.WithResync(func(_ context.Context, _ error, emit func(ev) error) (int64, error) {
						for _, s := range []int64{7, 8} {
							if err := emit(ev{Seq: s}); err != nil {
								return 0, err
							}
						}
						return 10, nil
					}),
					stream.WithHooks(stream.Hooks[int64]{OnCommit: func(e stream.CommitEvent[int64]) {
						mu.Lock()
						commits = append(commits, e.Cursor)
						mu.Unlock()
					}}))
				var h tally
				if err := r.Run(context.Background(), func(_ context.Context, e ev) error { h.add(e.Seq); return nil }); err != nil {
					t.Fatalf("Run() = %v, want nil", err)
				}
				if got := h.seen(); len(got) != 2 {
					t.Errorf("handled %v, want the replay's two events", got)
				}
				mu.Lock()
				defer mu.Unlock()
				if fmt.Sprint(commits) != "[10]" {
					t.Errorf("OnCommit cursors %v, want [10]", commits)
				}
			})
		})
	}
}

// Defect 11: Stats.Parked counts an event parked but not committed, and the
// next Run parks it again without any crash. Stats' doc: Parked counts
// events "handed to the dead letter and committed"; failures.md: "at most
// twice for one crash".
func TestSeam11ParkedButNotCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		parks := map[int64]int{}
		park := func(_ context.Context, e ev, _ error) error {
			mu.Lock()
			parks[e.Seq]++
			mu.Unlock()
			return nil
		}
		r := newResumer(t, streamtest.NewSource(letters(3)), stream.WithConcurrency(2), stream.WithDeadLetter(park))
		failed2 := make(chan struct{})
		var once sync.Once
		handle := func(_ context.Context, e ev) error {
			switch e.Seq {
			case 1:
				<-failed2 // event 2 failed meanwhile
				return stream.ErrStop
			case 2:
				once.Do(func() { close(failed2) })
				return errors.New("handler: poison")
			}
			return nil
		}
		if err := r.Run(context.Background(), handle); err != nil {
			t.Fatalf("first Run() = %v, want nil (ErrStop)", err)
		}
		st := r.Stats()
		if st.Cursor != 1 {
			t.Fatalf("Cursor after ErrStop on event 1 = %d, want 1", st.Cursor)
		}
		mu.Lock()
		committedParks := 0
		for seq, k := range parks {
			if seq <= st.Cursor {
				committedParks += k
			}
		}
		mu.Unlock()
		if st.Parked != uint64(committedParks) {
			t.Errorf("Stats().Parked = %d with cursor %d, want %d: an event parked but not committed is not counted", st.Parked, st.Cursor, committedParks)
		}
		if err := r.Run(context.Background(), handle); err != nil {
			t.Fatalf("second Run() = %v, want nil", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if parks[2] != 1 {
			t.Errorf("event 2 parked %d times over two Runs and no crash, want once", parks[2])
		}
		if st := r.Stats(); st.Parked != 1 || st.Cursor != 3 {
			t.Errorf("Stats() Parked = %d, Cursor = %d after both Runs, want 1 and 3", st.Parked, st.Cursor)
		}
	})
}

// opaque is an event with only unexported fields: its JSON encoding is {}.
type opaque struct{ seq int64 }

// Defect 12: the dead letter accepts a lossy event. failures.md: "the
// stream stops rather than park what could not be replayed".
func TestSeam12DeadLetterRefusesALossyEvent(t *testing.T) {
	ext := func(e opaque) (int64, error) { return e.seq, nil }
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	dl, err := deadletter.Open(path, ext)
	if err != nil {
		// Refusing the type up front also keeps the lossy event out.
		t.Logf("deadletter.Open refused the type: %v", err)
		return
	}
	defer dl.Close()
	store := cursor.NewMemory[int64](0)
	src := listSource([]opaque{{seq: 1}}, func(e opaque) int64 { return e.seq })
	r, err := stream.New(src, ext, store, stream.WithBackoff(backoff.Constant(0)), stream.WithDeadLetter(dl.Park))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(context.Context, opaque) error {
		return errclass.Permanent(errors.New("handler: poison"))
	})
	if err == nil {
		t.Errorf("Run() = nil, want an error: the event cannot be parked without loss")
	}
	if c, _ := store.Load(context.Background()); c != 0 || r.Cursor() != 0 {
		t.Errorf("saved cursor %d, Cursor() %d, want 0 and 0: the event stays uncommitted", c, r.Cursor())
	}
	if got := r.Stats().Parked; got != 0 {
		t.Errorf("Stats().Parked = %d, want 0", got)
	}
	for rec, err := range deadletter.Read[opaque, int64](path) {
		t.Errorf("the file holds a record %+v (err %v), want none", rec, err)
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

func (s *cancelOnFirstSave) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	s.saves++
	first := s.saves == 1
	s.mu.Unlock()
	if first {
		s.cancel()
		return fmt.Errorf("store: writing cursor %d: %w", c, ctx.Err())
	}
	return s.Memory.Save(ctx, c)
}

// Defect 13: a clean shutdown (ctx cancelled while Store.Save runs) is
// counted and logged as a failure.
func TestSeam13ShutdownDuringSaveIsNoFailure(t *testing.T) {
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

// Found by TestCombinations, beyond the list: after a transient
// Store.Save failure under WithConcurrency(n > 1), a resync's replay never
// reaches the handler, yet the resync's cursor is committed and saved: the
// replayed events are lost. (The same root as defect 1.)
func TestSeamX1ResyncAfterAFailedSaveHandlesTheReplay(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					switch opens.Add(1) {
					case 1: // three events, then a live connection
						c := newScriptConn(io.EOF, ev{Seq: 1}, ev{Seq: 2}, ev{Seq: 3})
						c.block = true
						return c, nil
					case 2:
						return nil, errclass.CursorExpired(errors.New("compacted"))
					}
					return nil, stream.ErrEndOfStream
				})
				store := &nthSaveFails{n: 1, err: errors.New("store: connection reset")}
				r, err := stream.New(src, extract, store, stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(n),
					stream.WithResync(func(_ context.Context, _ error, emit func(ev) error) (int64, error) {
						for _, s := range []int64{10, 11} {
							if err := emit(ev{Seq: s}); err != nil {
								return 0, err
							}
						}
						return 11, nil
					}))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var h tally
				if err := r.Run(ctx, func(_ context.Context, e ev) error { h.add(e.Seq); return nil }); err != nil {
					t.Errorf("Run() = %v, want nil", err)
				}
				if m := h.missing(11); !slices.Contains(h.seen(), 10) || !slices.Contains(h.seen(), 11) || slices.Contains(m, 1) {
					t.Errorf("handled %v, want 1 and the replayed 10 and 11 among them", h.seen())
				}
				if st := r.Stats(); st.Cursor != 11 || st.Resyncs != 1 {
					t.Errorf("Stats() Cursor = %d, Resyncs = %d, want 11 and 1", st.Cursor, st.Resyncs)
				}
			})
		})
	}
}

// Found by TestCombinations: a transient Store.Save failure at the end of a
// connection that ended on an expired cursor makes the expiry terminal
// ("no resync possible here") although WithResync is set; and the Store is
// left behind the committed cursor with no final save tried
// (Stats.FinalSaveError nil).
func TestSeamX2ExpiryWithAFailedSaveStillResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var opens atomic.Int64
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			if opens.Add(1) == 1 {
				return newScriptConn(errclass.CursorExpired(errors.New("compacted")), ev{Seq: 1}), nil
			}
			return nil, stream.ErrEndOfStream
		})
		// Saved every 10 commits: the save comes at the connection's end.
		store := &nthSaveFails{n: 1, err: errors.New("store: connection reset")}
		r, err := stream.New(src, extract, store, stream.WithBackoff(backoff.Constant(0)), stream.WithCheckpointEvery(10),
			stream.WithResync(func(context.Context, error, func(ev) error) (int64, error) { return 5, nil }))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); err != nil {
			t.Errorf("Run() = %v, want nil: the save's failure is transient and a resync hook is set", err)
		}
		st := r.Stats()
		if st.Resyncs != 1 || st.Cursor != 5 {
			t.Errorf("Stats() Resyncs = %d, Cursor = %d, want 1 and 5", st.Resyncs, st.Cursor)
		}
		if c, _ := store.Load(context.Background()); c != st.Cursor && st.FinalSaveError == nil {
			t.Errorf("the Store holds %d, the committed cursor is %d, and Stats().FinalSaveError is nil", c, st.Cursor)
		}
	})
}

// Found by TestCombinations: Stats.Events counts the events of a resync's
// replay that never completed, whose cursor is not committed. Stats' doc:
// "events delivered to the handler and committed, a resync's replay
// included".
func TestSeamX3EventsCountOnlyACompletedReplay(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					return nil, errclass.CursorExpired(errors.New("compacted"))
				})
				r := newResumer(t, src, stream.WithConcurrency(n),
					stream.WithResync(func(_ context.Context, _ error, emit func(ev) error) (int64, error) {
						for _, s := range []int64{10, 11} {
							if err := emit(ev{Seq: s}); err != nil {
								return 0, err
							}
						}
						return 11, nil
					}))
				boom := errors.New("handler: boom")
				err := r.Run(context.Background(), func(_ context.Context, e ev) error {
					if e.Seq == 11 {
						return boom
					}
					return nil
				})
				if !errors.Is(err, boom) {
					t.Fatalf("Run() = %v, want %v", err, boom)
				}
				if st := r.Stats(); st.Events != 0 || st.Resyncs != 0 || st.Cursor != 0 {
					t.Errorf("Stats() Events = %d, Resyncs = %d, Cursor = %d, want 0, 0, 0: the replay did not complete", st.Events, st.Resyncs, st.Cursor)
				}
			})
		})
	}
}

// Found by TestCombinations after the window stopped draining at clean
// ends: a try that ends in a park (WithDeadLetter) frees its handler, but
// nothing started the next ready event until another try finished. With
// every running try parked and reading stopped (the window full, or the
// stream's end read), the run waited for ever.
func TestSeamX4AParkFreesItsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		src := streamtest.NewSource(letters(3))
		var mu sync.Mutex
		began := map[int64]time.Duration{}
		r, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithConcurrency(2),
			stream.WithDeadLetter(func(context.Context, ev, error) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background(), func(_ context.Context, e ev) error {
			mu.Lock()
			began[e.Seq] = time.Since(start)
			mu.Unlock()
			switch e.Seq {
			case 1: // holds the head of the window
				time.Sleep(30 * time.Millisecond)
			case 2: // spent at once: parked once it heads the window
				time.Sleep(10 * time.Millisecond)
				return errclass.Permanent(errors.New("poison"))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if got := began[3]; got != 10*time.Millisecond {
			t.Errorf("event 3 started at %v, want 10ms: when event 2's try ended in a park", got)
		}
		if st := r.Stats(); st.Cursor != 3 || st.Parked != 1 {
			t.Errorf("Stats() Cursor = %d, Parked = %d, want 3, 1", st.Cursor, st.Parked)
		}
	})
}
