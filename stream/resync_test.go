package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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
	"github.com/resumable-go/resumable/stream/streamtest"
)

// replay returns a resync hook that emits events from..to of log and
// continues after to.
func replay(from, to int64, calls *int) stream.ResyncFunc[ev, int64] {
	return func(ctx context.Context, cause error, emit func(ev) error) (int64, error) {
		*calls++
		if !errors.Is(cause, errclass.ErrExpired) {
			return 0, errclass.Permanent(errors.New("the cause does not match ErrExpired"))
		}
		for s := from; s <= to; s++ {
			if err := emit(ev{Seq: s, Value: letters(int(s))[s-1]}); err != nil {
				return 0, err
			}
		}
		return to, nil
	}
}

func TestResyncStreamsItsReplay(t *testing.T) {
	src := streamtest.NewSource(letters(6), streamtest.Step{Kind: streamtest.ExpireAfter, K: 2})
	var resyncs []stream.ResyncEvent[int64]
	calls := 0
	r := newResumer(t, src, stream.WithResync(replay(3, 4, &calls)),
		stream.WithHooks(stream.Hooks[int64]{OnResync: func(e stream.ResyncEvent[int64]) { resyncs = append(resyncs, e) }}))
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 6), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	if len(resyncs) != 1 || resyncs[0].From != 2 || resyncs[0].To != 4 || resyncs[0].Replayed != 2 {
		t.Errorf("resyncs = %+v, want one from 2 to 4 replaying 2", resyncs)
	}
	if opens := src.Opens(); opens[len(opens)-1].After != 4 {
		t.Errorf("last Open after %d, want 4", opens[len(opens)-1].After)
	}
	if st := r.Stats(); st.Events != 6 || st.Resyncs != 1 || st.Expired != 1 {
		t.Errorf("Stats() = %d events, %d resyncs, %d expired; want 6, 1, 1", st.Events, st.Resyncs, st.Expired)
	}
}

// The handler's error during a replay ends Run with that error, whatever
// the resync hook does with it; the expired cursor is not replaced.
func TestResyncHandlerErrorEndsRun(t *testing.T) {
	errRefused := errors.New("handler refused")
	src := streamtest.NewSource(letters(6), streamtest.Step{Kind: streamtest.ExpireAfter, K: 2})
	swallow := func(ctx context.Context, _ error, emit func(ev) error) (int64, error) {
		_ = emit(ev{Seq: 3, Value: "e3"}) // a careless hook that ignores emit's error
		return 6, nil
	}
	r := newResumer(t, src, stream.WithResync(swallow))
	err := r.Run(context.Background(), func(_ context.Context, e ev) error {
		if e.Seq == 3 {
			return errRefused
		}
		return nil
	})
	if !errors.Is(err, errRefused) {
		t.Fatalf("Run() = %v, want %v", err, errRefused)
	}
	if got := r.Cursor(); got != 2 {
		t.Errorf("Cursor() = %d, want 2", got)
	}
}

// A resync that fails half-way is retried like any failure: the handler
// sees the replay again from its start (at-least-once), and Run goes on.
func TestResyncFailingHalfWayIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The cursor stays expired until a resync replaces it.
		src := streamtest.NewSource(letters(4), streamtest.Step{Kind: streamtest.ExpireAfter, K: 1}, streamtest.Step{Kind: streamtest.ExpireAfter})
		calls := 0
		flaky := func(ctx context.Context, cause error, emit func(ev) error) (int64, error) {
			calls++
			if err := emit(ev{Seq: 2, Value: "e2"}); err != nil {
				return 0, err
			}
			if calls == 1 {
				return 0, errors.New("list: connection reset")
			}
			return 3, emit(ev{Seq: 3, Value: "e3"})
		}
		var got []stream.RetryEvent[int64]
		r := newResumer(t, src, stream.WithResync(flaky), stream.WithBackoff(backoff.Constant(time.Second)), retries(&got))
		seen, err := collect(t, r)
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff([]int64{1, 2, 2, 3, 4}, seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		for i, e := range got {
			if e.Delay != time.Second {
				t.Errorf("reopen %d after %v (%v), want 1s", i, e.Delay, e.Reason)
			}
		}
	})
}

// A reopen after a resync obeys the delay rule: a server that still answers
// "expired" to the resync's cursor (an HA apiserver whose caches disagree, a
// store restored from backup) is met at the minimum restart delay and
// backoff, not in a loop of Opens and resyncs; each expiry in a row is a
// failure for backoff purposes, so a policy that gives up does.
func TestReopenAfterResyncObeysTheDelayRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minRestart = 100 * time.Millisecond
		// Every Open is expired, the one after the resync's cursor too.
		src := streamtest.NewSource(letters(3), slices.Repeat([]streamtest.Step{{Kind: streamtest.ExpireAfter}}, 8)...)
		calls := 0
		var got []stream.RetryEvent[int64]
		policy := backoff.Exponential(backoff.WithInitialInterval(10*time.Millisecond), backoff.WithJitter(0),
			backoff.WithMultiplier(2), backoff.WithMaxRetries(5))
		r := newResumer(t, src, stream.WithResync(replay(1, 0, &calls)), stream.WithMinRestartDelay(minRestart),
			stream.WithBackoff(policy), retries(&got))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := r.Run(ctx, func(context.Context, ev) error { return nil })
		if !errors.Is(err, stream.ErrRetriesExhausted) || !errors.Is(err, errclass.ErrExpired) {
			t.Fatalf("Run() = %v, want an error matching %v and %v", err, stream.ErrRetriesExhausted, errclass.ErrExpired)
		}
		opens := src.Opens()
		if len(opens) != 6 || calls != 6 {
			t.Fatalf("%d Opens, %d resyncs; want 6 of each before the policy gave up", len(opens), calls)
		}
		for i := 1; i < len(opens); i++ {
			if gap := opens[i].At.Sub(opens[i-1].At); gap < minRestart {
				t.Errorf("Open %d came %v after the previous one, want at least %v", i, gap, minRestart)
			}
		}
		var attempts []int
		var delays []time.Duration
		for _, e := range got {
			attempts = append(attempts, e.Attempt)
			delays = append(delays, e.Delay)
		}
		if diff := cmp.Diff([]int{1, 2, 3, 4, 5}, attempts); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		want := []time.Duration{minRestart, minRestart, minRestart, minRestart, 160 * time.Millisecond}
		if diff := cmp.Diff(want, delays); diff != "" {
			t.Errorf("delays (-want +got):\n%s", diff)
		}
	})
}

func TestExpiredWithoutResyncHookSaysSo(t *testing.T) {
	r := newResumer(t, streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.ExpireAfter, K: 1}))
	_, err := collect(t, r)
	if !errors.Is(err, errclass.ErrExpired) || !errors.Is(err, streamtest.ErrInjected) {
		t.Fatalf("Run() = %v, want an error matching %v and %v", err, errclass.ErrExpired, streamtest.ErrInjected)
	}
	if !strings.Contains(err.Error(), "no resync hook") {
		t.Errorf("Run() = %q, want it to say that no resync hook is set", err)
	}
}

func TestResyncFailureIsClassified(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "retried by default", err: errors.New("list failed")},
		{name: "permanent ends Run", err: errclass.Permanent(errors.New("forbidden")), wantErr: true},
		{name: "expired again ends Run", err: errclass.CursorExpired(errors.New("list too old")), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.ExpireAfter}, streamtest.Step{Kind: streamtest.ExpireAfter})
			calls := 0
			resync := func(context.Context, error, func(ev) error) (int64, error) {
				if calls++; calls == 1 {
					return 0, tt.err
				}
				return 0, nil
			}
			r := newResumer(t, src, stream.WithResync(resync))
			seen, err := collect(t, r)
			if tt.wantErr {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Run() = %v, want an error matching %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
			if calls != 2 {
				t.Errorf("resync called %d times, want 2", calls)
			}
		})
	}
}

// ErrStop from the handler: the event is committed and saved, and Run
// returns nil; inside a replay, Run stops without the resync's cursor.
func TestErrStop(t *testing.T) {
	tests := []struct {
		name       string
		stopAt     int64
		wrap       bool
		script     []streamtest.Step
		wantSeen   []int64
		wantCursor int64
	}{
		{name: "stop on an event", stopAt: 3, wantSeen: seqs(1, 3), wantCursor: 3},
		{name: "a wrapped ErrStop", stopAt: 2, wrap: true, wantSeen: seqs(1, 2), wantCursor: 2},
		{name: "stop inside a replay", stopAt: 2, script: []streamtest.Step{{Kind: streamtest.ExpireAfter, K: 1}},
			wantSeen: seqs(1, 2), wantCursor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := cursor.NewMemory[int64](0)
			calls := 0
			r, err := stream.New(streamtest.NewSource(letters(5), tt.script...), extract, store,
				stream.WithCheckpointEvery(0), stream.WithResync(replay(2, 3, &calls)))
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			var seen []int64
			err = r.Run(context.Background(), func(_ context.Context, e ev) error {
				seen = append(seen, e.Seq)
				if e.Seq != tt.stopAt {
					return nil
				}
				if tt.wrap {
					return errors.Join(errors.New("enough"), stream.ErrStop)
				}
				return stream.ErrStop
			})
			if err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
			if got, _ := store.Load(context.Background()); got != tt.wantCursor || r.Cursor() != tt.wantCursor {
				t.Errorf("Store.Load() = %d, Cursor() = %d; want %d", got, r.Cursor(), tt.wantCursor)
			}
		})
	}
}

// Defect 10: no OnCommit for the cursor a resync returns. concurrency.md:
// OnCommit is called "one for the cursor a resync returns, none per replayed
// event".
func TestOnCommitForTheResyncCursor(t *testing.T) {
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

// Found by TestCombinations, beyond the list: after a transient
// Store.Save failure under WithConcurrency(n > 1), a resync's replay never
// reaches the handler, yet the resync's cursor is committed and saved: the
// replayed events are lost. (The same root as defect 1.)
func TestResyncAfterAFailedSaveHandlesTheReplay(t *testing.T) {
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
func TestExpiryWithAFailedSaveStillResyncs(t *testing.T) {
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
func TestEventsCountOnlyACompletedReplay(t *testing.T) {
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

func TestEmitAfterResyncReturnedRefuses(t *testing.T) {
	var kept func(ev) error
	src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
		if after == 0 {
			return nil, errclass.CursorExpired(errors.New("gone"))
		}
		return nil, stream.ErrEndOfStream
	})
	var handled atomic.Int64
	r := newResumer(t, src, stream.WithResync(func(_ context.Context, _ error, emit func(ev) error) (int64, error) {
		kept = emit
		return 5, nil
	}))
	if err := r.Run(context.Background(), func(context.Context, ev) error { handled.Add(1); return nil }); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if err := kept(ev{Seq: 9}); err == nil {
		t.Error("emit after the resync returned = nil, want an error")
	}
	if got := handled.Load(); got != 0 {
		t.Errorf("handler called %d times by a stale emit, want 0", got)
	}
}
