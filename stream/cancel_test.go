package stream_test

// Cancellation at random moments: whatever the Resumer is doing —
// handling an event, committing, saving, opening, reading a Recv that
// ignores ctx, waiting out a backoff or a server delay, resyncing — Run
// returns ctx's error within a generous bound, the Conn is closed, the
// events handled so far were handled once and in order and are saved, and
// no goroutine is left behind (goleak, in TestMain).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

var cancelCases = flag.Int("cancel.cases", 0, "cancellation test: random cases (default 200, 40 with -short)")

// cancelBound bounds how long Run may take to return; generous, so that a
// loaded machine cannot break it. It is a hang detector, not a timing check.
const cancelBound = 10 * time.Second

// cancelTrigger is the moment a case cancels Run's context.
type cancelTrigger int

const (
	cancelInHandler     cancelTrigger = iota // the handler cancels at its k-th event
	cancelOnCommit                           // the OnCommit hook, at the k-th commit
	cancelOnRetry                            // the OnRetry hook, at the k-th retry, just before the wait
	cancelBeforeOpen                         // inside Open, before the source is asked
	cancelAfterOpen                          // inside Open, after the source returned a Conn
	cancelInResync                           // inside the resync hook
	cancelInSave                             // inside Store.Save, at the k-th save
	cancelWhenStuck                          // from another goroutine, once a call is blocked
	cancelAfterRealTime                      // from another goroutine, after a random 0–2ms
	numCancelTriggers
)

func (c cancelTrigger) String() string {
	return [...]string{"handler", "commit", "retry", "before-open", "after-open", "resync", "save", "stuck", "real-time"}[c]
}

// cancelStore is a memory store that calls a hook in Save.
type cancelStore struct {
	cursor.Memory[int64]
	onSave func()
}

func (s *cancelStore) Save(ctx context.Context, c int64) error {
	if s.onSave != nil {
		s.onSave()
	}
	return s.Memory.Save(ctx, c)
}

func TestCancelAtRandomMoments(t *testing.T) {
	t.Parallel()
	n := *cancelCases
	if n <= 0 {
		n = 200
		if testing.Short() {
			n = 40
		}
	}
	base := rand.Uint64() >> 16
	if *propSeed != 0 {
		base, n = *propSeed, 1
	}
	for i := range n {
		seed := base + uint64(i)
		trigger := cancelTrigger(seed % uint64(numCancelTriggers))
		t.Run(fmt.Sprintf("seed=%d/%v", seed, trigger), func(t *testing.T) {
			t.Parallel()
			cancelCase(t, seed, trigger)
		})
	}
}

func cancelCase(t *testing.T, seed uint64, trigger cancelTrigger) {
	rng := rand.New(rand.NewPCG(seed, 5))
	const events = 3_000
	// The script recovers on its own; only the stuck and real-time cases
	// meet calls that block until cancelled and waits of an hour.
	script := streamtest.RandomScript(rng, 40, 60, 0)
	policy := backoff.Constant(0)
	if trigger == cancelWhenStuck || trigger == cancelAfterRealTime {
		stuck := []streamtest.Step{
			{Kind: streamtest.BlockAfter, K: rng.IntN(60)},
			{Kind: streamtest.BlockOpen},
			{Kind: streamtest.DelayAfter, K: rng.IntN(60), Delay: time.Hour},
			{Kind: streamtest.BreakAfter, K: rng.IntN(60)}, // with the hour-long backoff below
		}[rng.IntN(4)]
		script[rng.IntN(len(script))] = stuck
		if stuck.Kind == streamtest.BreakAfter {
			policy = backoff.Constant(time.Hour)
		}
	}
	src := streamtest.NewSource(propLog()[:events], script...)
	src.SetEndOfLog(streamtest.Wait) // a live stream: Run ends only by cancellation
	limit := map[cancelTrigger]int{cancelOnRetry: 30, cancelBeforeOpen: 40, cancelAfterOpen: 40, cancelInResync: 5}[trigger]
	if limit == 0 {
		limit = events
	}
	k := 1 + rng.IntN(limit)

	ctx, cancelCtx := context.WithCancel(context.Background())
	defer cancelCtx()
	var by string // who cancelled first, for the log
	var byOnce sync.Once
	cancelBy := func(who string) {
		byOnce.Do(func() { by = who })
		cancelCtx()
	}
	cancel := func() { cancelBy(trigger.String()) }
	at := func(trig cancelTrigger, count *int) {
		if trigger != trig {
			return
		}
		if *count++; *count == k {
			cancel()
		}
	}

	// The watcher cancels once a call is blocked, or when signalled: by a
	// long wait ahead, by the real-time trigger, or by the end of the test.
	watch, signal := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if src.AwaitBlocked(watch) == nil {
			cancelBy("stuck")
		} else {
			cancelBy("signal")
		}
	}()
	defer func() {
		signal()
		<-watched
	}()
	if trigger == cancelAfterRealTime {
		timer := time.AfterFunc(time.Duration(rng.Int64N(int64(2*time.Millisecond))), signal)
		defer timer.Stop()
	}

	var handled, commits, retries, opens, saves, resyncs int
	var last int64 // the last event handled
	store := &cancelStore{onSave: func() { at(cancelInSave, &saves) }}
	source := stream.SourceFunc[propEvent, int64](func(ctx context.Context, after int64) (stream.Conn[propEvent], error) {
		at(cancelBeforeOpen, &opens)
		c, err := src.Open(ctx, after)
		if trigger == cancelAfterOpen && err == nil && opens+1 == k {
			cancel() // the Conn was opened, then ctx ended
		}
		if trigger == cancelAfterOpen {
			opens++
		}
		return c, err
	})
	var r *stream.Resumer[propEvent, int64]
	resync := func(context.Context, error, func(propEvent) error) (int64, error) {
		at(cancelInResync, &resyncs)
		if trigger == cancelInResync && rng.IntN(2) == 0 {
			return 0, errors.New("cancelled mid-listing")
		}
		return r.Cursor(), nil
	}
	r, err := stream.New(source, streamtest.Extract[int64], store,
		stream.WithBackoff(policy),
		stream.WithResync(resync),
		stream.WithHooks(stream.Hooks[int64]{
			OnCommit: func(stream.CommitEvent[int64]) { at(cancelOnCommit, &commits) },
			OnRetry: func(e stream.RetryEvent[int64]) {
				at(cancelOnRetry, &retries)
				if e.Delay >= time.Second {
					signal() // cancel from the watcher while Run waits
				}
			},
		}))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}

	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(_ context.Context, e propEvent) error {
			if e.Seq != last+1 {
				t.Errorf("seed %d: handled event %d after %d, want %d", seed, e.Seq, last, last+1)
			}
			last = e.Seq
			at(cancelInHandler, &handled)
			return nil
		})
	}()
	select {
	case err = <-done:
	case <-time.After(cancelBound):
		cancelBy("test bound")
		select {
		case err = <-done:
			t.Fatalf("seed %d: Run() = %v only after a second cancel; it did not return within %v", seed, err, cancelBound)
		case <-time.After(cancelBound):
			t.Fatalf("seed %d: Run did not return within %v; stuck, with %d connections open", seed, 2*cancelBound, src.Live())
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("seed %d: Run() = %v, want %v", seed, err, context.Canceled)
	}
	if live := src.Live(); live != 0 {
		t.Errorf("seed %d: %d connections left open after Run returned, want 0", seed, live)
	}
	if blocked(src) {
		t.Errorf("seed %d: a call is still blocked after Run returned, want none", seed)
	}
	if got := r.Cursor(); got != last {
		t.Errorf("seed %d: Cursor() = %d, want %d (the last event handled)", seed, got, last)
	}
	if got, _ := store.Load(context.Background()); got != last {
		t.Errorf("seed %d: the Store holds %d, want %d: the final save runs after cancellation", seed, got, last)
	}
	record := src.Opens()
	for i, o := range record {
		if o.Live != 0 {
			t.Errorf("seed %d: Open %d found %d connections open, want 0", seed, i, o.Live)
		}
	}
	byOnce.Do(func() {})
	t.Logf("seed %d: cancelled by %s (k = %d) after %d events and %d Opens", seed, by, k, last, len(record))
}

// A Run cancelled at a random moment can be run again: it continues after
// the committed cursor, and the second cancellation is as clean as the
// first.
func TestRunAgainAfterCancel(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64() >> 16
	if *propSeed != 0 {
		seed = *propSeed
	}
	rng := rand.New(rand.NewPCG(seed, 6))
	src := streamtest.NewSource(propLog()[:1_000], streamtest.RandomScript(rng, 30, 40, 0,
		streamtest.FailOpen, streamtest.BreakAfter, streamtest.EndAfter, streamtest.BlockAfter, streamtest.BlockOpen)...)
	src.SetEndOfLog(streamtest.Wait)
	r, err := stream.New(src, streamtest.Extract[int64], cursor.NewMemory[int64](0), stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	var mu sync.Mutex
	var seen []int64
	for run := 0; ; run++ {
		ctx, cancel := context.WithCancel(context.Background())
		before := r.Cursor()
		first := true
		done := make(chan error, 1)
		go func() {
			done <- r.Run(ctx, func(_ context.Context, e propEvent) error {
				if first && e.Seq != before+1 {
					t.Errorf("seed %d: run %d started at event %d, want %d", seed, run, e.Seq, before+1)
				}
				first = false
				mu.Lock()
				seen = append(seen, e.Seq)
				mu.Unlock()
				return nil
			})
		}()
		wctx, wcancel := context.WithTimeout(context.Background(), cancelBound)
		if err := src.AwaitBlocked(wctx); err != nil {
			t.Fatalf("seed %d: run %d never blocked: %v", seed, run, err)
		}
		wcancel()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("seed %d: run %d: Run() = %v, want %v", seed, run, err, context.Canceled)
		}
		if live := src.Live(); live != 0 {
			t.Fatalf("seed %d: run %d left %d connections open", seed, run, live)
		}
		if r.Cursor() == 1_000 { // the whole log
			break
		}
		if run > 1_000 {
			t.Fatalf("seed %d: %d runs did not reach the end of the log", seed, run)
		}
	}
	for i, s := range seen {
		if s != int64(i+1) {
			t.Fatalf("seed %d: event %d handled at position %d, want each event once, in order", seed, s, i)
		}
	}
}

// blocked reports whether a call of src is blocked right now: AwaitBlocked
// on an ended context returns nil only then.
func blocked[T any](src *streamtest.Source[T]) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return src.AwaitBlocked(ctx) == nil
}

// Defect 4: cancelling ctx after the Source reported ErrEndOfStream, while
// keyed events are still queued, makes Run return nil. Run's doc: "ctx's
// error when ctx ends".
func TestCancelAfterEndOfStreamWithQueuedEvents(t *testing.T) {
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

// Defect 8: with WithHandlerRetry or WithDeadLetter, a handler that fails
// after ctx ended makes Run return the handler's error. failures.md: "any
// error once ctx ended … Run returns ctx's error".
func TestHandlerFailureAfterCancelReturnsCtxError(t *testing.T) {
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

func TestOnStopWithACancelledContext(t *testing.T) {
	stops := 0
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return nil, io.ErrUnexpectedEOF })
	r := newResumer(t, src, stream.WithHooks(stream.Hooks[int64]{OnStop: func(stream.StopEvent[int64]) { stops++ }}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx, func(context.Context, ev) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want %v", err, context.Canceled)
	}
	if stops != 1 {
		t.Errorf("OnStop called %d times, want 1", stops)
	}
}
