package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// Clean ends of connections: what they cost (never a failure), the guard
// against a server that accepts and closes at once, the poll interval, and
// Pages over a polled API.

func TestCleanEndAfterEventsReopensAtOnce(t *testing.T) {
	policy := &countingPolicy{step: time.Hour}
	var got []stream.RetryEvent[int64]
	core, logs := observer.New(zapcore.InfoLevel)
	src := streamtest.NewSource(letters(5), streamtest.Step{Kind: streamtest.EndAfter, K: 2}, streamtest.Step{Kind: streamtest.EndAfter, K: 2})
	r := newResumer(t, src, stream.WithBackoff(policy), stream.WithLogger(zap.New(core)), retries(&got))
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 5), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	for i, e := range got {
		if e.Delay != 0 || e.Attempt != 0 {
			t.Errorf("reopen %d after %v, attempt %d; want at once, attempt 0", i, e.Delay, e.Attempt)
		}
	}
	if nexts, _ := policy.counts(); nexts != 0 {
		t.Errorf("backoff steps drawn = %d, want 0", nexts)
	}
	if st := r.Stats(); st.CleanEnds != 2 || st.Retried+st.Failed+st.Expired != 0 {
		t.Errorf("Stats() = %d clean ends, %d failures; want 2 and 0", st.CleanEnds, st.Retried+st.Failed+st.Expired)
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("%d log entries at Info or above for clean ends, want 0: %v", n, logs.All())
	}
}

// A server that accepts and closes at once, with nothing to deliver, is
// slowed by the guard: each Open comes one guard step after the previous
// one started, the steps taken from the policy (a sequence of their own).
func TestGuardSlowsAServerThatClosesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const step = 50 * time.Millisecond
		var got []stream.RetryEvent[int64]
		script := []streamtest.Step{{Kind: streamtest.EndAfter}, {Kind: streamtest.EndAfter}, {Kind: streamtest.EndAfter}}
		src := streamtest.NewSource(letters(1), script...)
		r := newResumer(t, src, stream.WithBackoff(backoff.Constant(step)), retries(&got))
		if _, err := collect(t, r); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		opens := src.Opens()
		for i := 1; i < len(opens); i++ {
			if gap := opens[i].At.Sub(opens[i-1].At); i <= len(script) && gap != step {
				t.Errorf("Open %d came %v after the previous one, want %v", i, gap, step)
			}
		}
		for i, e := range got {
			if e.Reason != "poll" || e.Attempt != 0 {
				t.Errorf("reopen %d: reason %v, attempt %d; want %v, attempt 0", i, e.Reason, e.Attempt, "poll")
			}
		}
	})
}

// A quiet stream that the server ends on schedule (a Kubernetes watch
// timeout on a quiet namespace) lived longer than a guard step: it reopens
// at once, takes no step, and counts no attempt, so a policy that gives up
// after N attempts never stops a healthy quiet stream.
func TestIdleCleanEndTakesNoStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idleEnds = 5
		opens := 0
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			if opens++; opens > idleEnds {
				return nil, stream.ErrEndOfStream
			}
			return recvFunc{recv: func(context.Context) (ev, error) {
				time.Sleep(time.Minute) // nothing to say; the server ends it
				return ev{}, io.EOF
			}}, nil
		})
		core, logs := observer.New(zapcore.InfoLevel)
		var got []stream.RetryEvent[int64]
		policy := backoff.Exponential(backoff.WithInitialInterval(time.Second), backoff.WithMaxRetries(2))
		r := newResumer(t, src, stream.WithBackoff(policy), stream.WithLogger(zap.New(core)), retries(&got))
		if _, err := collect(t, r); err != nil {
			t.Fatalf("Run() = %v, want nil: idle ends must not exhaust the backoff", err)
		}
		if len(got) != idleEnds {
			t.Fatalf("got %d reopens, want %d", len(got), idleEnds)
		}
		for i, e := range got {
			if e.Attempt != 0 || e.Delay != 0 {
				t.Errorf("reopen %d = attempt %d, delay %v (%v), want attempt 0, no delay", i, e.Attempt, e.Delay, e.Reason)
			}
		}
		if n := logs.Len(); n != 0 {
			t.Errorf("%d log entries at Info or above for idle ends, want 0: %v", n, logs.All())
		}
	})
}

// Empty polls never spend the failure budget: with a policy that gives up
// after 3 steps, 3 empty polls and then one failure neither end Run nor
// count as attempts.
func TestCleanEndsNeverSpendTheFailureBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errServer := errors.New("500 internal server error")
		src := streamtest.NewSource(letters(2),
			streamtest.Step{Kind: streamtest.EndAfter}, streamtest.Step{Kind: streamtest.EndAfter}, streamtest.Step{Kind: streamtest.EndAfter},
			streamtest.Step{Kind: streamtest.FailOpen, Err: errServer},
		)
		var got []stream.RetryEvent[int64]
		policy := backoff.Exponential(backoff.WithInitialInterval(time.Millisecond), backoff.WithMaxRetries(3))
		r := newResumer(t, src, stream.WithBackoff(policy), retries(&got))
		seen, err := collect(t, r)
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff(seqs(1, 2), seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		var attempts []int
		for _, e := range got {
			attempts = append(attempts, e.Attempt)
		}
		if diff := cmp.Diff([]int{0, 0, 0, 1}, attempts); diff != "" {
			t.Errorf("attempts (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Retried != 1 || st.CleanEnds != 3 {
			t.Errorf("Stats() = %d retried, %d clean ends; want 1 and 3", st.Retried, st.CleanEnds)
		}
	})
}

// giveUp is a backoff policy whose sequences give up at once.
type giveUp struct{}

func (giveUp) NewSequence() backoff.Sequence { return giveUp{} }
func (giveUp) Next() (time.Duration, bool)   { return 0, false }
func (giveUp) Reset()                        {}

// A policy that gives up at once, and a server that accepts and closes at
// once: the guard still waits (a clean end never ends the stream), so the
// loop never spins.
func TestGuardNeverSpinsWhenThePolicyGivesUp(t *testing.T) {
	tests := []struct {
		name     string
		policy   backoff.Policy
		wantStep time.Duration
	}{
		{name: "stop at once", policy: giveUp{}, wantStep: time.Second},
		{name: "elapsed time shorter than the first step",
			policy:   backoff.Exponential(backoff.WithInitialInterval(time.Second), backoff.WithJitter(0), backoff.WithMaxElapsedTime(time.Millisecond)),
			wantStep: time.Second},
		{name: "retries exhausted keeps the last step",
			policy:   backoff.Exponential(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithJitter(0), backoff.WithMultiplier(2), backoff.WithMaxRetries(2)),
			wantStep: 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				src := streamtest.NewSource(letters(1))
				src.SetEndOfLog(streamtest.EOF)
				var got []stream.RetryEvent[int64]
				r := newResumer(t, src, stream.WithBackoff(tt.policy), retries(&got))
				if err := r.Run(ctx, func(context.Context, ev) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Run() = %v, want %v", err, context.DeadlineExceeded)
				}
				// A minute of fake time: about a minute's worth of steps, not a spin.
				if n := len(src.Opens()); n > 2+int(time.Minute/tt.wantStep) {
					t.Fatalf("%d Opens in a minute, want at most %d", n, 2+int(time.Minute/tt.wantStep))
				}
				last := got[len(got)-1]
				if last.Delay != tt.wantStep || last.Attempt != 0 {
					t.Errorf("last reopen after %v, attempt %d; want %v, attempt 0", last.Delay, last.Attempt, tt.wantStep)
				}
			})
		})
	}
}

// Only io.EOF returned by Conn.Recv is a clean end: errors from Open or the
// Store that merely wrap io.EOF (net/http's `Get "…": EOF`) are classified.
func TestOnlyRecvEOFIsACleanEnd(t *testing.T) {
	wrapped := fmt.Errorf(`Get "http://example/events": %w`, io.EOF)
	failOnWrapped := errclass.Is(io.EOF, errclass.Decision{Action: errclass.Fail})

	t.Run("open", func(t *testing.T) {
		src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.FailOpen, Err: errclass.Permanent(wrapped)})
		r := newResumer(t, src)
		if p, err := runBounded(t, context.Background(), r, record(new([]int64))); p != nil || !errors.Is(err, io.EOF) {
			t.Fatalf("Run() = %v (panic %v), want the permanent open failure", err, p)
		}
		if st := r.Stats(); st.Failed != 1 || st.CleanEnds != 0 {
			t.Errorf("Stats() = %d failed, %d clean ends; want 1 and 0", st.Failed, st.CleanEnds)
		}
	})
	t.Run("save", func(t *testing.T) {
		store := &flakyStore{fail: wrapped}
		asked := 0
		classifier := errclass.Func(func(err error) errclass.Decision {
			asked++
			return failOnWrapped.Classify(err)
		})
		r, err := stream.New(streamtest.NewSource(letters(3)), extract, store, stream.WithClassifier(classifier))
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		if p, err := runBounded(t, context.Background(), r, record(new([]int64))); p != nil || !errors.Is(err, io.EOF) {
			t.Fatalf("Run() = %v (panic %v), want the save failure", err, p)
		}
		if asked != 1 {
			t.Errorf("the classifier was asked %d times, want 1", asked)
		}
		if st := r.Stats(); st.Opens != 1 || st.CleanEnds != 0 {
			t.Errorf("Stats() = %d opens, %d clean ends; want 1 and 0", st.Opens, st.CleanEnds)
		}
	})
	t.Run("recv, wrapped", func(t *testing.T) {
		src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: wrapped})
		r := newResumer(t, src)
		if _, err := collect(t, r); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if st := r.Stats(); st.CleanEnds != 1 || st.Retried != 0 {
			t.Errorf("Stats() = %d clean ends, %d retried; want 1 and 0", st.CleanEnds, st.Retried)
		}
	})
}

// An SSE server's retry: travels on a clean end as errclass.RetryAfter(io.EOF,
// d): still a clean end, with d as a floor for the next wait.
func TestCleanEndHonoursServerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opens := 0
		src := stream.SourceFunc[ev, int64](func(_ context.Context, after int64) (stream.Conn[ev], error) {
			if opens++; opens > 1 {
				return nil, stream.ErrEndOfStream
			}
			sent := false
			return recvFunc{recv: func(context.Context) (ev, error) {
				if sent {
					return ev{}, errclass.RetryAfter(io.EOF, 3*time.Second)
				}
				sent = true
				return ev{Seq: 1}, nil
			}}, nil
		})
		var got []stream.RetryEvent[int64]
		r := newResumer(t, src, retries(&got))
		if _, err := collect(t, r); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if len(got) != 1 || got[0].Reason != "server" || got[0].Delay != 3*time.Second {
			t.Fatalf("retries = %+v, want one of 3s for the server", got)
		}
		if st := r.Stats(); st.CleanEnds != 1 || st.Retried != 0 {
			t.Errorf("Stats() clean ends %d, retried failures %d, want 1, 0", st.CleanEnds, st.Retried)
		}
	})
}

// pagedAPI is a polled API: fetch returns up to size items after a cursor,
// and what it is told to return otherwise.
type pagedAPI struct {
	log   []string
	size  int
	calls []time.Time
	fail  map[int]error // call number (1-based) → error
}

func (a *pagedAPI) fetch(_ context.Context, after int64) ([]ev, error) {
	a.calls = append(a.calls, time.Now())
	if err := a.fail[len(a.calls)]; err != nil {
		return nil, err
	}
	var page []ev
	for s := after + 1; s <= int64(len(a.log)) && len(page) < a.size; s++ {
		page = append(page, ev{Seq: s, Value: a.log[s-1]})
	}
	return page, nil
}

func TestPagesDeliversPagesAndPollsSteadily(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 2 * time.Second
		errBusy := errors.New("503 busy")
		api := &pagedAPI{log: letters(5), size: 2, fail: map[int]error{2: errBusy, 7: stream.ErrEndOfStream}}
		start := time.Now()
		r := newResumer(t, stream.Pages(api.fetch), stream.WithPollInterval(poll), stream.WithBackoff(backoff.Constant(time.Second)))
		seen, err := collect(t, r)
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff(seqs(1, 5), seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		var at []time.Duration
		for _, c := range api.calls {
			at = append(at, c.Sub(start))
		}
		// [1 2] at once, 503 then a backoff step, [3 4], [5], two empty
		// polls two seconds apart, then the end.
		want := []time.Duration{0, 0, time.Second, time.Second, time.Second, 3 * time.Second, 5 * time.Second}
		if diff := cmp.Diff(want, at); diff != "" {
			t.Errorf("fetch times (-want +got):\n%s", diff)
		}
		if st := r.Stats(); st.Retried != 1 || st.CleanEnds != 5 || st.Opens != 5 {
			t.Errorf("Stats() = %d retried, %d clean ends, %d opens; want 1, 5, 5", st.Retried, st.CleanEnds, st.Opens)
		}
	})
}

// The poll interval is steady, and a server's delay and the minimum restart
// delay still apply on top of it.
func TestPollIntervalFloors(t *testing.T) {
	tests := []struct {
		name       string
		end        error // how the empty connection ends
		minRestart time.Duration
		wantDelay  time.Duration
		wantReason string
	}{
		{name: "poll interval", end: io.EOF, wantDelay: 2 * time.Second, wantReason: "poll"},
		{name: "server delay above it", end: errclass.RetryAfter(io.EOF, 5*time.Second), wantDelay: 5 * time.Second, wantReason: "server"},
		{name: "server delay below it", end: errclass.RetryAfter(io.EOF, time.Second), wantDelay: 2 * time.Second, wantReason: "poll"},
		{name: "minimum restart above it", end: io.EOF, minRestart: 7 * time.Second, wantDelay: 7 * time.Second, wantReason: "min-restart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opens := 0
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					if opens++; opens > 3 {
						return nil, stream.ErrEndOfStream
					}
					return recvFunc{recv: func(context.Context) (ev, error) { return ev{}, tt.end }}, nil
				})
				var got []stream.RetryEvent[int64]
				r := newResumer(t, src, stream.WithPollInterval(2*time.Second), stream.WithMinRestartDelay(tt.minRestart),
					stream.WithBackoff(backoff.Constant(time.Hour)), retries(&got))
				if _, err := collect(t, r); err != nil {
					t.Fatalf("Run() = %v, want nil", err)
				}
				if len(got) != 3 {
					t.Fatalf("got %d reopens, want 3", len(got))
				}
				for i, e := range got {
					if e.Delay != tt.wantDelay || e.Reason != tt.wantReason || e.Attempt != 0 {
						t.Errorf("reopen %d = %v (%v), attempt %d; want %v (%v), attempt 0", i, e.Delay, e.Reason, e.Attempt, tt.wantDelay, tt.wantReason)
					}
				}
			})
		})
	}
}

func TestPagesNilFetchIsRefused(t *testing.T) {
	_, err := stream.New(stream.Pages[ev, int64](nil), extract, cursor.NewMemory[int64](0))
	if !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("New(Pages(nil)) = %v, want an error matching %v", err, stream.ErrInvalidOption)
	}
}
