package stream_test

// What each misuse gets: a clear error or a documented behaviour, never a
// hang, and a panic only where the caller's own code panicked (the Resumer
// does not recover it, and lets it through after closing the Conn and saving
// the committed cursor). docs/misuse.md is the table of these tests.

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

func TestNewRefusesBadArguments(t *testing.T) {
	src := streamtest.NewSource(letters(1))
	store := cursor.NewMemory[int64](0)
	var (
		nilSource     *streamtest.Source[string]
		nilFuncSource stream.SourceFunc[ev, int64]
		nilStore      *cursor.Memory[int64]
	)
	tests := []struct {
		name      string
		src       stream.Source[ev, int64]
		noExtract bool
		store     cursor.Store[int64]
		opts      []stream.Option
		mention   []string // what the message names
	}{
		{name: "nil Source", src: nil, store: store, mention: []string{"nil Source"}},
		{name: "typed-nil Source", src: nilSource, store: store, mention: []string{"nil Source"}},
		{name: "nil SourceFunc", src: nilFuncSource, store: store, mention: []string{"nil Source"}},
		{name: "nil Extractor", src: src, noExtract: true, store: store, mention: []string{"nil Extractor"}},
		{name: "nil Store", src: src, store: nil, mention: []string{"nil Store"}},
		{name: "typed-nil Store", src: src, store: nilStore, mention: []string{"nil Store"}},
		{name: "several at once", src: nil, noExtract: true, store: nil, opts: []stream.Option{stream.WithMinRestartDelay(-1)},
			mention: []string{"nil Source", "nil Extractor", "nil Store", "WithMinRestartDelay"}},
		{name: "negative minimum restart delay", src: src, store: store, opts: []stream.Option{stream.WithMinRestartDelay(-time.Second)},
			mention: []string{"WithMinRestartDelay(-1s)"}},
		{name: "negative checkpoint interval", src: src, store: store, opts: []stream.Option{stream.WithCheckpointInterval(-time.Second)},
			mention: []string{"WithCheckpointInterval"}},
		{name: "negative checkpoint count", src: src, store: store, opts: []stream.Option{stream.WithCheckpointEvery(-1)},
			mention: []string{"WithCheckpointEvery(-1)"}},
		{name: "zero final-save timeout", src: src, store: store, opts: []stream.Option{stream.WithFinalSaveTimeout(0)},
			mention: []string{"WithFinalSaveTimeout"}},
		{name: "negative poll interval", src: src, store: store, opts: []stream.Option{stream.WithPollInterval(-time.Second)},
			mention: []string{"WithPollInterval"}},
		{name: "negative idle timeout", src: src, store: store, opts: []stream.Option{stream.WithIdleTimeout(-time.Second)},
			mention: []string{"WithIdleTimeout"}},
		{name: "negative max server delay", src: src, store: store, opts: []stream.Option{stream.WithMaxServerDelay(-time.Second)},
			mention: []string{"WithMaxServerDelay"}},
		{name: "typed-nil limiter", src: src, store: store, opts: []stream.Option{stream.WithOpenLimiter((*countingLimiter)(nil))},
			mention: []string{"WithOpenLimiter", "*stream_test.countingLimiter"}},
		{name: "out-of-range exponential backoff", src: src, store: store,
			opts:    []stream.Option{stream.WithBackoff(backoff.Exponential(backoff.WithInitialInterval(-time.Second)))},
			mention: []string{"WithBackoff", "initial interval"}},
		{name: "hooks for another cursor type", src: src, store: store, opts: []stream.Option{stream.WithHooks(stream.Hooks[string]{})},
			mention: []string{"WithHooks", "cursor type string", "cursor type int64"}},
		{name: "a cursor order for another cursor type", src: src, store: store, opts: []stream.Option{stream.WithCursorOrder(strings.Compare)},
			mention: []string{"WithCursorOrder", "cursor type string", "cursor type int64"}},
		{name: "a resync for another event type", src: src, store: store,
			opts:    []stream.Option{stream.WithResync(func(context.Context, error, func(string) error) (int64, error) { return 0, nil })},
			mention: []string{"WithResync", "events of type string", "streamtest.Event[string]"}},
		{name: "a resync for another cursor type", src: src, store: store,
			opts:    []stream.Option{stream.WithResync(func(context.Context, error, func(ev) error) (string, error) { return "", nil })},
			mention: []string{"WithResync", "cursor type string", "cursor type int64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := extract
			if tt.noExtract {
				x = nil
			}
			r, err := stream.New(tt.src, x, tt.store, tt.opts...)
			if r != nil || !errors.Is(err, stream.ErrInvalidOption) {
				t.Fatalf("New() = %v, %v, want nil and an error matching %v", r, err, stream.ErrInvalidOption)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("New() = %q, want a message that names %q", err, m)
				}
			}
		})
	}
	t.Run("out-of-range exponential backoff", func(t *testing.T) {
		_, err := stream.New(src, extract, store, stream.WithBackoff(backoff.Exponential(backoff.WithJitter(2))))
		if !errors.Is(err, stream.ErrInvalidOption) || !strings.Contains(err.Error(), "backoff: jitter 2") {
			t.Errorf("New() = %v, want an error matching %v that names the jitter", err, stream.ErrInvalidOption)
		}
	})
}

func TestNewAcceptsNils(t *testing.T) {
	r, err := stream.New(streamtest.NewSource(letters(1)), extract, cursor.NewMemory[int64](0),
		nil, stream.WithLogger(nil), stream.WithClassifier(nil), stream.WithBackoff(nil), stream.WithOpenLimiter(nil),
		stream.WithCursorOrder[int64](nil), stream.WithResync[ev, int64](nil))
	if err != nil || r == nil {
		t.Fatalf("New() = %v, %v, want a Resumer", r, err)
	}
}

func TestRunRefusesNilHandlerAndContext(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	r := newResumer(t, src)
	if p, err := runBounded(t, context.Background(), r, nil); p != nil || !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run(ctx, nil) = %v (panic %v), want %v", err, p, stream.ErrInvalidOption)
	}
	if p, err := runBounded(t, nil, r, record(new([]int64))); p != nil || !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run(nil, ...) = %v (panic %v), want %v", err, p, stream.ErrInvalidOption)
	}
	if n := len(src.Opens()); n != 0 {
		t.Errorf("%d Opens, want 0", n)
	}
}

// Negative delays where they can only mean zero (backoff.Constant,
// errclass.RetryAfter, a classifier's Decision.After) are taken as zero.
func TestNegativeDelaysMeanZero(t *testing.T) {
	negative := errclass.Func(func(error) errclass.Decision {
		return errclass.Decision{Action: errclass.Retry, After: -time.Hour}
	})
	src := streamtest.NewSource(letters(4),
		streamtest.Step{Kind: streamtest.DelayAfter, K: 1, Delay: -time.Hour},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1})
	var got []stream.RetryEvent[int64]
	r := newResumer(t, src, stream.WithBackoff(backoff.Constant(-time.Hour)),
		stream.WithClassifier(errclass.Chain(errclass.Markers(), negative)), retries(&got))
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 4), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	for i, e := range got {
		if e.Delay != 0 {
			t.Errorf("reopen %d after %v, want 0", i, e.Delay)
		}
	}
}

func TestOutOfRangeActionFallsToDefault(t *testing.T) {
	bogus := errclass.Func(func(error) errclass.Decision { return errclass.Decision{Action: 42} })
	r := newResumer(t, streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.BreakAfter, K: 1}), stream.WithClassifier(bogus))
	if _, err := collect(t, r); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if got := r.Stats().Retried; got != 1 {
		t.Errorf("Stats().Retried = %d, want 1", got)
	}
}

// A Conn whose Recv returns (zero, nil) forever: each zero event is
// delivered (cursors are opaque) until ctx ends; with a cursor order, the
// first zero cursor after a positive one is refused.
func TestZeroEventsForever(t *testing.T) {
	zeros := func(src stream.Source[ev, int64], after int) stream.Source[ev, int64] {
		return wrapConns(src, func(c stream.Conn[ev]) stream.Conn[ev] {
			n := 0
			return recvFunc{Conn: c, recv: func(ctx context.Context) (ev, error) {
				if n++; n > after {
					return ev{}, nil
				}
				return c.Recv(ctx)
			}}
		})
	}
	t.Run("opaque cursors", func(t *testing.T) {
		src := streamtest.NewSource(letters(3))
		r := newResumer(t, zeros(src, 0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := 0
		p, err := runBounded(t, ctx, r, func(_ context.Context, e ev) error {
			if e != (ev{}) {
				t.Errorf("handled %v, want the zero event", e)
			}
			if n++; n == 1000 {
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
	})
	t.Run("with a cursor order", func(t *testing.T) {
		src := streamtest.NewSource(letters(3))
		r := newResumer(t, zeros(src, 2), stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }))
		var seen []int64
		if p, err := runBounded(t, context.Background(), r, record(&seen)); p != nil || !errors.Is(err, stream.ErrCursorRegressed) {
			t.Errorf("Run() = %v (panic %v), want %v", err, p, stream.ErrCursorRegressed)
		}
		if diff := cmp.Diff(seqs(1, 2), seen); diff != "" || r.Cursor() != 2 || src.Live() != 0 {
			t.Errorf("Cursor() = %d, %d open, events (-want +got):\n%s", r.Cursor(), src.Live(), diff)
		}
	})
}

// nilConn is a Conn type whose methods dereference their receiver.
type nilConn struct{ closed bool }

func (c *nilConn) Recv(context.Context) (ev, error) { return ev{}, io.EOF }
func (c *nilConn) Close() error                     { c.closed = true; return nil }

// Open returning (nil, nil) or a typed-nil Conn: a failure matching
// ErrNilConn, retried by default, with no nil-pointer panic.
func TestOpenReturnsNoConn(t *testing.T) {
	tests := []struct {
		name string
		conn stream.Conn[ev]
	}{
		{name: "nil", conn: nil},
		{name: "typed nil", conn: (*nilConn)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := streamtest.NewSource(letters(3))
			calls := 0
			var ends []stream.DisconnectEvent[int64]
			r := newResumer(t, stream.SourceFunc[ev, int64](func(ctx context.Context, after int64) (stream.Conn[ev], error) {
				if calls++; calls == 1 {
					return tt.conn, nil
				}
				return src.Open(ctx, after)
			}), disconnects(&ends))
			var seen []int64
			if p, err := runBounded(t, context.Background(), r, record(&seen)); err != nil || p != nil {
				t.Fatalf("Run() = %v (panic %v), want nil", err, p)
			}
			if len(ends) == 0 || !errors.Is(ends[0].Err, stream.ErrNilConn) {
				t.Errorf("disconnects = %+v, want ErrNilConn first", ends)
			}
			if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
		})
	}
}

// Open returning a Conn and an error: the error is classified; the Conn is
// closed, not leaked.
func TestOpenReturnsConnAndError(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	calls := 0
	r := newResumer(t, stream.SourceFunc[ev, int64](func(ctx context.Context, after int64) (stream.Conn[ev], error) {
		c, err := src.Open(ctx, after)
		if calls++; calls == 1 && err == nil {
			return c, errors.New("handshake half done")
		}
		return c, err
	}))
	if p, err := runBounded(t, context.Background(), r, record(new([]int64))); err != nil || p != nil {
		t.Fatalf("Run() = %v (panic %v), want nil", err, p)
	}
	if live := src.Live(); live != 0 {
		t.Errorf("%d connections left open after Run, want 0", live)
	}
}

// Recv returning an event and an error: the error wins; the event comes
// again after the reopen.
func TestRecvReturnsEventAndError(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	conns := 0
	r := newResumer(t, wrapConns(src, func(c stream.Conn[ev]) stream.Conn[ev] {
		conns++
		first, n := conns == 1, 0
		return recvFunc{Conn: c, recv: func(ctx context.Context) (ev, error) {
			e, err := c.Recv(ctx)
			if n++; first && n == 2 {
				return e, errors.New("trailing garbage")
			}
			return e, err
		}}
	}))
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
}

// A Recv that panics (a Source bug) is not recovered: the panic reaches the
// caller of Run after the Conn was closed and the committed cursor saved;
// the Resumer can Run again.
func TestRecvPanicIsNotRecovered(t *testing.T) {
	src := streamtest.NewSource(letters(5))
	boom := errors.New("boom")
	store := cursor.NewMemory[int64](0)
	panicking := true
	r, err := stream.New(wrapConns(src, func(c stream.Conn[ev]) stream.Conn[ev] {
		n := 0
		return recvFunc{Conn: c, recv: func(ctx context.Context) (ev, error) {
			if n++; panicking && n == 3 {
				panic(boom)
			}
			return c.Recv(ctx)
		}}
	}), extract, store, stream.WithCheckpointEvery(0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	var seen []int64
	if p, _ := runBounded(t, context.Background(), r, record(&seen)); p != boom {
		t.Fatalf("Run() panicked with %v, want %v", p, boom)
	}
	if live := src.Live(); live != 0 {
		t.Errorf("%d connections left open after the panic, want 0", live)
	}
	if got, _ := store.Load(context.Background()); got != 2 {
		t.Errorf("the Store holds %d after the panic, want 2", got)
	}
	panicking = false
	if p, err := runBounded(t, context.Background(), r, record(&seen)); err != nil || p != nil {
		t.Fatalf("Run() after the panic = %v (panic %v), want nil", err, p)
	}
	if diff := cmp.Diff(seqs(1, 5), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
}

func TestOpenPanicIsNotRecovered(t *testing.T) {
	r := newResumer(t, stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		panic("open: boom")
	}))
	if p, _ := runBounded(t, context.Background(), r, record(new([]int64))); p != "open: boom" {
		t.Errorf("Run() panicked with %v, want %q", p, "open: boom")
	}
}

// A handler that panics: the panic reaches the caller of Run after the Conn
// was closed; the event is not committed, so the next Run delivers it again.
func TestHandlerPanicIsNotRecovered(t *testing.T) {
	src := streamtest.NewSource(letters(4))
	r := newResumer(t, src)
	p, _ := runBounded(t, context.Background(), r, func(_ context.Context, e ev) error {
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
	if p, err := runBounded(t, context.Background(), r, record(&seen)); err != nil || p != nil {
		t.Fatalf("next Run() = %v (panic %v), want nil", err, p)
	}
	if diff := cmp.Diff(seqs(2, 4), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
}

// Run or All while another Run is in progress: ErrAlreadyRunning at once;
// the running loop is undisturbed.
func TestRunWhileRunning(t *testing.T) {
	src := streamtest.NewSource(letters(3))
	src.SetEndOfLog(streamtest.Wait)
	r := newResumer(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- r.Run(ctx, func(context.Context, ev) error { return nil }) }()
	wctx, wcancel := context.WithTimeout(context.Background(), runBound)
	defer wcancel()
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("the first Run never reached the end of the log: %v", err)
	}
	if p, err := runBounded(t, context.Background(), r, record(new([]int64))); p != nil || !errors.Is(err, stream.ErrAlreadyRunning) {
		t.Errorf("second Run() = %v (panic %v), want %v", err, p, stream.ErrAlreadyRunning)
	}
	var yielded []error
	for _, err := range r.All(context.Background()) {
		yielded = append(yielded, err)
	}
	if len(yielded) != 1 || !errors.Is(yielded[0], stream.ErrAlreadyRunning) {
		t.Errorf("All() yielded %v, want one %v", yielded, stream.ErrAlreadyRunning)
	}
	src.Append("e4") // the first Run still delivers
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first Run() = %v, want %v", err, context.Canceled)
	}
	if got := r.Cursor(); got != 4 {
		t.Errorf("Cursor() = %d, want 4", got)
	}
}

func TestRunFromItsOwnHandler(t *testing.T) {
	r := newResumer(t, streamtest.NewSource(letters(2)))
	var inner error
	p, err := runBounded(t, context.Background(), r, func(ctx context.Context, e ev) error {
		if e.Seq == 1 {
			inner = r.Run(ctx, func(context.Context, ev) error { return nil })
		}
		return nil
	})
	if err != nil || p != nil || !errors.Is(inner, stream.ErrAlreadyRunning) {
		t.Errorf("outer Run() = %v (panic %v), inner Run() = %v; want nil and %v", err, p, inner, stream.ErrAlreadyRunning)
	}
}

// Run again after it returned continues after the committed cursor (the
// Store is not loaded again).
func TestRunAgainAfterReturn(t *testing.T) {
	src := streamtest.NewSource(letters(5))
	r := newResumer(t, src)
	refuse := errors.New("not now")
	if _, err := runBounded(t, context.Background(), r, func(_ context.Context, e ev) error {
		if e.Seq == 3 {
			return refuse
		}
		return nil
	}); !errors.Is(err, refuse) {
		t.Fatalf("Run() = %v, want %v", err, refuse)
	}
	var seen []int64
	if p, err := runBounded(t, context.Background(), r, record(&seen)); err != nil || p != nil {
		t.Fatalf("second Run() = %v (panic %v), want nil", err, p)
	}
	if diff := cmp.Diff(seqs(3, 5), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
	if opens := src.Opens(); opens[len(opens)-1].After != 2 {
		t.Errorf("last Open after %d, want 2", opens[len(opens)-1].After)
	}
}

// An extractor whose cursor goes backwards: refused with a cursor order,
// delivered without one (cursors are opaque).
func TestCursorGoesBackwards(t *testing.T) {
	tests := []struct {
		name     string
		ordered  bool
		wantSeen []int64
		wantErr  error
	}{
		{name: "with WithCursorOrder", ordered: true, wantSeen: seqs(1, 2), wantErr: stream.ErrCursorRegressed},
		{name: "without", ordered: false, wantSeen: seqs(1, 5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backwards := func(e ev) (int64, error) {
				if e.Seq == 3 {
					return 1, nil
				}
				return e.Seq, nil
			}
			var opts []stream.Option
			if tt.ordered {
				opts = append(opts, stream.WithCursorOrder(func(a, b int64) int { return int(a - b) }))
			}
			r, err := stream.New(streamtest.NewSource(letters(5)), backwards, cursor.NewMemory[int64](0), opts...)
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			seen, err := collect(t, r)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Run() = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSeen, seen); diff != "" {
				t.Errorf("handled events (-want +got):\n%s", diff)
			}
		})
	}
}

// A Store whose Load says the saved cursor expired ends Run with
// ErrExpired even with a resync hook: a Store's verdict is not resynced.
func TestStoreLoadExpiredIsNotResynced(t *testing.T) {
	expired := errclass.CursorExpired(errors.New("saved cursor predates the retention window"))
	calls := 0
	r, err := stream.New(streamtest.NewSource(letters(3)), extract, failingLoad{err: expired},
		stream.WithBackoff(backoff.Constant(0)), stream.WithResync(replay(1, 3, &calls)))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if p, err := runBounded(t, context.Background(), r, record(new([]int64))); p != nil || !errors.Is(err, errclass.ErrExpired) {
		t.Errorf("Run() = %v (panic %v), want an error matching %v", err, p, errclass.ErrExpired)
	}
	if calls != 0 {
		t.Errorf("resync called %d times, want 0", calls)
	}
}

// A final Save that fails is joined to Run's result and kept in Stats; the
// in-memory cursor is kept and the next Run saves it.
func TestFinalSaveFailureIsReportedAndRetried(t *testing.T) {
	down := errors.New("disk full")
	store := &flakyStore{fail: down}
	r, err := stream.New(streamtest.NewSource(letters(3)), extract, store, stream.WithCheckpointEvery(0))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if p, err := runBounded(t, context.Background(), r, record(new([]int64))); p != nil || !errors.Is(err, down) {
		t.Fatalf("Run() = %v (panic %v), want an error matching %v", err, p, down)
	}
	if err := r.Stats().FinalSaveError; !errors.Is(err, down) {
		t.Errorf("Stats().FinalSaveError = %v, want an error matching %v", err, down)
	}
	store.setFail(nil)
	if p, err := runBounded(t, context.Background(), r, record(new([]int64))); err != nil || p != nil {
		t.Fatalf("second Run() = %v (panic %v), want nil", err, p)
	}
	if got, _ := store.Load(context.Background()); got != 3 || r.Cursor() != 3 {
		t.Errorf("the Store holds %d, Cursor() = %d; want 3 and 3", got, r.Cursor())
	}
}

// closeErr is a Conn whose Close fails.
type closeErr struct{ stream.Conn[ev] }

func (c closeErr) Close() error {
	_ = c.Conn.Close()
	return errors.New("close: broken pipe")
}

func TestConnCloseErrorIsIgnored(t *testing.T) {
	src := streamtest.NewSource(letters(3), streamtest.Step{Kind: streamtest.BreakAfter, K: 1})
	r := newResumer(t, wrapConns(src, func(c stream.Conn[ev]) stream.Conn[ev] { return closeErr{c} }))
	seen, err := collect(t, r)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff(seqs(1, 3), seen); diff != "" {
		t.Errorf("handled events (-want +got):\n%s", diff)
	}
}

// Defect 9: WithHandlerRetry accepts a policy WithBackoff refuses.
func TestHandlerRetryRefusesAnInvalidPolicy(t *testing.T) {
	bad := backoff.Exponential(backoff.WithMultiplier(0.5))
	src := streamtest.NewSource(letters(1))
	if _, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithBackoff(bad)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("New(WithBackoff(multiplier 0.5)) = %v, want %v", err, stream.ErrInvalidOption)
	}
	if _, err := stream.New(src, extract, cursor.NewMemory[int64](0), stream.WithHandlerRetry(5, bad)); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("New(WithHandlerRetry(5, multiplier 0.5)) = %v, want %v", err, stream.ErrInvalidOption)
	}
}
