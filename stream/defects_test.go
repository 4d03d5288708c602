package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Regression tests for defects found by attacking compositions of parts:
// each failed before its fix.

// scriptConn is a Conn that delivers events, then ends with err; Close may
// panic with closePanic.
type scriptConn struct {
	events     []ev
	err        error
	closePanic any
	closed     chan struct{}
	once       sync.Once
	block      bool // after the events, block until closed instead of ending with err
}

func newScriptConn(err error, events ...ev) *scriptConn {
	return &scriptConn{events: events, err: err, closed: make(chan struct{})}
}

func (c *scriptConn) Recv(ctx context.Context) (ev, error) {
	if len(c.events) > 0 {
		e := c.events[0]
		c.events = c.events[1:]
		return e, nil
	}
	if c.block {
		select {
		case <-c.closed:
			return ev{}, c.err
		case <-ctx.Done():
			return ev{}, ctx.Err()
		}
	}
	return ev{}, c.err
}

func (c *scriptConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	if c.closePanic != nil {
		panic(c.closePanic)
	}
	return nil
}

// failingLimiter fails every Wait at once and counts the calls.
type failingLimiter struct{ calls atomic.Int64 }

func (l *failingLimiter) Wait(context.Context) error {
	l.calls.Add(1)
	return errors.New("rate: Wait(n=1) would exceed context deadline")
}

func TestFailedLimiterWaitObeysMinRestartDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &failingLimiter{}
		src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
			t.Error("Open called although the limiter never let it")
			return nil, io.ErrUnexpectedEOF
		})
		r := newResumer(t, src, stream.WithOpenLimiter(lim), stream.WithMinRestartDelay(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Run(ctx, func(context.Context, ev) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run() = %v, want %v", err, context.DeadlineExceeded)
		}
		if got := lim.calls.Load(); got > 11 {
			t.Errorf("limiter called %d times in 10s with a 1s minimum restart delay, want at most 11", got)
		}
	})
}

// heartbeat is a progress-only event at seq: streamtest's extractor has no
// progress-only events, so these tests mark them by name.
func heartbeatExtract(e ev) (int64, error) {
	if e.Value == "beat" {
		return e.Seq, cursor.ProgressOnly
	}
	return e.Seq, nil
}

func TestHeartbeatOnlyConnectionsWait(t *testing.T) {
	tests := []struct {
		name string
		opts []stream.Option
		max  int64
	}{
		{name: "poll interval", opts: []stream.Option{stream.WithPollInterval(time.Second)}, max: 11},
		{name: "empty-end step", opts: []stream.Option{stream.WithBackoff(backoff.Constant(time.Second))}, max: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opens atomic.Int64
				src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
					opens.Add(1)
					return newScriptConn(io.EOF, ev{Seq: 0, Value: "beat"}), nil // a heartbeat at the same cursor, then the end
				})
				r, err := stream.New(src, heartbeatExtract, cursor.NewMemory[int64](0), tt.opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = r.Run(ctx, func(context.Context, ev) error { return nil })
				if got := opens.Load(); got > tt.max {
					t.Errorf("%d opens in 10s of heartbeat-only connections, want at most %d", got, tt.max)
				}
			})
		})
	}
}

func TestInclusivePagesDoNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches, handled atomic.Int64
		fetch := func(_ context.Context, after int64) ([]ev, error) {
			fetches.Add(1)
			if after == 0 {
				return []ev{{Seq: 1, Value: "a"}}, nil
			}
			return []ev{{Seq: after, Value: "again"}}, nil // the server includes the event at after
		}
		r := newResumer(t, stream.Pages(fetch), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }), stream.WithPollInterval(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Run(ctx, func(context.Context, ev) error { handled.Add(1); return nil })
		if got := fetches.Load(); got > 12 {
			t.Errorf("%d fetches in 10s with a 1s poll interval, want at most 12", got)
		}
		if got := handled.Load(); got > 12 {
			t.Errorf("%d events handled in 10s, want at most 12", got)
		}
	})
}

func TestSkipRepeats(t *testing.T) {
	fetch := func(_ context.Context, after int64) ([]ev, error) {
		if after >= 3 {
			return nil, stream.ErrEndOfStream
		}
		return []ev{{Seq: after}, {Seq: after + 1}}, nil // inclusive: the event at after comes again
	}
	r := newResumer(t, stream.Pages(fetch), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }), stream.WithSkipRepeats())
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Errorf("handled %v, want [1 2 3] (the event at the start cursor and each repeat skipped)", seen)
	}
	if got := r.Stats().Skipped; got != 3 {
		t.Errorf("Stats().Skipped = %d, want 3", got)
	}
	if _, err := stream.New(stream.Pages(fetch), extract, cursor.NewMemory[int64](0), stream.WithSkipRepeats()); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithSkipRepeats without an order) = %v, want %v", err, stream.ErrInvalidOption)
	}
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

func (c *cycle) Error() string { return "cycle" }
func (c *cycle) Unwrap() error { return c.next }

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

// failingSave is a Store that loads initial and fails every Save.
type failingSave[C any] struct {
	initial C
	err     error
}

func (s *failingSave[C]) Load(context.Context) (C, error) { return s.initial, nil }
func (s *failingSave[C]) Save(context.Context, C) error   { return s.err }
