package stream_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// The idle watchdog (WithIdleTimeout) and the open limiter (WithOpenLimiter).

// disconnects returns a hook set that records every end of a connection.
func disconnects(got *[]stream.DisconnectEvent[int64]) stream.Option {
	return stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) { *got = append(*got, e) }})
}

// A half-open connection (Recv blocks and ignores ctx) is closed once it
// has delivered nothing for the idle timeout; the failure is classified and
// retried, and nothing is lost.
func TestIdleTimeoutClosesAStalledConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 10 * time.Second
		src := streamtest.NewSource(letters(4), streamtest.Step{Kind: streamtest.BlockAfter, K: 2})
		var ends []stream.DisconnectEvent[int64]
		var lastEvent time.Time
		r := newResumer(t, src, stream.WithIdleTimeout(idle), disconnects(&ends))
		var seen []int64
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			seen = append(seen, e.Seq)
			lastEvent = time.Now()
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff(seqs(1, 4), seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		if len(ends) != 1 || !errors.Is(ends[0].Err, stream.ErrIdleTimeout) || ends[0].Clean || ends[0].Decision.Action != errclass.Retry {
			t.Fatalf("disconnects = %+v, want one retried failure matching %v", ends, stream.ErrIdleTimeout)
		}
		opens := src.Opens()
		if stalled := opens[1].At.Sub(opens[0].At); stalled < idle || stalled > idle*5/4 {
			t.Errorf("the stalled connection was reopened after %v, want within [%v, %v]", stalled, idle, idle*5/4)
		}
		if lastEvent.Before(opens[1].At) {
			t.Errorf("last event before the reopen")
		}
		if live := src.Live(); live != 0 {
			t.Errorf("%d connections left open, want 0", live)
		}
	})
}

// Progress-only events count as liveness: a quiet stream with heartbeats
// more often than the timeout is never closed.
func TestIdleTimeoutHeartbeatsKeepAQuietStreamAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const heartbeats = 30
		opens := 0
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			if opens++; opens > 1 {
				return nil, stream.ErrEndOfStream
			}
			n := int64(0)
			return recvFunc{recv: func(context.Context) (ev, error) {
				if n == heartbeats {
					return ev{}, io.EOF
				}
				time.Sleep(7 * time.Second) // quiet, but alive
				n++
				return ev{Seq: n, Value: "heartbeat"}, nil
			}}, nil
		})
		beat := func(e ev) (int64, error) {
			if e.Value == "heartbeat" {
				return e.Seq, cursor.ProgressOnly
			}
			return e.Seq, nil
		}
		var ends []stream.DisconnectEvent[int64]
		r, err := stream.New(src, beat, cursor.NewMemory[int64](0),
			stream.WithIdleTimeout(10*time.Second), disconnects(&ends))
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if len(ends) != 1 || !ends[0].Clean || ends[0].Err != io.EOF {
			t.Errorf("disconnects = %+v, want one clean end after %d heartbeats", ends, heartbeats)
		}
		if st := r.Stats(); st.Progress != heartbeats {
			t.Errorf("Stats().Progress = %d, want %d", st.Progress, heartbeats)
		}
	})
}

// Time the handler holds an event counts as quiet time; a connection the
// watchdog closed meanwhile is reopened after that event without counting
// a failure.
func TestIdleTimeoutDuringASlowHandlerIsNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := streamtest.NewSource(letters(4))
		var ends []stream.DisconnectEvent[int64]
		r := newResumer(t, src, stream.WithIdleTimeout(10*time.Second), disconnects(&ends))
		var seen []int64
		err := r.Run(context.Background(), func(_ context.Context, e ev) error {
			seen = append(seen, e.Seq)
			if e.Seq == 2 {
				time.Sleep(time.Minute)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff(seqs(1, 4), seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		if len(ends) != 1 || !ends[0].Clean || !errors.Is(ends[0].Err, stream.ErrIdleTimeout) {
			t.Fatalf("disconnects = %+v, want one clean end matching %v", ends, stream.ErrIdleTimeout)
		}
		if opens := src.Opens(); len(opens) != 2 || opens[1].After != 2 {
			t.Errorf("Opens = %+v, want a reopen after 2", opens)
		}
		if st := r.Stats(); st.Retried != 0 {
			t.Errorf("Stats().Retried = %d, want 0", st.Retried)
		}
	})
}

// countingLimiter is a Limiter that counts its Waits; it can fail once, or
// block until released.
type countingLimiter struct {
	mu    sync.Mutex
	waits int
	err   error         // returned by the next Wait
	block chan struct{} // when set, Wait blocks until it is closed or ctx ends
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	l.waits++
	err, block := l.err, l.block
	l.err = nil
	l.mu.Unlock()
	if err != nil {
		return err
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (l *countingLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waits
}

// Every Open of every Resumer sharing a limiter waits on it, the first too;
// an error from the limiter is a failure like any other.
func TestOpenLimiterGatesEveryOpen(t *testing.T) {
	limiter := &countingLimiter{err: errors.New("limiter: budget store unavailable")}
	opens := 0
	var rs []*stream.Resumer[ev, int64]
	for range 3 {
		src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.BreakAfter, K: 1}, streamtest.Step{Kind: streamtest.EndAfter, K: 1})
		r := newResumer(t, src, stream.WithOpenLimiter(limiter))
		seen, err := collect(t, r)
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
			t.Errorf("handled events (-want +got):\n%s", diff)
		}
		opens += len(src.Opens())
		rs = append(rs, r)
	}
	// The failed Wait is one more than the Opens.
	if got := limiter.count(); got != opens+1 {
		t.Errorf("limiter waits = %d, want %d (every Open, and the failed wait)", got, opens+1)
	}
	if st := rs[0].Stats(); st.Retried != 2 {
		t.Errorf("first Resumer's Stats().Retried = %d, want 2 (the limiter's error and the break)", st.Retried)
	}
}

// A Resumer blocked on the limiter returns promptly when cancelled.
func TestOpenLimiterHonoursCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limiter := &countingLimiter{block: make(chan struct{})}
		src := streamtest.NewSource(letters(3))
		r := newResumer(t, src, stream.WithOpenLimiter(limiter))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx, func(context.Context, ev) error { return nil }) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want %v", err, context.Canceled)
		}
		if n := len(src.Opens()); n != 0 {
			t.Errorf("%d Opens, want 0", n)
		}
	})
}

// idleThenEnd opens one connection that delivers one event, which the
// handler holds past the idle timeout; the connection then ends with end.
func idleThenEnd(t *testing.T, end error, opts ...stream.Option) (opens int64, delays []time.Duration, err error) {
	var n atomic.Int64
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		if n.Add(1) > 1 {
			return nil, stream.ErrEndOfStream
		}
		return newScriptConn(end, ev{Seq: 1}), nil
	})
	var got []stream.RetryEvent[int64]
	r := newResumer(t, src, append([]stream.Option{stream.WithIdleTimeout(time.Second), retries(&got)}, opts...)...)
	err = r.Run(context.Background(), func(context.Context, ev) error {
		time.Sleep(2 * time.Second) // fake time: the watchdog fires while the handler holds the event
		return nil
	})
	for _, e := range got {
		delays = append(delays, e.Delay)
	}
	return n.Load(), delays, err
}

func TestIdleFireKeepsEndOfStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opens, _, err := idleThenEnd(t, stream.ErrEndOfStream)
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if opens != 1 {
			t.Errorf("%d opens, want 1: the end of the stream is not a reason to reopen", opens)
		}
	})
}

func TestIdleFireKeepsServerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, delays, err := idleThenEnd(t, errclass.RetryAfter(io.EOF, time.Minute))
		if err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if len(delays) != 1 || delays[0] < time.Minute {
			t.Errorf("reopen delays %v, want one of at least 1m (the server's)", delays)
		}
	})
}
