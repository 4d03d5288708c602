package stream_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// Ordered concurrency (WithConcurrency, WithWindow, WithOrderKey). Every
// test runs its handlers through a ccTracker, which fails the test when two
// events of one key overlap or come out of stream order, when more than n
// handlers run, when an event is handed over twice in one Run, when more
// than the window is in flight, and when a cursor is committed, saved or
// visible in Stats before every event up to it finished. Handler times are
// fake (testing/synctest), so the schedules are the same in every run.

// ccMix scrambles a sequence number: keys and handler times that look
// random but are the same in every run.
func ccMix(seq int64) uint64 {
	x := uint64(seq) * 0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>27
}

// ccKey is the order key of event seq among keys keys (0 when keys ≤ 1).
func ccKey(seq int64, keys int) int {
	if keys <= 1 {
		return 0
	}
	return int(ccMix(seq) % uint64(keys))
}

// ccPause is how long the handler of event seq takes: 1 to 10 ms.
func ccPause(seq int64) time.Duration {
	return time.Duration(1+ccMix(seq)%10) * time.Millisecond
}

// ccSleep is a handler body that takes ccPause of the event.
func ccSleep(_ context.Context, e ev) error {
	time.Sleep(ccPause(e.Seq))
	return nil
}

// beat is the value of a progress-only event in the logs of these tests.
const beat = "beat"

// ccLog returns n log entries, every every-th of them (0: none) a
// progress-only beat.
func ccLog(n, every int) []string {
	log := letters(n)
	for i := range log {
		if every > 0 && (i+1)%every == 0 {
			log[i] = beat
		}
	}
	return log
}

// ccSetup is how a test's Resumer handles events concurrently.
type ccSetup struct {
	n      int
	window int // 0: the default
	keys   int // 0: no order key
}

// ccWindow is the window the setup gives: stream's documented default
// max(64, 4·n) when it names none.
func (s ccSetup) ccWindow() int {
	if s.window > 0 {
		return s.window
	}
	return max(64, 4*s.n)
}

// ccTracker checks the handler's side of ordered concurrency; see the top
// of this file.
type ccTracker struct {
	t     *testing.T
	setup ccSetup
	r     *stream.Resumer[ev, int64] // read for Stats while handling

	mu       sync.Mutex
	running  int
	most     int            // most handlers running at once
	busy     map[int]int64  // key → the event of that key running
	last     map[int]int64  // key → the last event of that key started in this Run
	started  map[int64]int  // event → times started in this Run
	finished map[int64]bool // events handled (nil or ErrStop), ever
	prefix   int64          // every event up to prefix finished
	errs     int
}

func newTracker(t *testing.T, setup ccSetup) *ccTracker {
	tr := &ccTracker{t: t, setup: setup, finished: map[int64]bool{}}
	tr.newRun()
	return tr
}

// newRun forgets what one Run may not repeat: the next Run may hand the
// uncommitted events over again.
func (tr *ccTracker) newRun() {
	tr.mu.Lock()
	tr.busy, tr.last, tr.started = map[int]int64{}, map[int]int64{}, map[int64]int{}
	tr.mu.Unlock()
}

// errorf reports a violation (the first few).
func (tr *ccTracker) errorf(format string, args ...any) {
	tr.t.Helper()
	if tr.errs++; tr.errs <= 10 {
		tr.t.Errorf(format, args...)
	}
}

// finish marks seq finished without a handler: a progress-only event, or
// one a previous Run committed.
func (tr *ccTracker) finish(seqs ...int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range seqs {
		tr.finished[s] = true
	}
	for tr.finished[tr.prefix+1] {
		tr.prefix++
	}
}

// begin records the start of event seq's handler.
func (tr *ccTracker) begin(seq int64) {
	st := tr.r.Stats()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if st.Cursor >= seq {
		tr.errorf("event %d handed over with cursor %d committed", seq, st.Cursor)
	}
	if w := tr.setup.ccWindow(); st.InFlight > w {
		tr.errorf("%d events in flight, the window is %d", st.InFlight, w)
	}
	if tr.started[seq]++; tr.started[seq] > 1 {
		tr.errorf("event %d handed over %d times in one Run", seq, tr.started[seq])
	}
	if tr.running++; tr.running > tr.setup.n {
		tr.errorf("%d handlers running, want at most %d", tr.running, tr.setup.n)
	}
	tr.most = max(tr.most, tr.running)
	if tr.setup.keys == 0 {
		return
	}
	k := ccKey(seq, tr.setup.keys)
	if other, ok := tr.busy[k]; ok {
		tr.errorf("events %d and %d of key %d overlap", other, seq, k)
	}
	tr.busy[k] = seq
	if last, ok := tr.last[k]; ok && last >= seq {
		tr.errorf("event %d of key %d started after event %d", seq, k, last)
	}
	tr.last[k] = seq
}

// end records the end of event seq's handler; handled says it counts as
// handled (nil or ErrStop).
func (tr *ccTracker) end(seq int64, handled bool) {
	st := tr.r.Stats()
	tr.mu.Lock()
	if st.Cursor >= seq {
		tr.errorf("cursor %d committed while event %d was running", st.Cursor, seq)
	}
	tr.running--
	if tr.setup.keys > 0 {
		delete(tr.busy, ccKey(seq, tr.setup.keys))
	}
	tr.mu.Unlock()
	if handled {
		tr.finish(seq)
	}
}

// committed checks that a cursor committed (what) is the end of a prefix of
// finished events.
func (tr *ccTracker) committed(what string, c int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if c > tr.prefix {
		tr.errorf("%s %d with event %d unfinished", what, c, tr.prefix+1)
	}
}

// handler wraps body with the tracker's checks.
func (tr *ccTracker) handler(body func(context.Context, ev) error) func(context.Context, ev) error {
	return func(ctx context.Context, e ev) error {
		if e.Value == beat {
			tr.errorf("progress-only event %d handed to the handler", e.Seq)
		}
		tr.begin(e.Seq)
		handled := false
		defer func() { tr.end(e.Seq, handled) }()
		err := body(ctx, e)
		handled = err == nil || errors.Is(err, stream.ErrStop)
		return err
	}
}

// snapshot returns how many handlers run, the most that ran at once, and
// how many events were started in this Run.
func (tr *ccTracker) snapshot() (running, most, started int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.running, tr.most, len(tr.started)
}

// isFinished reports whether seq was handled.
func (tr *ccTracker) isFinished(seq int64) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.finished[seq]
}

// finishedAfter counts the events after seq that were handled.
func (tr *ccTracker) finishedAfter(seq int64) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for s := range tr.finished {
		if s > seq {
			n++
		}
	}
	return n
}

// ccStore is a memory Store whose saves must follow the prefix.
type ccStore struct {
	cursor.Memory[int64]
	tr *ccTracker
}

func (s *ccStore) Save(ctx context.Context, c int64) error {
	s.tr.committed("saved", c)
	return s.Memory.Save(ctx, c)
}

// saved returns the cursor in the store.
func (s *ccStore) saved(t *testing.T) int64 {
	t.Helper()
	c, err := s.Memory.Load(context.Background())
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	return c
}

// ccExtract is the extractor of these tests: beats are progress-only.
func ccExtract(e ev) (int64, error) {
	if e.Value == beat {
		return e.Seq, cursor.ProgressOnly
	}
	return e.Seq, nil
}

// newTracked makes a Resumer over src with setup's concurrency, a store and
// hooks that check the prefix, and no backoff unless opts say otherwise.
func newTracked(t *testing.T, src stream.Source[ev, int64], setup ccSetup, opts ...stream.Option) (*stream.Resumer[ev, int64], *ccTracker, *ccStore) {
	t.Helper()
	tr := newTracker(t, setup)
	store := &ccStore{tr: tr}
	r := newTrackedOn(t, src, tr, store, opts...)
	return r, tr, store
}

// newTrackedOn is newTracked on an existing tracker and store: the next
// process on the same cursor.
func newTrackedOn(t *testing.T, src stream.Source[ev, int64], tr *ccTracker, store *ccStore, opts ...stream.Option) *stream.Resumer[ev, int64] {
	t.Helper()
	all := []stream.Option{
		stream.WithBackoff(backoff.Constant(0)),
		stream.WithConcurrency(tr.setup.n),
		stream.WithHooks(stream.Hooks[int64]{OnCommit: func(e stream.CommitEvent[int64]) { tr.committed("OnCommit", e.Cursor) }}),
	}
	if tr.setup.window > 0 {
		all = append(all, stream.WithWindow(tr.setup.window))
	}
	if tr.setup.keys > 0 {
		keys := tr.setup.keys
		all = append(all, stream.WithOrderKey(func(e ev) int { return ccKey(e.Seq, keys) }))
	}
	r, err := stream.New(src, ccExtract, store, append(all, opts...)...)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	tr.r = r
	tr.newRun()
	return r
}

// beats returns the sequence numbers of the beats of log.
func beats(log []string) []int64 {
	var out []int64
	for i, v := range log {
		if v == beat {
			out = append(out, int64(i+1))
		}
	}
	return out
}

// checkAllOnce fails unless every event of log that is not a beat was
// started exactly once in the last Run and finished.
func (tr *ccTracker) checkAllOnce(log []string) {
	tr.t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	missing := 0
	for i, v := range log {
		seq := int64(i + 1)
		if v != beat && (tr.started[seq] != 1 || !tr.finished[seq]) {
			if missing++; missing <= 5 {
				tr.t.Errorf("event %d started %d times in the last Run, finished %v; want once, true", seq, tr.started[seq], tr.finished[seq])
			}
		}
	}
}

// Per key one event at a time, in stream order; never more than n at once;
// the cursor, the hooks and every save follow the contiguous prefix, with
// progress-only events committed in their position.
func TestConcurrencyKeyOrderAndPrefix(t *testing.T) {
	tests := []struct {
		name  string
		setup ccSetup
	}{
		{name: "no key", setup: ccSetup{n: 8}},
		{name: "one key", setup: ccSetup{n: 8, keys: 1}},
		{name: "3 keys", setup: ccSetup{n: 4, keys: 3}},
		{name: "20 keys", setup: ccSetup{n: 8, keys: 20}},
		{name: "window of n", setup: ccSetup{n: 4, window: 4, keys: 20}},
		{name: "one handler", setup: ccSetup{n: 1, keys: 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := ccLog(300, 7)
				r, tr, store := newTracked(t, streamtest.NewSource(log), tc.setup, stream.WithCheckpointEvery(3))
				tr.finish(beats(log)...)
				if err := r.Run(context.Background(), tr.handler(ccSleep)); err != nil {
					t.Fatalf("Run() = %v, want nil", err)
				}
				tr.checkAllOnce(log)
				st := r.Stats()
				nb := uint64(len(beats(log)))
				if st.Cursor != 300 || st.Events != 300-nb || st.Progress != nb || st.InFlight != 0 {
					t.Errorf("Stats() = cursor %d, %d events, %d progress, %d in flight; want 300, %d, %d, 0",
						st.Cursor, st.Events, st.Progress, st.InFlight, 300-nb, nb)
				}
				if got := store.saved(t); got != 300 {
					t.Errorf("saved cursor %d, want 300", got)
				}
				_, most, _ := tr.snapshot()
				switch {
				case tc.setup.keys == 1 || tc.setup.n == 1:
					if most != 1 {
						t.Errorf("%d handlers ran at once, want 1", most)
					}
				case most < 2:
					t.Errorf("at most %d handler ran at once, want several", most)
				}
			})
		})
	}
}

// With one event stuck, reading goes on until the window is full, then
// pauses: nothing is committed past the stuck event, and the events after
// it that finished wait, committed at once when it finishes.
func TestConcurrencyStuckEventHoldsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		setup := ccSetup{n: 4, window: 16}
		log := letters(200)
		r, tr, store := newTracked(t, streamtest.NewSource(log), setup)
		done := make(chan error)
		go func() {
			done <- r.Run(context.Background(), tr.handler(func(ctx context.Context, e ev) error {
				if e.Seq == 1 {
					time.Sleep(time.Hour)
				}
				return ccSleep(ctx, e)
			}))
		}()
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		st := r.Stats()
		running, _, started := tr.snapshot()
		if st.Cursor != 0 || st.InFlight != setup.window || running != 1 || started != setup.window {
			t.Errorf("while event 1 is stuck: cursor %d, %d in flight, %d running, %d started; want 0, %d, 1, %d",
				st.Cursor, st.InFlight, running, started, setup.window, setup.window)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		tr.checkAllOnce(log)
		if st := r.Stats(); st.Cursor != 200 || st.InFlight != 0 || store.saved(t) != 200 {
			t.Errorf("Stats() = cursor %d, %d in flight, saved %d; want 200, 0, 200", st.Cursor, st.InFlight, store.saved(t))
		}
	})
}

// failAt is a handler body for the failure tests: event at sleeps an hour
// then does what fail says; event slow is still running then (it sleeps
// two), and records whether its context was cancelled; the rest take
// ccPause.
func failAt(at, slow int64, fail func() error, ctxErr *error) func(context.Context, ev) error {
	return func(ctx context.Context, e ev) error {
		switch e.Seq {
		case at:
			time.Sleep(time.Hour)
			return fail()
		case slow:
			time.Sleep(2 * time.Hour)
			*ctxErr = ctx.Err()
			return nil
		}
		return ccSleep(ctx, e)
	}
}

// slowAfter returns the first event after at whose key differs from at's:
// one that can run while at does.
func slowAfter(at int64, keys int) int64 {
	s := at + 1
	for keys > 1 && ccKey(s, keys) == ccKey(at, keys) {
		s++
	}
	return s
}

// A handler error stops reading; the running handlers finish, their
// context live; the prefix before the failed event is committed and saved;
// the next Run starts at the failed event.
func TestConcurrencyHandlerError(t *testing.T) {
	for _, keys := range []int{0, 3} {
		t.Run(fmt.Sprintf("keys=%d", keys), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				errRefused := errors.New("handler refused")
				log := letters(100)
				src := streamtest.NewSource(log)
				r, tr, store := newTracked(t, src, ccSetup{n: 4, keys: keys})
				var ctxErr error
				slow := slowAfter(10, keys)
				err := r.Run(context.Background(), tr.handler(failAt(10, slow, func() error { return errRefused }, &ctxErr)))
				if !errors.Is(err, errRefused) {
					t.Fatalf("Run() = %v, want %v", err, errRefused)
				}
				checkStopped(t, tr, r, store, 9, slow)
				if ctxErr != nil {
					t.Errorf("a running handler's context ended with %v after another's error", ctxErr)
				}
				// The next process redelivers from the failed event on.
				r2 := newTrackedOn(t, src, tr, store)
				if err := r2.Run(context.Background(), tr.handler(ccSleep)); err != nil {
					t.Fatalf("second Run() = %v, want nil", err)
				}
				if opens := src.Opens(); opens[len(opens)-1].After != 9 {
					t.Errorf("second Run opened after %d, want 9", opens[len(opens)-1].After)
				}
				tr.checkAllOnce(slicesFrom(log, 10))
			})
		})
	}
}

// slicesFrom returns log with the events before seq made beats, which
// checkAllOnce skips.
func slicesFrom(log []string, seq int64) []string {
	out := append([]string(nil), log...)
	for i := range seq - 1 {
		out[i] = beat
	}
	return out
}

// checkStopped checks a Run that stopped at a failed event: cursor and
// store at want, the slow event still running at the failure finished
// before Run returned, no handler running, and some events after the
// failed one finished (so that the test had several in flight).
func checkStopped(t *testing.T, tr *ccTracker, r *stream.Resumer[ev, int64], store *ccStore, want, slow int64) {
	t.Helper()
	if got := r.Cursor(); got != want {
		t.Errorf("Cursor() = %d, want %d", got, want)
	}
	if got := store.saved(t); got != want {
		t.Errorf("saved cursor %d, want %d", got, want)
	}
	if !tr.isFinished(slow) {
		t.Errorf("event %d, running when the handler failed, did not finish before Run returned", slow)
	}
	if running, _, _ := tr.snapshot(); running != 0 {
		t.Errorf("%d handlers still running after Run returned", running)
	}
	if tr.finishedAfter(want+1) < 2 {
		t.Errorf("%d events after %d finished, want several (the test needs events in flight)", tr.finishedAfter(want+1), want+1)
	}
}

// A handler panic: as an error, and the panic reaches Run's caller after
// the running handlers finished and the prefix was saved.
func TestConcurrencyHandlerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, tr, store := newTracked(t, streamtest.NewSource(letters(100)), ccSetup{n: 4, keys: 3})
		var ctxErr error
		slow := slowAfter(10, 3)
		handle := tr.handler(failAt(10, slow, func() error { panic("handler bug") }, &ctxErr))
		panicked := func() (p any) {
			defer func() { p = recover() }()
			err := r.Run(context.Background(), handle)
			t.Errorf("Run() = %v, want a panic", err)
			return nil
		}()
		if panicked != "handler bug" {
			t.Fatalf("Run panicked with %v, want %q", panicked, "handler bug")
		}
		checkStopped(t, tr, r, store, 9, slow)
	})
}

// ErrStop commits exactly through the stopping event, though later events
// finished; the next Run starts right after it.
func TestConcurrencyErrStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := letters(100)
		src := streamtest.NewSource(log)
		r, tr, store := newTracked(t, src, ccSetup{n: 4, keys: 3})
		var ctxErr error
		slow := slowAfter(10, 3)
		err := r.Run(context.Background(), tr.handler(failAt(10, slow, func() error { return stream.ErrStop }, &ctxErr)))
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		checkStopped(t, tr, r, store, 10, slow)
		r2 := newTrackedOn(t, src, tr, store)
		if err := r2.Run(context.Background(), tr.handler(ccSleep)); err != nil {
			t.Fatalf("second Run() = %v, want nil", err)
		}
		if opens := src.Opens(); opens[len(opens)-1].After != 10 {
			t.Errorf("second Run opened after %d, want 10", opens[len(opens)-1].After)
		}
		tr.checkAllOnce(slicesFrom(log, 11))
	})
}

// Cancellation reaches the running handlers; Run returns ctx's error once
// they returned, with the prefix committed and saved.
func TestConcurrencyCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, quick = 4, 5
		r, tr, store := newTracked(t, streamtest.NewSource(letters(100)), ccSetup{n: n, keys: 20})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error)
		go func() {
			done <- r.Run(ctx, tr.handler(func(ctx context.Context, e ev) error {
				if e.Seq <= quick {
					return ccSleep(ctx, e)
				}
				<-ctx.Done() // a handler that waits for its context
				return ctx.Err()
			}))
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if running, _, _ := tr.snapshot(); running != n {
			t.Fatalf("%d handlers waiting before the cancel, want %d", running, n)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want %v", err, context.Canceled)
		}
		if running, _, _ := tr.snapshot(); running != 0 {
			t.Errorf("%d handlers still running after Run returned", running)
		}
		if got, saved := r.Cursor(), store.saved(t); got != quick || saved != quick {
			t.Errorf("Cursor() = %d, saved %d; want %d, %d", got, saved, quick, quick)
		}
	})
}

// A connection that breaks waits for the running handlers; one that ends
// cleanly does not: the next Open proceeds while they run. Either way the
// reopen is after the last event read: no event is handed over twice in one
// Run, and per-key order holds across the reconnects.
func TestConcurrencyConnectionFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := letters(60)
		src := streamtest.NewSource(log,
			streamtest.Step{Kind: streamtest.BreakAfter, K: 7},
			streamtest.Step{Kind: streamtest.EndAfter, K: 5},
			streamtest.Step{Kind: streamtest.FailOpen},
			streamtest.Step{Kind: streamtest.BreakAfter, K: 11},
			streamtest.Step{Kind: streamtest.DelayAfter, K: 3, Delay: time.Second},
		)
		var r *stream.Resumer[ev, int64]
		var committed []int64 // per Open, the committed cursor
		checked := stream.SourceFunc[ev, int64](func(ctx context.Context, after int64) (stream.Conn[ev], error) {
			committed = append(committed, r.Cursor())
			return src.Open(ctx, after)
		})
		r, tr, store := newTracked(t, checked, ccSetup{n: 4, keys: 3})
		if err := r.Run(context.Background(), tr.handler(ccSleep)); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		tr.checkAllOnce(log)
		var after []int64
		for _, o := range src.Opens() {
			after = append(after, o.After)
		}
		if diff := cmp.Diff([]int64{0, 7, 12, 12, 23, 26}, after); diff != "" {
			t.Errorf("Open cursors (-want +got):\n%s", diff)
		}
		// The third Open follows the clean end after 12: its events are
		// still in their handlers (they take fake time, the Open none), so
		// the committed cursor is behind. The others follow a break, a
		// failed Open or a server's delay: the window settled first.
		for i, c := range committed {
			if pipelined := i == 2; pipelined != (c < after[i]) {
				t.Errorf("Open %d after %d with the committed cursor at %d; want it behind: %v", i, after[i], c, pipelined)
			}
		}
		if _, most, _ := tr.snapshot(); most < 2 {
			t.Errorf("at most %d handler ran at once, want several", most)
		}
		if got := store.saved(t); got != 60 {
			t.Errorf("saved cursor %d, want 60", got)
		}
	})
}

// Every final path settles a window left running by a clean end: after an
// Open that fails for good, Run returns once every event read was handled
// and saved; when ctx ends during that Open, once the running handlers
// returned (no queued event starts), with their prefix saved. No event is
// handed over twice.
func TestConcurrencyPipelinedEndSettles(t *testing.T) {
	errGone := errors.New("feed gone")
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, cancel context.CancelFunc) error // the second Open's result
		want error
		all  bool // every event read is handled
	}{
		{"open fails for good", func(context.Context, context.CancelFunc) error { return errclass.Permanent(errGone) }, errGone, true},
		{"ctx ends in the open", func(ctx context.Context, cancel context.CancelFunc) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}, context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				log := letters(20)
				src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.EndAfter, K: 8})
				var r *stream.Resumer[ev, int64]
				var behind int64 = -1 // the committed cursor at the second Open
				checked := stream.SourceFunc[ev, int64](func(ctx context.Context, after int64) (stream.Conn[ev], error) {
					if len(src.Opens()) == 0 {
						return src.Open(ctx, after)
					}
					if after != 8 {
						t.Errorf("second Open after %d, want 8 (the last event read)", after)
					}
					behind = r.Cursor()
					return nil, tc.open(ctx, cancel)
				})
				r, tr, store := newTracked(t, checked, ccSetup{n: 4, keys: 3})
				if err := r.Run(ctx, tr.handler(ccSleep)); !errors.Is(err, tc.want) {
					t.Fatalf("Run() = %v, want %v", err, tc.want)
				}
				if behind < 0 || behind >= 8 {
					t.Errorf("the committed cursor was %d at the second Open, want it behind 8 (the events still in their handlers)", behind)
				}
				want := int64(8)
				if tc.all {
					tr.checkAllOnce(log[:8])
				} else {
					tr.mu.Lock()
					want = tr.prefix // the end of the finished events' prefix
					tr.mu.Unlock()
				}
				if got, saved := r.Cursor(), store.saved(t); got != want || saved != want {
					t.Errorf("Cursor() = %d, saved %d; want %d, %d", got, saved, want, want)
				}
				if st := r.Stats(); st.InFlight != 0 {
					t.Errorf("Stats().InFlight = %d after Run, want 0", st.InFlight)
				}
			})
		})
	}
}

// Random fault scripts: every event handed over once per Run, per-key order
// across every kind of reconnect, and the prefix rule.
func TestConcurrencyRandomFaults(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, seed))
				script := streamtest.RandomScript(rng, 12, 9, time.Second,
					streamtest.FailOpen, streamtest.EndAfter, streamtest.BreakAfter, streamtest.DelayAfter)
				log := ccLog(120, 9)
				n := 1 + rng.IntN(8)
				setup := ccSetup{n: n, window: n + rng.IntN(3*n), keys: rng.IntN(6)}
				src := streamtest.NewSource(log, script...)
				r, tr, _ := newTracked(t, src, setup, stream.WithCheckpointEvery(rng.IntN(4)))
				tr.finish(beats(log)...)
				if err := r.Run(context.Background(), tr.handler(ccSleep)); err != nil {
					t.Fatalf("Run() = %v, want nil (script %v, setup %+v)", err, script, setup)
				}
				if left := len(script) - len(src.Opens()); left > 0 { // 12 steps of at most 9 events: all play before the log's end
					t.Errorf("%d fault steps never played", left)
				}
				tr.checkAllOnce(log)
				if got := r.Cursor(); got != 120 {
					t.Errorf("Cursor() = %d, want 120", got)
				}
			})
		})
	}
}

// A resync's replay goes through the same handlers and keys; the events
// before the expiry, the replay and the events after it keep per-key order.
func TestConcurrencyResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := letters(60)
		src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.ExpireAfter, K: 10})
		calls := 0
		var resyncs []stream.ResyncEvent[int64]
		setup := ccSetup{n: 4, keys: 3}
		tr := newTracker(t, setup)
		store := &ccStore{tr: tr}
		r := newTrackedOn(t, src, tr, store, stream.WithResync(replay(11, 30, &calls)),
			stream.WithHooks(stream.Hooks[int64]{OnResync: func(e stream.ResyncEvent[int64]) { resyncs = append(resyncs, e) }}))
		mostReplay := 0
		var mu sync.Mutex
		running := 0
		err := r.Run(context.Background(), tr.handler(func(ctx context.Context, e ev) error {
			mu.Lock()
			running++
			if e.Seq > 10 && e.Seq <= 30 {
				mostReplay = max(mostReplay, running)
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				mu.Unlock()
			}()
			return ccSleep(ctx, e)
		}))
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		tr.checkAllOnce(log)
		if calls != 1 || len(resyncs) != 1 || resyncs[0].To != 30 || resyncs[0].Replayed != 20 {
			t.Errorf("%d resync calls, resyncs %+v; want 1, one to 30 replaying 20", calls, resyncs)
		}
		if opens := src.Opens(); len(opens) != 2 || opens[1].After != 30 {
			t.Errorf("opens %+v, want a second one after 30", opens)
		}
		if mostReplay < 2 {
			t.Errorf("at most %d replayed events ran at once, want several", mostReplay)
		}
		if st := r.Stats(); st.Cursor != 60 || st.Events != 60 || st.Resyncs != 1 {
			t.Errorf("Stats() = cursor %d, %d events, %d resyncs; want 60, 60, 1", st.Cursor, st.Events, st.Resyncs)
		}
	})
}

// One event stuck far longer than the idle timeout while the window is
// full: reading pauses, and the watchdog does not take the pause for a
// stall.
func TestConcurrencyIdleTimeoutWithAFullWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 10 * time.Second
		setup := ccSetup{n: 4, window: 8, keys: 3}
		log := letters(100)
		src := streamtest.NewSource(log)
		var ends []stream.DisconnectEvent[int64]
		r, tr, _ := newTracked(t, src, setup, stream.WithIdleTimeout(idle), disconnects(&ends))
		done := make(chan error)
		go func() {
			done <- r.Run(context.Background(), tr.handler(func(ctx context.Context, e ev) error {
				if e.Seq == 1 {
					time.Sleep(60 * idle)
				}
				return ccSleep(ctx, e)
			}))
		}()
		time.Sleep(30 * idle)
		synctest.Wait()
		if st := r.Stats(); st.InFlight != setup.window {
			t.Errorf("%d events in flight while event 1 is stuck, want the window, %d", st.InFlight, setup.window)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		tr.checkAllOnce(log)
		for _, e := range ends {
			if errors.Is(e.Err, stream.ErrIdleTimeout) {
				t.Errorf("the idle watchdog fired: %+v", e)
			}
		}
		if opens := src.Opens(); len(opens) != 1 {
			t.Errorf("%d Opens, want 1", len(opens))
		}
	})
}

// All is sequential by nature: with more than one handler it yields an
// error matching ErrInvalidOption and no event.
func TestConcurrencyAllRefusesHandlers(t *testing.T) {
	r := newResumer(t, streamtest.NewSource(letters(3)), stream.WithConcurrency(2))
	var got []error
	events := 0
	for _, err := range r.All(context.Background()) {
		if err != nil {
			got = append(got, err)
			continue
		}
		events++
	}
	if len(got) != 1 || !errors.Is(got[0], stream.ErrInvalidOption) || events != 0 {
		t.Errorf("All() yielded %d events and errors %v, want none and one matching %v", events, got, stream.ErrInvalidOption)
	}

	r = newResumer(t, streamtest.NewSource(letters(3)), stream.WithConcurrency(1))
	var seen []int64
	for e, err := range r.All(context.Background()) {
		if err != nil {
			t.Fatalf("All() with one handler yielded %v", err)
		}
		seen = append(seen, e.Seq)
	}
	if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
		t.Errorf("All() with one handler (-want +got):\n%s", diff)
	}
}

func TestConcurrencyOptionsRefused(t *testing.T) {
	tests := []struct {
		name string
		opts []stream.Option
	}{
		{name: "no handler", opts: []stream.Option{stream.WithConcurrency(0)}},
		{name: "negative handlers", opts: []stream.Option{stream.WithConcurrency(-3)}},
		{name: "empty window", opts: []stream.Option{stream.WithConcurrency(4), stream.WithWindow(0)}},
		{name: "window below n", opts: []stream.Option{stream.WithConcurrency(4), stream.WithWindow(3)}},
		{name: "key of another event type", opts: []stream.Option{stream.WithConcurrency(4), stream.WithOrderKey(func(int) int { return 0 })}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := stream.New(streamtest.NewSource(letters(1)), extract, cursor.NewMemory[int64](0), tc.opts...)
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("New() = %v, want %v", err, stream.ErrInvalidOption)
			}
		})
	}
	// Accepted: a nil key, and a window with one handler.
	_, err := stream.New(streamtest.NewSource(letters(1)), extract, cursor.NewMemory[int64](0),
		stream.WithConcurrency(1), stream.WithWindow(1), stream.WithOrderKey[ev, int](nil))
	if err != nil {
		t.Errorf("New() = %v, want nil", err)
	}
}

// Defect 1: one transient Store.Save failure under WithConcurrency(n > 1)
// ends all handling. how-it-decides.md: "A failed Save is classified like
// any failure": retried, and the stream goes on.
func TestTransientSaveFailureUnderConcurrency(t *testing.T) {
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

// Defect 5: after a handler error, ErrStop or cancellation, the events
// already queued still start. concurrency.md: "reading stops; running
// handlers finish".
func TestNothingStartsAfterAnEnd(t *testing.T) {
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
func TestOrderKeyOfAMutatedEvent(t *testing.T) {
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

// Found by TestCombinations after the window stopped draining at clean
// ends: a try that ends in a park (WithDeadLetter) frees its handler, but
// nothing started the next ready event until another try finished. With
// every running try parked and reading stopped (the window full, or the
// stream's end read), the run waited for ever.
func TestParkFreesItsHandler(t *testing.T) {
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
