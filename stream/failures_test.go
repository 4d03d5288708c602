package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
