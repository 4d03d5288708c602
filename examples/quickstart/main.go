// Command quickstart runs a Resumer over an in-process source that fails at
// random — dropped connections, a server asking to retry later, transient
// open errors — and shows that every event arrives exactly once, in order.
//
//	go run ./examples/quickstart [-events 40] [-seed 1]
//
// It needs no network and finishes in a couple of seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	if err := run(context.Background(), os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// Order is the event type of the demo stream; ID is its cursor.
type Order struct {
	ID   int64
	Item string
}

// flakyServer is an in-process stand-in for a server with a numbered event
// log: Open returns the events after a cursor, and things go wrong at random.
type flakyServer struct {
	mu    sync.Mutex
	rng   *rand.Rand
	total int64
}

func (s *flakyServer) chance(p float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < p
}

// Open implements stream.Source[Order, int64].
func (s *flakyServer) Open(ctx context.Context, after int64) (stream.Conn[Order], error) {
	switch {
	case after >= s.total:
		return nil, stream.ErrEndOfStream // nothing more will come
	case s.chance(0.15):
		return nil, errors.New("dial tcp: connection refused") // transient: retried with backoff
	case s.chance(0.10):
		// The server is overloaded and says when to come back.
		return nil, errclass.RetryAfter(errors.New("503 service unavailable"), 150*time.Millisecond)
	}
	return &flakyConn{srv: s, next: after + 1}, nil
}

// flakyConn is one connection: it delivers events from next on and may drop.
type flakyConn struct {
	srv  *flakyServer
	next int64
}

// Recv implements stream.Conn.
func (c *flakyConn) Recv(ctx context.Context) (Order, error) {
	if err := ctx.Err(); err != nil {
		return Order{}, err
	}
	switch {
	case c.next > c.srv.total:
		return Order{}, stream.ErrEndOfStream
	case c.srv.chance(0.08):
		return Order{}, errors.New("read tcp: connection reset by peer") // a failure: backoff step
	case c.srv.chance(0.05):
		return Order{}, io.EOF // the server ended the connection normally: reopen at once
	}
	o := Order{ID: c.next, Item: fmt.Sprintf("item-%03d", c.next)}
	c.next++
	return o, nil
}

// Close implements stream.Conn.
func (c *flakyConn) Close() error { return nil }

func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(out)
	events := fs.Int64("events", 40, "number of events the server publishes")
	seed := fs.Uint64("seed", 1, "seed of the failures")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *events < 1 {
		return fmt.Errorf("-events must be at least 1, got %d", *events)
	}
	srv := &flakyServer{rng: rand.New(rand.NewPCG(*seed, *seed)), total: *events}

	r, err := stream.New[Order, int64](
		srv,
		func(o Order) (int64, error) { return o.ID, nil }, // the cursor of an event
		cursor.NewMemory[int64](0),                        // start from the beginning
		stream.WithBackoff(backoff.Exponential(
			backoff.WithInitialInterval(20*time.Millisecond),
			backoff.WithMaxInterval(200*time.Millisecond),
		)),
		stream.WithHooks(stream.Hooks[int64]{
			OnRetry: func(e stream.RetryEvent[int64]) {
				fmt.Fprintf(out, "  reconnect after cursor %d in %v (%v): %v\n",
					e.After, e.Delay.Round(time.Millisecond), e.Reason, e.Err)
			},
		}),
	)
	if err != nil {
		return err
	}

	var got []int64
	err = r.Run(ctx, func(ctx context.Context, o Order) error {
		fmt.Fprintf(out, "event %d: %s\n", o.ID, o.Item)
		got = append(got, o.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}

	// The end check: every event exactly once, in order.
	for i, id := range got {
		if id != int64(i+1) {
			return fmt.Errorf("event %d arrived at position %d: lost, duplicated or out of order", id, i+1)
		}
	}
	if int64(len(got)) != *events {
		return fmt.Errorf("got %d events, want %d", len(got), *events)
	}
	st := r.Stats()
	fmt.Fprintf(out, "done: %d events exactly once and in order; %d opens, %d clean ends, %d retried failures; cursor %d\n",
		st.Events, st.Opens, st.CleanEnds, st.Retried, st.Cursor)
	return nil
}
