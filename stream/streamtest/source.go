package streamtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Event is one entry of the fake log: its sequence number (the cursor) and
// its value.
type Event[T any] struct {
	Seq   int64
	Value T
}

// Extract is the extractor for a fake Source: an event's cursor is its
// sequence number.
func Extract[T any](e Event[T]) (int64, error) { return e.Seq, nil }

// Kind is what a [Step] of the fault script does.
type Kind uint8

const (
	// Deliver serves events to the end of the log (then [EndOfLog] applies);
	// K is ignored. Every connection does this once the script has run out.
	Deliver Kind = iota
	// FailOpen makes Open fail with the step's error.
	FailOpen
	// EndAfter ends the connection cleanly (io.EOF) after K events.
	EndAfter
	// BreakAfter breaks the connection with the step's error after K events.
	BreakAfter
	// DelayAfter breaks the connection after K events with the step's error
	// marked [errclass.RetryAfter] with the step's Delay, as a server that
	// answers Retry-After; with K = 0 it is Open that answers so.
	DelayAfter
	// ExpireAfter breaks the connection after K events with the step's error
	// marked [errclass.CursorExpired]; with K = 0 it is Open that answers so.
	ExpireAfter
	// BlockAfter makes Recv block after K events, ignoring its context, until
	// Close: a silent server read by a client that does not honour ctx.
	BlockAfter
	// EndStreamAfter ends the stream ([stream.ErrEndOfStream]) after K events.
	EndStreamAfter
	// BlockOpen makes Open block until its context ends, then return the
	// context's error: a server that never answers the handshake.
	BlockOpen
	numKinds
)

func (k Kind) name() string {
	switch k {
	case Deliver:
		return "deliver"
	case FailOpen:
		return "fail-open"
	case EndAfter:
		return "end-after"
	case BreakAfter:
		return "break-after"
	case DelayAfter:
		return "delay-after"
	case ExpireAfter:
		return "expire-after"
	case BlockAfter:
		return "block-after"
	case EndStreamAfter:
		return "end-stream-after"
	case BlockOpen:
		return "block-open"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Step is one entry of a fault script: what one Open and the connection it
// returns do. Each Open consumes one step, whatever the outcome of the Open.
type Step struct {
	Kind Kind
	// K is the number of events the connection delivers before the fault;
	// when the log ends first, [EndOfLog] applies instead.
	K int
	// Err is the error of FailOpen and BreakAfter, and the error DelayAfter
	// and ExpireAfter mark; [ErrInjected] when nil.
	Err error
	// Delay is the delay DelayAfter asks for.
	Delay time.Duration
}

// String describes the step: "break-after(2)", "delay-after(0, 1s)".
func (s Step) String() string {
	switch s.Kind {
	case FailOpen:
		return fmt.Sprintf("%s(%v)", s.Kind.name(), s.err())
	case DelayAfter:
		return fmt.Sprintf("%s(%d, %v)", s.Kind.name(), s.K, s.Delay)
	case BlockOpen:
		return s.Kind.name()
	}
	return fmt.Sprintf("%s(%d)", s.Kind.name(), s.K)
}

func (s Step) err() error {
	if s.Err != nil {
		return s.Err
	}
	return ErrInjected
}

// ErrInjected is the error of an injected fault that names none. Every
// fault of the script matches it (errors.Is) unless its step names an Err.
var ErrInjected = errors.New("streamtest: injected failure")

var errClosed = errors.New("streamtest: connection closed")

// EndOfLog says what a connection does when it has delivered the whole log.
type EndOfLog uint8

const (
	// EndStream returns [stream.ErrEndOfStream]: Run returns nil. The default.
	EndStream EndOfLog = iota
	// Wait blocks until an Append, Close, or the end of Recv's ctx: a live log.
	Wait
	// EOF ends the connection cleanly (io.EOF), so the Resumer reopens.
	EOF
)

// Open records one call of [Source.Open] that found its context live.
type Open struct {
	// After is the cursor asked for.
	After int64
	// At is when Open was called.
	At time.Time
	// Step is the step it consumed (Kind Deliver once the script ran out).
	Step Step
	// Live is the number of connections of this Source still open when
	// Open was called: 0 when the previous connection was closed first.
	Live int
}

// Source is a fake [stream.Source] over an in-memory log of events of type
// T, playing a fault script, one [Step] per Open. Make one with [NewSource].
// It is safe for concurrent use; its connections follow [stream.Conn].
type Source[T any] struct {
	mu      sync.Mutex
	log     []T
	script  []Step
	end     EndOfLog
	opens   []Open
	live    int
	blocked int           // Opens and Recvs blocked right now
	grew    chan struct{} // closed and replaced on Append
	changed chan struct{} // closed and replaced when blocked grows
}

// NewSource returns a Source over log (event i has sequence number i+1)
// that plays script, one step per Open. It never writes to log's elements or
// spare capacity, so many Sources may share a log.
func NewSource[T any](log []T, script ...Step) *Source[T] {
	return &Source[T]{
		log:     slices.Clip(log),
		script:  slices.Clone(script),
		grew:    make(chan struct{}),
		changed: make(chan struct{}),
	}
}

// SetEndOfLog sets what a connection does at the end of the log.
func (s *Source[T]) SetEndOfLog(e EndOfLog) {
	s.mu.Lock()
	s.end = e
	s.mu.Unlock()
}

// Append adds events to the log and wakes connections waiting at its end.
func (s *Source[T]) Append(values ...T) {
	s.mu.Lock()
	s.log = append(s.log, values...)
	close(s.grew)
	s.grew = make(chan struct{})
	s.mu.Unlock()
}

// Opens returns a copy of the record of every Open so far.
func (s *Source[T]) Opens() []Open {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.opens)
}

// Live returns the number of connections opened and not yet closed.
func (s *Source[T]) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// AwaitBlocked waits until at least one call is blocked (an Open in a
// BlockOpen step, a Recv in a BlockAfter step or waiting at the end of the
// log, see [Wait]) and returns nil, or returns ctx's error if ctx ends
// first.
func (s *Source[T]) AwaitBlocked(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, changed := s.blocked, s.changed
		s.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// block counts a blocked call until the returned function is called.
func (s *Source[T]) block() (unblock func()) {
	s.mu.Lock()
	s.blocked++
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.blocked--
		s.mu.Unlock()
	}
}

// Open implements [stream.Source]: it consumes one script step and returns a
// connection that delivers the events after cursor after. A cursor outside
// the log gets an error marked [errclass.Permanent]; an Open on a context
// that already ended gets its error, consuming and recording nothing.
func (s *Source[T]) Open(ctx context.Context, after int64) (stream.Conn[Event[T]], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var step Step
	if len(s.script) > 0 {
		step, s.script = s.script[0], s.script[1:]
	}
	s.opens = append(s.opens, Open{After: after, At: time.Now(), Step: step, Live: s.live})
	n := int64(len(s.log))
	s.mu.Unlock()

	if after < 0 || after > n {
		return nil, errclass.Permanent(fmt.Errorf("streamtest: cursor %d is outside the log [0, %d]", after, n))
	}
	switch {
	case step.Kind == FailOpen:
		return nil, step.err()
	case step.Kind == DelayAfter && step.K == 0:
		return nil, errclass.RetryAfter(fmt.Errorf("streamtest: server busy: %w", step.err()), step.Delay)
	case step.Kind == ExpireAfter && step.K == 0:
		return nil, errclass.CursorExpired(fmt.Errorf("streamtest: cursor %d has expired: %w", after, step.err()))
	case step.Kind == BlockOpen:
		unblock := s.block()
		defer unblock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	return &conn[T]{src: s, next: after, step: step, closed: make(chan struct{})}, nil
}

type conn[T any] struct {
	src       *Source[T]
	next      int64 // sequence number of the last event delivered
	step      Step
	delivered int
	closeOnce sync.Once
	closed    chan struct{}
}

// Recv implements stream.Conn.
func (c *conn[T]) Recv(ctx context.Context) (Event[T], error) {
	var zero Event[T]
	select {
	case <-c.closed:
		return zero, errClosed
	default:
	}
	if c.step.Kind != Deliver && c.delivered >= c.step.K {
		switch c.step.Kind {
		case EndAfter:
			return zero, io.EOF
		case BreakAfter:
			return zero, c.step.err()
		case DelayAfter:
			return zero, errclass.RetryAfter(fmt.Errorf("streamtest: connection dropped, retry later: %w", c.step.err()), c.step.Delay)
		case ExpireAfter:
			return zero, errclass.CursorExpired(fmt.Errorf("streamtest: cursor %d has expired: %w", c.next, c.step.err()))
		case BlockAfter:
			unblock := c.src.block()
			defer unblock()
			<-c.closed // ignores ctx on purpose
			return zero, errClosed
		case EndStreamAfter:
			return zero, stream.ErrEndOfStream
		}
	}
	for {
		c.src.mu.Lock()
		if c.next < int64(len(c.src.log)) {
			v := c.src.log[c.next]
			c.src.mu.Unlock()
			c.next++
			c.delivered++
			return Event[T]{Seq: c.next, Value: v}, nil
		}
		end, grew := c.src.end, c.src.grew
		c.src.mu.Unlock()
		switch end {
		case EOF:
			return zero, io.EOF
		case Wait:
			if err := c.wait(ctx, grew); err != nil {
				return zero, err
			}
		default:
			return zero, stream.ErrEndOfStream
		}
	}
}

// wait blocks at the log's end until it grows, the conn closes or ctx ends.
func (c *conn[T]) wait(ctx context.Context, grew <-chan struct{}) error {
	unblock := c.src.block()
	defer unblock()
	select {
	case <-grew:
		return nil
	case <-c.closed:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements stream.Conn; it may be called more than once, and
// concurrently with Recv, which it unblocks.
func (c *conn[T]) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.src.mu.Lock()
		c.src.live--
		c.src.mu.Unlock()
	})
	return nil
}

// RandomScript returns n steps drawn from rng: kinds uniformly from kinds,
// K from [0, maxK], and for DelayAfter a Delay from [0, maxDelay]. The same
// rng state gives the same script. Without kinds it draws the faults a
// Resumer recovers from on its own: FailOpen, EndAfter, BreakAfter,
// DelayAfter and ExpireAfter (which needs [stream.WithResync]). Ask for the
// others by name; the steps after a Deliver are never played.
func RandomScript(rng *rand.Rand, n, maxK int, maxDelay time.Duration, kinds ...Kind) []Step {
	if len(kinds) == 0 {
		kinds = []Kind{FailOpen, EndAfter, BreakAfter, DelayAfter, ExpireAfter}
	}
	steps := make([]Step, max(n, 0))
	for i := range steps {
		st := Step{Kind: kinds[rng.IntN(len(kinds))]}
		if maxK > 0 {
			st.K = rng.IntN(maxK + 1)
		}
		if st.Kind == DelayAfter && maxDelay > 0 {
			st.Delay = time.Duration(rng.Int64N(int64(maxDelay) + 1))
		}
		steps[i] = st
	}
	return steps
}
