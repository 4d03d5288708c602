package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// The helpers shared by the tests of this package.

type ev = streamtest.Event[string]

var extract = streamtest.Extract[string]

// letters returns n log entries "e1".."en".
func letters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("e%d", i+1)
	}
	return out
}

// seqs returns from, from+1, ..., to.
func seqs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// newResumer makes a Resumer over src starting at cursor 0 in memory, with
// no backoff unless opts say otherwise.
func newResumer(t *testing.T, src stream.Source[ev, int64], opts ...stream.Option) *stream.Resumer[ev, int64] {
	t.Helper()
	r, err := stream.New(src, extract, cursor.NewMemory[int64](0),
		append([]stream.Option{stream.WithBackoff(backoff.Constant(0))}, opts...)...)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	return r
}

// record returns a handler that appends the sequence numbers it sees.
func record(seen *[]int64) func(context.Context, ev) error {
	return func(_ context.Context, e ev) error {
		*seen = append(*seen, e.Seq)
		return nil
	}
}

// collect runs r and returns the sequence numbers the handler saw.
func collect(t *testing.T, r *stream.Resumer[ev, int64]) ([]int64, error) {
	t.Helper()
	var seen []int64
	err := r.Run(context.Background(), record(&seen))
	return seen, err
}

// runBound bounds runBounded; it detects hangs, it is not a timing check.
const runBound = 10 * time.Second

// runBounded runs r on another goroutine and returns what Run panicked
// with, or what it returned; it fails the test if Run does not return
// within runBound.
func runBounded(t *testing.T, ctx context.Context, r *stream.Resumer[ev, int64], handle func(context.Context, ev) error) (panicked any, err error) {
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
		return res.panicked, res.err
	case <-time.After(runBound):
		t.Fatalf("Run did not return within %v", runBound)
		return nil, nil
	}
}

// wrapConns returns a Source whose Conns are src's, wrapped by wrap.
func wrapConns(src stream.Source[ev, int64], wrap func(stream.Conn[ev]) stream.Conn[ev]) stream.Source[ev, int64] {
	return stream.SourceFunc[ev, int64](func(ctx context.Context, after int64) (stream.Conn[ev], error) {
		c, err := src.Open(ctx, after)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	})
}

// recvFunc is a Conn whose Recv is a function; Close closes the wrapped
// Conn, if any.
type recvFunc struct {
	stream.Conn[ev]
	recv func(ctx context.Context) (ev, error)
}

func (c recvFunc) Recv(ctx context.Context) (ev, error) { return c.recv(ctx) }

func (c recvFunc) Close() error {
	if c.Conn != nil {
		return c.Conn.Close()
	}
	return nil
}

// retries returns a hook set that records every scheduled reopen.
func retries(got *[]stream.RetryEvent[int64]) stream.Option {
	var mu sync.Mutex
	return stream.WithHooks(stream.Hooks[int64]{OnRetry: func(e stream.RetryEvent[int64]) {
		mu.Lock()
		*got = append(*got, e)
		mu.Unlock()
	}})
}

// countingPolicy records how its sequences are used and can give up.
type countingPolicy struct {
	mu     sync.Mutex
	step   time.Duration
	limit  int // give up after limit steps without reset (0: never)
	nexts  int
	resets int
}

func (p *countingPolicy) NewSequence() backoff.Sequence { return &countingSeq{p: p} }

func (p *countingPolicy) counts() (nexts, resets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nexts, p.resets
}

// countingSeq is one sequence of a countingPolicy.
type countingSeq struct {
	p   *countingPolicy
	run int
}

func (s *countingSeq) Next() (time.Duration, bool) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.nexts++
	s.run++
	if s.p.limit > 0 && s.run > s.p.limit {
		return 0, false
	}
	return s.p.step, true
}

func (s *countingSeq) Reset() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.resets++
	s.run = 0
}

// flakyStore is a memory Store whose Save fails with fail while it is set,
// and which counts saves.
type flakyStore struct {
	cursor.Memory[int64]
	mu    sync.Mutex
	fail  error
	saves int
}

func (s *flakyStore) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	err := s.fail
	s.saves++
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Memory.Save(ctx, c)
}

func (s *flakyStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

// failingLoad is a Store whose Load fails with err.
type failingLoad struct{ err error }

func (f failingLoad) Load(context.Context) (int64, error) { return 0, f.err }
func (f failingLoad) Save(context.Context, int64) error   { return nil }

// listConn delivers its events, then ends with end. Close does nothing, so
// it may run concurrently with Recv.
type listConn[T any] struct {
	evs []T
	end error
}

func (c *listConn[T]) Recv(context.Context) (T, error) {
	if len(c.evs) == 0 {
		var zero T
		return zero, c.end
	}
	e := c.evs[0]
	c.evs = c.evs[1:]
	return e, nil
}

func (c *listConn[T]) Close() error { return nil }

// listSource serves events (their cursors given by seq, in increasing
// order): each Open delivers those after its cursor, then the end of the
// stream.
func listSource[T any](events []T, seq func(T) int64) stream.Source[T, int64] {
	return stream.SourceFunc[T, int64](func(_ context.Context, after int64) (stream.Conn[T], error) {
		var out []T
		for _, e := range events {
			if seq(e) > after {
				out = append(out, e)
			}
		}
		return &listConn[T]{evs: out, end: stream.ErrEndOfStream}, nil
	})
}

// tally counts handler calls per sequence number; it is safe for
// concurrent use.
type tally struct {
	mu    sync.Mutex
	calls map[int64]int
	order []int64
}

func (h *tally) add(seq int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = make(map[int64]int)
	}
	h.calls[seq]++
	h.order = append(h.order, seq)
}

// missing returns the numbers in [1, n] never seen.
func (h *tally) missing(n int64) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int64
	for i := int64(1); i <= n; i++ {
		if h.calls[i] == 0 {
			out = append(out, i)
		}
	}
	return out
}

func (h *tally) seen() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}

// nthSaveFails is a memory Store whose nth Save fails, once, with err.
type nthSaveFails struct {
	cursor.Memory[int64]
	mu    sync.Mutex
	n     int
	saves int
	err   error
}

func (s *nthSaveFails) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	s.saves++
	fail := s.saves == s.n
	s.mu.Unlock()
	if fail {
		return s.err
	}
	return s.Memory.Save(ctx, c)
}

func (s *cancelOnFirstSave) Save(ctx context.Context, c int64) error {
	s.mu.Lock()
	s.saves++
	first := s.saves == 1
	s.mu.Unlock()
	if first {
		s.cancel()
		return fmt.Errorf("store: writing cursor %d: %w", c, ctx.Err())
	}
	return s.Memory.Save(ctx, c)
}

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

func (l *failingLimiter) Wait(context.Context) error {
	l.calls.Add(1)
	return errors.New("rate: Wait(n=1) would exceed context deadline")
}

func (c *cycle) Error() string { return "cycle" }

func (c *cycle) Unwrap() error { return c.next }

func (s *failingSave[C]) Load(context.Context) (C, error) { return s.initial, nil }

func (s *failingSave[C]) Save(context.Context, C) error { return s.err }
