package stream_test

// What each misuse gets (issue 7): every one a clear error or a documented
// behaviour, none a panic or a hang — except a panic of the caller's own
// code, which the Resumer does not recover and lets through after closing
// the Conn. The want column of this table is the README's "misuse → what
// you get" table.

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// misuseBound bounds every Run of this file; it detects hangs, it is not a
// timing check.
const misuseBound = 10 * time.Second

type misuseResumer = stream.Resumer[propEvent, int64]

func misuseSource(n int, script ...streamtest.Step) *streamtest.Source[int64] {
	return streamtest.NewSource(propLog()[:n], script...)
}

func misuseNew(t *testing.T, src stream.Source[propEvent, int64], opts ...stream.Option) *misuseResumer {
	t.Helper()
	r, err := stream.New(src, streamtest.Extract[int64], cursor.NewMemory[int64](0),
		append([]stream.Option{stream.WithBackoff(backoff.None())}, opts...)...)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return r
}

// misuseRun runs r on another goroutine and returns what Run returned, or
// what it panicked with; it fails the test if Run does not return within
// misuseBound.
func misuseRun(t *testing.T, ctx context.Context, r *misuseResumer, handle func(context.Context, propEvent) error) (err error, panicked any) {
	t.Helper()
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			res.panicked = recover()
			done <- res
		}()
		res.err = r.Run(ctx, handle)
	}()
	select {
	case res := <-done:
		return res.err, res.panicked
	case <-time.After(misuseBound):
		t.Fatalf("Run did not return within %v", misuseBound)
		return nil, nil
	}
}

// misuseCollect is a handler that records the sequence numbers it sees.
func misuseCollect(seen *[]int64) func(context.Context, propEvent) error {
	return func(_ context.Context, e propEvent) error {
		*seen = append(*seen, e.Seq)
		return nil
	}
}

func misuseSeqs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func misuseEqual[E comparable](a, b []E) bool { return slices.Equal(a, b) }

// misuseConn wraps a Conn to misbehave.
type misuseConn struct {
	stream.Conn[propEvent]
	recv func(ctx context.Context, n int) (propEvent, error, bool) // true: use this result
	n    int
}

func (c *misuseConn) Recv(ctx context.Context) (propEvent, error) {
	c.n++
	if c.recv != nil {
		if e, err, ok := c.recv(ctx, c.n); ok {
			return e, err
		}
	}
	return c.Conn.Recv(ctx)
}

// misuseWrap returns a Source whose Conns are src's, wrapped by wrap.
func misuseWrap(src *streamtest.Source[int64], wrap func(stream.Conn[propEvent]) stream.Conn[propEvent]) stream.Source[propEvent, int64] {
	return stream.SourceFunc[propEvent, int64](func(ctx context.Context, after int64) (stream.Conn[propEvent], error) {
		c, err := src.Open(ctx, after)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	})
}

// nilConn is a Conn type whose methods dereference their receiver.
type nilConn struct{ closed bool }

func (c *nilConn) Recv(context.Context) (propEvent, error) { return propEvent{}, io.EOF }
func (c *nilConn) Close() error                            { c.closed = true; return nil }

func TestMisuse(t *testing.T) {
	t.Parallel()
	store := cursor.NewMemory[int64](0)
	extract := streamtest.Extract[int64]
	var nilSource *streamtest.Source[int64]
	var nilStore *cursor.Memory[int64]
	var nilFuncSource stream.SourceFunc[propEvent, int64]

	// newErr checks that New refuses the arguments with ErrInvalidOption
	// and, when mention is set, says so in its message.
	newErr := func(mention string, build func() (*misuseResumer, error)) func(t *testing.T) {
		return func(t *testing.T) {
			r, err := build()
			if r != nil || !errors.Is(err, stream.ErrInvalidOption) {
				t.Fatalf("New() = %v, %v, want nil and an error matching %v", r, err, stream.ErrInvalidOption)
			}
			if !strings.Contains(err.Error(), mention) {
				t.Errorf("New() = %q, want a message that mentions %q", err, mention)
			}
		}
	}

	tests := []struct {
		name  string // the misuse
		want  string // what you get: the README's row
		check func(t *testing.T)
	}{
		{
			name:  "nil Source",
			want:  "New returns an error matching ErrInvalidOption",
			check: newErr("nil Source", func() (*misuseResumer, error) { return stream.New(nil, extract, store) }),
		},
		{
			name:  "typed-nil Source (a nil *T or nil SourceFunc)",
			want:  "New returns an error matching ErrInvalidOption",
			check: newErr("nil Source", func() (*misuseResumer, error) { return stream.New(nilSource, extract, store) }),
		},
		{
			name:  "nil SourceFunc",
			want:  "New returns an error matching ErrInvalidOption",
			check: newErr("nil Source", func() (*misuseResumer, error) { return stream.New(nilFuncSource, extract, store) }),
		},
		{
			name: "nil Extractor",
			want: "New returns an error matching ErrInvalidOption",
			check: newErr("nil Extractor", func() (*misuseResumer, error) {
				return stream.New[propEvent, int64](misuseSource(1), nil, store)
			}),
		},
		{
			name:  "nil Store",
			want:  "New returns an error matching ErrInvalidOption",
			check: newErr("nil Store", func() (*misuseResumer, error) { return stream.New(misuseSource(1), extract, nil) }),
		},
		{
			name:  "typed-nil Store",
			want:  "New returns an error matching ErrInvalidOption",
			check: newErr("nil Store", func() (*misuseResumer, error) { return stream.New(misuseSource(1), extract, nilStore) }),
		},
		{
			name: "several bad arguments at once",
			want: "New returns one error that lists each of them",
			check: newErr("nil Extractor", func() (*misuseResumer, error) {
				return stream.New[propEvent, int64](nil, nil, nil, stream.WithMinRestartDelay(-1))
			}),
		},
		{
			name: "nil Option",
			want: "ignored",
			check: func(t *testing.T) {
				if _, err := stream.New(misuseSource(1), extract, store, nil, nil); err != nil {
					t.Errorf("New() = %v, want nil", err)
				}
			},
		},
		{
			name: "nil handler",
			want: "Run returns an error matching ErrInvalidOption; nothing is opened",
			check: func(t *testing.T) {
				src := misuseSource(3)
				r := misuseNew(t, src)
				if err, p := misuseRun(t, context.Background(), r, nil); p != nil || !errors.Is(err, stream.ErrInvalidOption) {
					t.Errorf("Run() = %v (panic %v), want %v", err, p, stream.ErrInvalidOption)
				}
				if n := len(src.Opens()); n != 0 {
					t.Errorf("%d Opens, want 0", n)
				}
			},
		},
		{
			name: "nil context",
			want: "Run returns an error matching ErrInvalidOption (like http.NewRequestWithContext), not a nil-pointer panic",
			check: func(t *testing.T) {
				r := misuseNew(t, misuseSource(3))
				//lint:ignore SA1012 a nil context is the misuse under test
				err, p := misuseRun(t, nil, r, func(context.Context, propEvent) error { return nil })
				if p != nil || !errors.Is(err, stream.ErrInvalidOption) {
					t.Errorf("Run(nil, ...) = %v, panic %v; want an error matching %v and no panic", err, p, stream.ErrInvalidOption)
				}
			},
		},
		{
			name: "negative minimum restart delay",
			want: "New returns an error matching ErrInvalidOption",
			check: newErr("WithMinRestartDelay", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithMinRestartDelay(-time.Second))
			}),
		},
		{
			name: "negative checkpoint interval",
			want: "New returns an error matching ErrInvalidOption",
			check: newErr("WithCheckpointInterval", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithCheckpointInterval(-time.Second))
			}),
		},
		{
			name: "negative checkpoint count",
			want: "New returns an error matching ErrInvalidOption",
			check: newErr("WithCheckpointEvery", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithCheckpointEvery(-1))
			}),
		},
		{
			name: "zero or negative final-save timeout",
			want: "New returns an error matching ErrInvalidOption",
			check: newErr("WithFinalSaveTimeout", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithFinalSaveTimeout(0))
			}),
		},
		{
			name: "out-of-range exponential backoff (negative interval, multiplier < 1, jitter > 1)",
			want: "New returns an error matching ErrInvalidOption and backoff.ErrInvalidOption",
			check: func(t *testing.T) {
				_, err := stream.New(misuseSource(1), extract, store,
					stream.WithBackoff(backoff.Exponential(backoff.WithInitialInterval(-time.Second))))
				if !errors.Is(err, stream.ErrInvalidOption) || !errors.Is(err, backoff.ErrInvalidOption) {
					t.Errorf("New() = %v, want an error matching %v and %v", err, stream.ErrInvalidOption, backoff.ErrInvalidOption)
				}
			},
		},
		{
			name: "negative delays where they can only mean zero (backoff.Constant, errclass.RetryAfter, a classifier's Decision.After, a DelayAfter step)",
			want: "taken as zero: the reopen is immediate",
			check: func(t *testing.T) {
				negative := errclass.Func(func(error) errclass.Decision {
					return errclass.Decision{Action: errclass.Retry, After: -time.Hour}
				})
				src := misuseSource(4,
					streamtest.Step{Kind: streamtest.DelayAfter, K: 1, Delay: -time.Hour},
					streamtest.Step{Kind: streamtest.BreakAfter, K: 1})
				var delays []time.Duration
				r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
					stream.WithBackoff(backoff.Constant(-time.Hour)),
					stream.WithClassifier(errclass.Chain(errclass.Markers(), negative)),
					stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) { delays = append(delays, e.Delay) }}))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() = %v (panic %v), want nil", err, p)
				}
				if !misuseEqual(delays, []time.Duration{0, 0}) || !misuseEqual(seen, misuseSeqs(1, 4)) {
					t.Errorf("delays %v, events %v; want [0 0] and 1..4", delays, seen)
				}
			},
		},
		{
			name: "a classifier that answers an Action out of range",
			want: "treated as Unknown: errclass.Default decides",
			check: func(t *testing.T) {
				bogus := errclass.Func(func(error) errclass.Decision { return errclass.Decision{Action: 42} })
				r := misuseNew(t, misuseSource(3, streamtest.Step{Kind: streamtest.BreakAfter, K: 1}), stream.WithClassifier(bogus))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() = %v (panic %v), want nil", err, p)
				}
				if got := r.Stats().Retried; got != 1 {
					t.Errorf("Stats().Retried = %d, want 1", got)
				}
			},
		},
		{
			name: "a Conn whose Recv returns (zero, nil) forever",
			want: "each zero event is delivered and committed (cursors are opaque); cancelling ctx still ends Run with ctx's error and closes the Conn",
			check: func(t *testing.T) {
				src := misuseSource(3)
				r := misuseNew(t, misuseWrap(src, func(c stream.Conn[propEvent]) stream.Conn[propEvent] {
					return &misuseConn{Conn: c, recv: func(context.Context, int) (propEvent, error, bool) { return propEvent{}, nil, true }}
				}))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				zeros := 0
				err, p := misuseRun(t, ctx, r, func(_ context.Context, e propEvent) error {
					if e != (propEvent{}) {
						t.Errorf("handled %v, want the zero event", e)
					}
					if zeros++; zeros == 1000 {
						cancel()
					}
					return nil
				})
				if p != nil || !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v (panic %v), want %v", err, p, context.Canceled)
				}
				if live := src.Live(); live != 0 {
					t.Errorf("%d connections left open, want 0", live)
				}
			},
		},
		{
			name: "the same, with WithCursorOrder",
			want: "Run returns an error matching ErrCursorRegressed at the first zero event after a positive cursor",
			check: func(t *testing.T) {
				src := misuseSource(3)
				r := misuseNew(t, misuseWrap(src, func(c stream.Conn[propEvent]) stream.Conn[propEvent] {
					return &misuseConn{Conn: c, recv: func(_ context.Context, n int) (propEvent, error, bool) {
						return propEvent{}, nil, n > 2
					}}
				}), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); p != nil || !errors.Is(err, stream.ErrCursorRegressed) {
					t.Errorf("Run() = %v (panic %v), want %v", err, p, stream.ErrCursorRegressed)
				}
				if !misuseEqual(seen, misuseSeqs(1, 2)) || r.Cursor() != 2 || src.Live() != 0 {
					t.Errorf("events %v, Cursor() = %d, %d open; want 1..2, 2, 0", seen, r.Cursor(), src.Live())
				}
			},
		},
		{
			name: "Source.Open returns (nil, nil)",
			want: "a failure matching ErrNilConn, classified like any other (errclass.Default retries it)",
			check: func(t *testing.T) {
				src := misuseSource(3)
				calls := 0
				var disconnects []error
				r := misuseNew(t, stream.SourceFunc[propEvent, int64](func(ctx context.Context, after int64) (stream.Conn[propEvent], error) {
					if calls++; calls == 1 {
						return nil, nil
					}
					return src.Open(ctx, after)
				}), stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) { disconnects = append(disconnects, e.Err) }}))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() = %v (panic %v), want nil", err, p)
				}
				if len(disconnects) == 0 || !errors.Is(disconnects[0], stream.ErrNilConn) || !misuseEqual(seen, misuseSeqs(1, 3)) {
					t.Errorf("disconnects %v, events %v; want ErrNilConn first, then 1..3", disconnects, seen)
				}
			},
		},
		{
			name: "Source.Open returns a typed-nil Conn ((*T)(nil), nil)",
			want: "the same as (nil, nil): ErrNilConn, retried — no nil-pointer panic in Recv or Close",
			check: func(t *testing.T) {
				src := misuseSource(3)
				calls := 0
				var disconnects []error
				r := misuseNew(t, stream.SourceFunc[propEvent, int64](func(ctx context.Context, after int64) (stream.Conn[propEvent], error) {
					if calls++; calls == 1 {
						var c *nilConn
						return c, nil
					}
					return src.Open(ctx, after)
				}), stream.WithHooks(stream.Hooks[int64]{OnDisconnect: func(e stream.DisconnectEvent[int64]) { disconnects = append(disconnects, e.Err) }}))
				var seen []int64
				err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen))
				if p != nil {
					t.Fatalf("Run() panicked: %v; want the typed-nil Conn treated as ErrNilConn", p)
				}
				if err != nil || len(disconnects) == 0 || !errors.Is(disconnects[0], stream.ErrNilConn) {
					t.Errorf("Run() = %v, disconnects %v; want nil, and ErrNilConn first", err, disconnects)
				}
			},
		},
		{
			name: "Source.Open returns a Conn and an error",
			want: "the error is classified as an Open failure; the Conn is closed, not leaked",
			check: func(t *testing.T) {
				src := misuseSource(3)
				calls := 0
				r := misuseNew(t, stream.SourceFunc[propEvent, int64](func(ctx context.Context, after int64) (stream.Conn[propEvent], error) {
					c, err := src.Open(ctx, after)
					if calls++; calls == 1 && err == nil {
						return c, errors.New("handshake half done")
					}
					return c, err
				}))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() = %v (panic %v), want nil", err, p)
				}
				if live := src.Live(); live != 0 {
					t.Errorf("%d connections left open after Run, want 0: the Conn returned with the error leaked", live)
				}
			},
		},
		{
			name: "Recv returns an event and an error",
			want: "the error wins: the event is not delivered and comes again after the reopen",
			check: func(t *testing.T) {
				src := misuseSource(3)
				conns := 0
				r := misuseNew(t, misuseWrap(src, func(c stream.Conn[propEvent]) stream.Conn[propEvent] {
					conns++
					first := conns == 1
					return &misuseConn{Conn: c, recv: func(ctx context.Context, n int) (propEvent, error, bool) {
						if !first || n != 2 {
							return propEvent{}, nil, false
						}
						e, _ := c.Recv(ctx) // event 2, returned with an error
						return e, errors.New("trailing garbage"), true
					}}
				}))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() = %v (panic %v), want nil", err, p)
				}
				if !misuseEqual(seen, misuseSeqs(1, 3)) {
					t.Errorf("events %v, want 1..3 once each", seen)
				}
			},
		},
		{
			name: "a Recv that panics (a Source bug)",
			want: "not recovered: the panic reaches the caller of Run, after the Conn was closed and the committed cursor saved; the Resumer can Run again",
			check: func(t *testing.T) {
				src := misuseSource(5)
				boom := errors.New("boom")
				store := cursor.NewMemory[int64](0)
				panicking := true
				r, err := stream.New(misuseWrap(src, func(c stream.Conn[propEvent]) stream.Conn[propEvent] {
					return &misuseConn{Conn: c, recv: func(_ context.Context, n int) (propEvent, error, bool) {
						if panicking && n == 3 {
							panic(boom)
						}
						return propEvent{}, nil, false
					}}
				}), extract, store)
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				var seen []int64
				_, p := misuseRun(t, context.Background(), r, misuseCollect(&seen))
				if p != boom {
					t.Fatalf("Run() panicked with %v, want %v", p, boom)
				}
				if live := src.Live(); live != 0 {
					t.Errorf("%d connections left open after the panic, want 0", live)
				}
				if got, _ := store.Load(context.Background()); got != 2 {
					t.Errorf("the Store holds %d after the panic, want 2", got)
				}
				panicking = false
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("Run() after the panic = %v (panic %v), want nil", err, p)
				}
				if !misuseEqual(seen, misuseSeqs(1, 5)) {
					t.Errorf("events %v, want 1..5 once each", seen)
				}
			},
		},
		{
			name: "an Open that panics",
			want: "not recovered: the panic reaches the caller of Run; no Conn was opened",
			check: func(t *testing.T) {
				r := misuseNew(t, stream.SourceFunc[propEvent, int64](func(context.Context, int64) (stream.Conn[propEvent], error) {
					panic("open: boom")
				}))
				if _, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); p != "open: boom" {
					t.Errorf("Run() panicked with %v, want %q", p, "open: boom")
				}
			},
		},
		{
			name: "a handler that panics",
			want: "not recovered: the panic reaches the caller of Run after the Conn was closed; the event is not committed, so the next Run delivers it again",
			check: func(t *testing.T) {
				src := misuseSource(4)
				r := misuseNew(t, src)
				_, p := misuseRun(t, context.Background(), r, func(_ context.Context, e propEvent) error {
					if e.Seq == 2 {
						panic("handler: boom")
					}
					return nil
				})
				if p != "handler: boom" {
					t.Fatalf("Run() panicked with %v, want %q", p, "handler: boom")
				}
				if live := src.Live(); live != 0 || r.Cursor() != 1 {
					t.Errorf("%d open, Cursor() = %d; want 0 open and 1", live, r.Cursor())
				}
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil || !misuseEqual(seen, misuseSeqs(2, 4)) {
					t.Errorf("next Run() = %v (panic %v), events %v; want nil and 2..4", err, p, seen)
				}
			},
		},
		{
			name: "Run called while another Run or All is in progress on the same Resumer",
			want: "returns (All yields) ErrAlreadyRunning at once; the running loop is not disturbed",
			check: func(t *testing.T) {
				src := misuseSource(3)
				src.SetEndOfLog(streamtest.Wait)
				r := misuseNew(t, src)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				first := make(chan error, 1)
				go func() { first <- r.Run(ctx, func(context.Context, propEvent) error { return nil }) }()
				wctx, wcancel := context.WithTimeout(context.Background(), misuseBound)
				defer wcancel()
				if err := src.AwaitBlocked(wctx); err != nil {
					t.Fatalf("the first Run never reached the end of the log: %v", err)
				}
				if err, p := misuseRun(t, context.Background(), r, func(context.Context, propEvent) error { return nil }); p != nil || !errors.Is(err, stream.ErrAlreadyRunning) {
					t.Errorf("second Run() = %v (panic %v), want %v", err, p, stream.ErrAlreadyRunning)
				}
				var yielded []error
				for _, err := range r.All(context.Background()) {
					yielded = append(yielded, err)
				}
				if len(yielded) != 1 || !errors.Is(yielded[0], stream.ErrAlreadyRunning) {
					t.Errorf("All() yielded %v, want one %v", yielded, stream.ErrAlreadyRunning)
				}
				src.Append(1) // the first Run still delivers
				cancel()
				if err := <-first; !errors.Is(err, context.Canceled) {
					t.Errorf("first Run() = %v, want %v", err, context.Canceled)
				}
			},
		},
		{
			name: "Run called from inside its own handler",
			want: "the inner Run returns ErrAlreadyRunning; the outer one goes on",
			check: func(t *testing.T) {
				r := misuseNew(t, misuseSource(2))
				var inner error
				err, p := misuseRun(t, context.Background(), r, func(ctx context.Context, e propEvent) error {
					if e.Seq == 1 {
						inner = r.Run(ctx, func(context.Context, propEvent) error { return nil })
					}
					return nil
				})
				if err != nil || p != nil || !errors.Is(inner, stream.ErrAlreadyRunning) {
					t.Errorf("outer Run() = %v (panic %v), inner Run() = %v; want nil and %v", err, p, inner, stream.ErrAlreadyRunning)
				}
			},
		},
		{
			name: "Run called again after it returned",
			want: "continues after the committed cursor (the Store is not loaded again)",
			check: func(t *testing.T) {
				src := misuseSource(5)
				r := misuseNew(t, src)
				refuse := errors.New("not now")
				if err, _ := misuseRun(t, context.Background(), r, func(_ context.Context, e propEvent) error {
					if e.Seq == 3 {
						return refuse
					}
					return nil
				}); err != refuse {
					t.Fatalf("Run() = %v, want %v", err, refuse)
				}
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil {
					t.Fatalf("second Run() = %v (panic %v), want nil", err, p)
				}
				opens := src.Opens()
				if !misuseEqual(seen, misuseSeqs(3, 5)) || opens[len(opens)-1].After != 2 {
					t.Errorf("events %v, last Open after %d; want 3..5 and 2", seen, opens[len(opens)-1].After)
				}
			},
		},
		{
			name: "an extractor whose cursor goes backwards, with WithCursorOrder",
			want: "Run returns an error matching ErrCursorRegressed; the event is not delivered and the cursor stays",
			check: func(t *testing.T) {
				backwards := func(e propEvent) (int64, error) {
					if e.Seq == 3 {
						return 1, nil
					}
					return e.Seq, nil
				}
				r, err := stream.New(misuseSource(5), backwards, cursor.NewMemory[int64](0),
					stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); p != nil || !errors.Is(err, stream.ErrCursorRegressed) {
					t.Fatalf("Run() = %v (panic %v), want %v", err, p, stream.ErrCursorRegressed)
				}
				if !misuseEqual(seen, misuseSeqs(1, 2)) || r.Cursor() != 2 {
					t.Errorf("events %v, Cursor() = %d; want 1..2 and 2", seen, r.Cursor())
				}
			},
		},
		{
			name: "the same without WithCursorOrder",
			want: "delivered: cursors are opaque unless an order is given",
			check: func(t *testing.T) {
				backwards := func(e propEvent) (int64, error) {
					if e.Seq == 3 {
						return 1, nil
					}
					return e.Seq, nil
				}
				r, err := stream.New(misuseSource(5), backwards, cursor.NewMemory[int64](0))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil || !misuseEqual(seen, misuseSeqs(1, 5)) {
					t.Errorf("Run() = %v (panic %v), events %v; want nil and 1..5", err, p, seen)
				}
			},
		},
		{
			name: "an extractor that fails",
			want: "Run returns an error matching ErrExtract and the extractor's error; the event is not delivered",
			check: func(t *testing.T) {
				bad := errors.New("no id")
				r, err := stream.New(misuseSource(3), func(e propEvent) (int64, error) {
					if e.Seq == 2 {
						return 0, bad
					}
					return e.Seq, nil
				}, cursor.NewMemory[int64](0))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); p != nil || !errors.Is(err, stream.ErrExtract) || !errors.Is(err, bad) {
					t.Errorf("Run() = %v (panic %v), want an error matching %v and %v", err, p, stream.ErrExtract, bad)
				}
			},
		},
		{
			name: "WithHooks[string] on a Resumer whose cursor is int64",
			want: "New returns an error matching ErrInvalidOption naming both types",
			check: newErr("string", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithHooks(stream.Hooks[string]{}))
			}),
		},
		{
			name: "WithCursorOrder over another cursor type",
			want: "New returns an error matching ErrInvalidOption naming both types",
			check: newErr("int64", func() (*misuseResumer, error) {
				return stream.New(misuseSource(1), extract, store, stream.WithCursorOrder(strings.Compare))
			}),
		},
		{
			name: "WithResync with another event or cursor type",
			want: "New returns an error matching ErrInvalidOption naming the Resumer's types",
			check: newErr("int64", func() (*misuseResumer, error) {
				wrongT := stream.WithResync(func(context.Context, error, func(string) error) (int64, error) { return 0, nil })
				return stream.New(misuseSource(1), extract, store, wrongT)
			}),
		},
		{
			name: "an expired cursor without WithResync",
			want: "Run returns an error matching errclass.ErrExpired and the failure",
			check: func(t *testing.T) {
				r := misuseNew(t, misuseSource(3, streamtest.Step{Kind: streamtest.ExpireAfter, K: 1}))
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); p != nil || !errors.Is(err, errclass.ErrExpired) || !errors.Is(err, streamtest.ErrInjected) {
					t.Errorf("Run() = %v (panic %v), want an error matching %v and %v", err, p, errclass.ErrExpired, streamtest.ErrInjected)
				}
			},
		},
		{
			name: "a resync hook that fails",
			want: "its error is classified like any failure: errclass.Default retries it (the next Open meets the expired cursor and resyncs again)",
			check: func(t *testing.T) {
				calls := 0
				var r *misuseResumer
				r = misuseNew(t, misuseSource(3, streamtest.Step{Kind: streamtest.ExpireAfter, K: 1}, streamtest.Step{Kind: streamtest.ExpireAfter}),
					stream.WithResync(func(context.Context, error, func(propEvent) error) (int64, error) {
						if calls++; calls == 1 {
							return 0, errors.New("listing failed")
						}
						return r.Cursor(), nil
					}))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil || calls != 2 || !misuseEqual(seen, misuseSeqs(1, 3)) {
					t.Errorf("Run() = %v (panic %v), %d resync calls, events %v; want nil, 2, 1..3", err, p, calls, seen)
				}
			},
		},
		{
			name: "a Store whose Load says the saved cursor expired, with WithResync",
			want: "Run returns an error matching errclass.ErrExpired (a Store's verdict is not resynced), never an internal error",
			check: func(t *testing.T) {
				expired := errclass.CursorExpired(errors.New("saved cursor predates the retention window"))
				r, err := stream.New(misuseSource(3), extract, misuseLoadStore{err: expired},
					stream.WithBackoff(backoff.None()),
					stream.WithResync(func(context.Context, error, func(propEvent) error) (int64, error) { return 0, nil }))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); p != nil || !errors.Is(err, errclass.ErrExpired) {
					t.Errorf("Run() = %v (panic %v), want an error matching %v", err, p, errclass.ErrExpired)
				}
			},
		},
		{
			name: "a Store whose final Save fails",
			want: "Run's result is joined with the save error (errors.Is finds both); the in-memory cursor is kept and the next Run saves it",
			check: func(t *testing.T) {
				down := errors.New("disk full")
				var fail atomic.Bool
				fail.Store(true)
				s := &misuseSaveStore{fail: &fail, err: down}
				r, err := stream.New(misuseSource(3), extract, s, stream.WithCheckpointEvery(0))
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); p != nil || !errors.Is(err, down) {
					t.Fatalf("Run() = %v (panic %v), want an error matching %v", err, p, down)
				}
				fail.Store(false)
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(new([]int64))); err != nil || p != nil {
					t.Fatalf("second Run() = %v (panic %v), want nil", err, p)
				}
				if got, _ := s.Load(context.Background()); got != 3 || r.Cursor() != 3 {
					t.Errorf("the Store holds %d, Cursor() = %d; want 3 and 3", got, r.Cursor())
				}
			},
		},
		{
			name: "a Conn whose Close returns an error",
			want: "ignored: the Conn is done with either way",
			check: func(t *testing.T) {
				src := misuseSource(3, streamtest.Step{Kind: streamtest.BreakAfter, K: 1})
				r := misuseNew(t, misuseWrap(src, func(c stream.Conn[propEvent]) stream.Conn[propEvent] {
					return misuseCloseErr{c}
				}))
				var seen []int64
				if err, p := misuseRun(t, context.Background(), r, misuseCollect(&seen)); err != nil || p != nil || !misuseEqual(seen, misuseSeqs(1, 3)) {
					t.Errorf("Run() = %v (panic %v), events %v; want nil and 1..3", err, p, seen)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v; want: %s", tt.name, p, tt.want)
				}
			}()
			tt.check(t)
		})
	}
}

type misuseLoadStore struct{ err error }

func (s misuseLoadStore) Load(context.Context) (int64, error) { return 0, s.err }
func (s misuseLoadStore) Save(context.Context, int64) error   { return nil }

type misuseSaveStore struct {
	cursor.Memory[int64]
	fail *atomic.Bool
	err  error
}

func (s *misuseSaveStore) Save(ctx context.Context, c int64) error {
	if s.fail.Load() {
		return s.err
	}
	return s.Memory.Save(ctx, c)
}

type misuseCloseErr struct{ stream.Conn[propEvent] }

func (c misuseCloseErr) Close() error {
	_ = c.Conn.Close()
	return errors.New("close: broken pipe")
}
