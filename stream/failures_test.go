package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// Handler failures: retried in place, parked, or the end of Run.

var errFlaky = errors.New("database briefly down")

// parkLog records what a dead letter received.
type parkLog struct {
	mu     sync.Mutex
	seqs   []int64
	tries  []int
	failAt int64 // park fails for this seq (0: never)
}

func (p *parkLog) park(_ context.Context, e ev, err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Seq == p.failAt {
		return errors.New("dead-letter topic unavailable")
	}
	var he *stream.HandlerError
	if !errors.As(err, &he) {
		return fmt.Errorf("park got %v, not a *stream.HandlerError", err)
	}
	p.seqs, p.tries = append(p.seqs, e.Seq), append(p.tries, he.Tries)
	return nil
}

// endingSource is a log of n events that ends the stream after them.
func endingSource(n int) *streamtest.Source[string] {
	src := streamtest.NewSource(letters(n))
	src.SetEndOfLog(streamtest.EndStream)
	return src
}

func TestHandlerRetryInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := endingSource(3)
		var hooks []stream.HandlerEvent[int64]
		r := newResumer(t, src, stream.WithHandlerRetry(5, backoff.Constant(3*time.Second)),
			stream.WithHooks(stream.Hooks[int64]{OnHandlerError: func(e stream.HandlerEvent[int64]) { hooks = append(hooks, e) }}))
		fails := 2
		var seen []int64
		start := time.Now()
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			if e.Seq == 2 && fails > 0 {
				fails--
				return errFlaky
			}
			seen = append(seen, e.Seq)
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff([]int64{1, 2, 3}, seen); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		if got := time.Since(start); got != 6*time.Second {
			t.Errorf("the retries took %v of fake time, want 6s (two waits of the policy's 3s)", got)
		}
		st := r.Stats()
		if st.Opens != 1 || st.HandlerRetries != 2 || st.Retried != 0 {
			t.Errorf("Stats() = %d opens, %d handler retries, %d retried failures; want 1, 2, 0 (no reconnect)", st.Opens, st.HandlerRetries, st.Retried)
		}
		var retried []bool
		for _, h := range hooks {
			retried = append(retried, h.Retry && !h.Parked)
		}
		if diff := cmp.Diff([]bool{true, true}, retried); diff != "" {
			t.Errorf("OnHandlerError outcomes (-want +got):\n%s", diff)
		}
	})
}

func TestHandlerRetryServerFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newResumer(t, endingSource(1), stream.WithHandlerRetry(2, backoff.Constant(0)))
		first := true
		start := time.Now()
		err := r.Run(context.Background(), func(context.Context, ev) error {
			if first {
				first = false
				return errclass.RetryAfter(errFlaky, 10*time.Second)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("retried after %v, want the 10s the error asked for", got)
		}
	})
}

func TestHandlerFailures(t *testing.T) {
	tests := []struct {
		name       string
		opts       func(*parkLog) []stream.Option
		handlerErr error // what event 2 fails with, every time
		failPark   bool
		wantErr    error // nil: Run returns nil
		wantSeen   []int64
		wantParked []int64
		wantTries  []int
		wantCursor int64
	}{
		{
			name:       "no options: as before",
			opts:       func(*parkLog) []stream.Option { return nil },
			handlerErr: errFlaky,
			wantErr:    errFlaky,
			wantSeen:   []int64{1},
			wantCursor: 1,
		},
		{
			name: "permanent: parked at once",
			opts: func(p *parkLog) []stream.Option {
				return []stream.Option{stream.WithHandlerRetry(5, backoff.Constant(0)), stream.WithDeadLetter(p.park)}
			},
			handlerErr: errclass.Permanent(errors.New("malformed record")),
			wantSeen:   []int64{1, 3},
			wantParked: []int64{2},
			wantTries:  []int{1},
			wantCursor: 3,
		},
		{
			name: "transient: parked after the last try",
			opts: func(p *parkLog) []stream.Option {
				return []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0)), stream.WithDeadLetter(p.park)}
			},
			handlerErr: errFlaky,
			wantSeen:   []int64{1, 3},
			wantParked: []int64{2},
			wantTries:  []int{3},
			wantCursor: 3,
		},
		{
			name: "spent without a dead letter: Run ends",
			opts: func(*parkLog) []stream.Option {
				return []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0))}
			},
			handlerErr: errFlaky,
			wantErr:    errFlaky,
			wantSeen:   []int64{1},
			wantCursor: 1,
		},
		{
			name: "a failing park: Run ends, the event uncommitted",
			opts: func(p *parkLog) []stream.Option {
				return []stream.Option{stream.WithDeadLetter(p.park)}
			},
			handlerErr: errFlaky,
			failPark:   true,
			wantErr:    errFlaky,
			wantSeen:   []int64{1},
			wantCursor: 1,
		},
		{
			name: "ErrStop is never retried or parked",
			opts: func(p *parkLog) []stream.Option {
				return []stream.Option{stream.WithHandlerRetry(3, backoff.Constant(0)), stream.WithDeadLetter(p.park)}
			},
			handlerErr: stream.ErrStop,
			wantSeen:   []int64{1},
			wantCursor: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &parkLog{}
			if tt.failPark {
				p.failAt = 2
			}
			r := newResumer(t, endingSource(3), tt.opts(p)...)
			var seen []int64
			err := r.Run(context.Background(), func(_ context.Context, e ev) error {
				if e.Seq == 2 {
					return tt.handlerErr
				}
				seen = append(seen, e.Seq)
				return nil
			})
			if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("Run() = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantParked, p.seqs); diff != "" {
				t.Errorf("parked (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTries, p.tries); diff != "" {
				t.Errorf("tries when parked (-want +got):\n%s", diff)
			}
			if got := r.Cursor(); got != tt.wantCursor {
				t.Errorf("Cursor() = %d, want %d", got, tt.wantCursor)
			}
			if got, want := r.Stats().Parked, uint64(len(tt.wantParked)); got != want {
				t.Errorf("Stats().Parked = %d, want %d", got, want)
			}
		})
	}
}

func TestHandlerRetryCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newResumer(t, endingSource(3), stream.WithHandlerRetry(5, backoff.Constant(time.Hour)))
		ctx, cancel := context.WithCancel(context.Background())
		tries := 0
		go func() {
			synctest.Wait() // the Resumer waits between tries
			cancel()
		}()
		start := time.Now()
		err := r.Run(ctx, func(_ context.Context, e ev) error {
			if e.Seq == 2 {
				tries++
				return errFlaky
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want %v", err, context.Canceled)
		}
		if elapsed := time.Since(start); elapsed != 0 || tries != 1 {
			t.Errorf("returned after %v and %d tries, want at once after 1", elapsed, tries)
		}
		if got := r.Cursor(); got != 1 {
			t.Errorf("Cursor() = %d, want 1: the event is uncommitted", got)
		}
	})
}

// TestPoisonedKeyDoesNotHoldOthers: under concurrency with keys, the
// retries of one key's event hold only that key.
func TestPoisonedKeyDoesNotHoldOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		src := endingSource(n)
		p := &parkLog{}
		key := func(e ev) int64 { return e.Seq % 4 }
		r := newResumer(t, src, stream.WithConcurrency(4), stream.WithOrderKey(key),
			stream.WithHandlerRetry(3, backoff.Constant(time.Minute)), stream.WithDeadLetter(p.park))
		var mu sync.Mutex
		done := map[int64]time.Duration{}
		start := time.Now()
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			if e.Seq == 1 {
				return errFlaky // key 1's first event: two minutes of retries, then parked
			}
			mu.Lock()
			done[e.Seq] = time.Since(start)
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		for seq := int64(2); seq <= n; seq++ {
			at, ok := done[seq]
			switch {
			case !ok:
				t.Errorf("event %d never handled", seq)
			case key(ev{Seq: seq}) != 1 && at != 0:
				t.Errorf("event %d (another key) handled after %v, want at once", seq, at)
			case key(ev{Seq: seq}) == 1 && at < 2*time.Minute:
				t.Errorf("event %d (the poisoned key) handled after %v, before its predecessor was parked", seq, at)
			}
		}
		if diff := cmp.Diff([]int64{1}, p.seqs); diff != "" {
			t.Errorf("parked (-want +got):\n%s", diff)
		}
		if got := r.Cursor(); got != n {
			t.Errorf("Cursor() = %d, want %d", got, n)
		}
	})
}

// TestDeadLetterTypeChecked: a dead letter for another event type is
// refused by New.
func TestDeadLetterTypeChecked(t *testing.T) {
	_, err := stream.New(endingSource(1), extract, cursor.NewMemory[int64](0),
		stream.WithDeadLetter(func(context.Context, string, error) error { return nil }))
	if !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithDeadLetter of strings) = %v, want %v", err, stream.ErrInvalidOption)
	}
	if _, err := stream.New(endingSource(1), extract, cursor.NewMemory[int64](0), stream.WithHandlerRetry(0, nil)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithHandlerRetry(0)) = %v, want %v", err, stream.ErrInvalidOption)
	}
}

// TestSourceChanged: a Source that reports another history resyncs with a
// hook, and without one stops Run with the Source's message; in neither
// case is it retried, and nothing spins.
func TestSourceChanged(t *testing.T) {
	changed := fmt.Errorf("%w: cluster id was 7, now 9", stream.ErrSourceChanged)
	tests := []struct {
		name       string
		resync     bool
		wantErr    bool
		wantOpens  uint64
		wantCursor int64
	}{
		{name: "resync hook", resync: true, wantOpens: 1, wantCursor: 50},
		{name: "no hook", wantErr: true, wantOpens: 0, wantCursor: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opens := 0
				src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
					opens++
					if after == 10 {
						return nil, changed
					}
					return nil, stream.ErrEndOfStream
				})
				var opts []stream.Option
				var replayed []int64
				if tt.resync {
					opts = append(opts, stream.WithResync(func(_ context.Context, cause error, emit func(ev) error) (int64, error) {
						if !errors.Is(cause, stream.ErrSourceChanged) {
							t.Errorf("resync cause = %v, want %v", cause, stream.ErrSourceChanged)
						}
						for seq := int64(48); seq <= 50; seq++ {
							if err := emit(ev{Seq: seq}); err != nil {
								return 0, err
							}
						}
						return 50, nil
					}))
				}
				r, err := stream.New(src, extract, cursor.NewMemory[int64](10), opts...)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err = r.Run(context.Background(), func(_ context.Context, e ev) error {
					replayed = append(replayed, e.Seq)
					return nil
				})
				switch {
				case tt.wantErr && (!errors.Is(err, stream.ErrSourceChanged) || !strings.Contains(err.Error(), "was 7, now 9")):
					t.Fatalf("Run() = %v, want the Source's message matching %v", err, stream.ErrSourceChanged)
				case !tt.wantErr && err != nil:
					t.Fatalf("Run() = %v, want nil", err)
				}
				st := r.Stats()
				if st.Retried != 0 || st.Expired != 1 {
					t.Errorf("Stats() = %d retried, %d expired; want 0 and 1", st.Retried, st.Expired)
				}
				if want := 1 + int(tt.wantOpens); opens != want {
					t.Errorf("%d Opens, want %d", opens, want)
				}
				if got := r.Cursor(); got != tt.wantCursor {
					t.Errorf("Cursor() = %d, want %d", got, tt.wantCursor)
				}
				if tt.resync {
					if diff := cmp.Diff([]int64{48, 49, 50}, replayed); diff != "" {
						t.Errorf("replayed (-want +got):\n%s", diff)
					}
					if elapsed := time.Since(start); elapsed <= 0 {
						t.Errorf("reopened %v after the resync, want a backoff step (the delay rule)", elapsed)
					}
				}
			})
		})
	}
}

// Defect 11: Stats.Parked counts an event parked but not committed, and the
// next Run parks it again without any crash. Stats' doc: Parked counts
// events "handed to the dead letter and committed"; failures.md: "at most
// twice for one crash".
func TestParkedButNotCommitted(t *testing.T) {
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
func TestDeadLetterRefusesALossyEvent(t *testing.T) {
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

func TestCloseThatPanicsOnTheWatcherReachesRun(t *testing.T) {
	c := newScriptConn(nil)
	c.block, c.closePanic = true, "close exploded"
	c.err = errors.New("closed")
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) { return c, nil })
	r := newResumer(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-time.After(time.Millisecond) // any moment: the watcher closes the Conn whenever ctx ends
		cancel()
	}()
	panicked, _ := runBounded(t, ctx, r, func(context.Context, ev) error { return nil })
	if panicked != "close exploded" {
		t.Errorf("Run panicked with %v, want the Close's panic", panicked)
	}
}

// cycle is an error whose chain comes back to itself.
type cycle struct{ next error }

func TestCyclicErrorDoesNotHangRun(t *testing.T) {
	cyc := &cycle{}
	cyc.next = cyc
	tests := []struct {
		name string
		open error // from Open
		recv error // from Recv
	}{
		{name: "open", open: errclass.Permanent(cyc)},
		{name: "recv", recv: cyc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
				if tt.open != nil {
					return nil, tt.open
				}
				return newScriptConn(tt.recv), nil
			})
			r := newResumer(t, src, stream.WithClassifier(errclass.Func(func(error) errclass.Decision {
				return errclass.Decision{Action: errclass.Fail}
			})))
			_, err := runBounded(t, context.Background(), r, func(context.Context, ev) error { return nil })
			if err == nil {
				t.Fatalf("Run() = nil, want the cyclic error")
			}
		})
	}
}

func TestErrStopFromTheSourceStops(t *testing.T) {
	tests := []struct {
		name   string
		source stream.Source[ev, int64]
	}{
		{name: "page fetch", source: stream.Pages(func(context.Context, int64) ([]ev, error) { return nil, stream.ErrStop })},
		{name: "recv", source: stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			return newScriptConn(fmt.Errorf("done: %w", stream.ErrStop)), nil
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResumer(t, tt.source)
			_, err := runBounded(t, context.Background(), r, func(context.Context, ev) error { return nil })
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
			if got := r.Stats().Retried; got != 0 {
				t.Errorf("Stats().Retried = %d, want 0: ErrStop is never retried", got)
			}
		})
	}
}

func TestStringCursorsAreQuotedInErrors(t *testing.T) {
	src := stream.SourceFunc[ev, string](func(context.Context, string) (stream.Conn[ev], error) {
		return newScriptConn(io.EOF, ev{Seq: 1}), nil
	})
	store := &failingSave[string]{initial: "start", err: errclass.Permanent(errors.New("no"))}
	r, err := stream.New(src, func(ev) (string, error) { return "", nil }, cursor.Store[string](store))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(context.Context, ev) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `cursor "" to the Store`) {
		t.Errorf("Run() = %v, want the empty cursor quoted", err)
	}
}
