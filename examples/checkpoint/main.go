// Command checkpoint is a consumer that survives restarts: its cursor lives in
// a file, so stopping it (Ctrl-C) and starting it again continues where it
// stopped, with no gap.
//
//	go run ./examples/checkpoint                        # demo: two lives back to back, checked
//	go run ./examples/checkpoint -state /tmp/orders.cur # real: Ctrl-C, run again, it continues
//
// The source is an in-process numbered log (event n is always "order-n"), so
// that a restarted process sees the same stream.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint:", err)
		os.Exit(1)
	}
}

// Order is one event of the log; Seq is its cursor.
type Order struct {
	Seq  int64
	Name string
}

// orderLog serves the numbered log 1..total, one event per tick.
type orderLog struct {
	total int64
	tick  time.Duration
}

// Open implements stream.Source[Order, int64].
func (l orderLog) Open(ctx context.Context, after int64) (stream.Conn[Order], error) {
	if after >= l.total {
		return nil, stream.ErrEndOfStream
	}
	return &orderConn{log: l, next: after + 1, done: make(chan struct{})}, nil
}

type orderConn struct {
	log  orderLog
	next int64
	done chan struct{}
}

// Recv implements stream.Conn: one event per tick.
func (c *orderConn) Recv(ctx context.Context) (Order, error) {
	if c.next > c.log.total {
		return Order{}, stream.ErrEndOfStream
	}
	if c.log.tick > 0 {
		t := time.NewTimer(c.log.tick)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return Order{}, ctx.Err()
		case <-c.done:
			return Order{}, errors.New("connection closed")
		case <-t.C:
		}
	}
	o := Order{Seq: c.next, Name: fmt.Sprintf("order-%d", c.next)}
	c.next++
	return o, nil
}

// Close implements stream.Conn. The Resumer calls it from its own goroutine
// and then again when the connection ends: it must tolerate both.
func (c *orderConn) Close() error {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	return nil
}

// life runs one process lifetime: open the cursor file, consume until ctx
// ends or the log does, and report the first and last event handled.
func life(ctx context.Context, out io.Writer, path string, log orderLog, stopAfter int64) (first, last int64, err error) {
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		return 0, 0, err
	}
	r, err := stream.New[Order, int64](log, func(o Order) (int64, error) { return o.Seq, nil }, store,
		// Saving after every event caps throughput at the disk's fsync rate;
		// every 10 events or every second, whichever comes first, bounds
		// what a crash (kill -9) can redeliver. A clean stop saves at once.
		stream.WithCheckpointEvery(10),
		stream.WithCheckpointInterval(time.Second),
	)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = r.Run(ctx, func(ctx context.Context, o Order) error {
		if first == 0 {
			first = o.Seq
		}
		last = o.Seq
		fmt.Fprintf(out, "handled %s\n", o.Name)
		if o.Seq == stopAfter {
			cancel() // as if Ctrl-C came now
		}
		return nil
	})
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	saved, lerr := store.Load(context.Background())
	fmt.Fprintf(out, "stopped: cursor %d saved in %s\n", saved, path)
	return first, last, errors.Join(err, lerr)
}

func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	fs.SetOutput(out)
	state := fs.String("state", "", "cursor file; when empty, run the two-lives demo in a temporary directory")
	total := fs.Int64("events", 1000, "events in the log (with -state)")
	tick := fs.Duration("tick", 200*time.Millisecond, "time between events (with -state)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *state != "" {
		fmt.Fprintf(out, "consuming; stop with Ctrl-C and run again to continue (cursor file %s)\n", *state)
		_, _, err := life(ctx, out, *state, orderLog{total: *total, tick: *tick}, -1)
		return err
	}

	dir, err := os.MkdirTemp("", "resumable-checkpoint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orders.cursor")
	log := orderLog{total: 40, tick: 10 * time.Millisecond}

	fmt.Fprintln(out, "-- first life: stops after order 17")
	_, last1, err := life(ctx, out, path, log, 17)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "-- second life: a fresh store on the same file")
	first2, last2, err := life(ctx, out, path, log, -1)
	if err != nil {
		return err
	}
	if first2 != last1+1 || last2 != log.total {
		return fmt.Errorf("second life handled %d..%d after the first stopped at %d: want %d..%d", first2, last2, last1, last1+1, log.total)
	}
	fmt.Fprintf(out, "done: the second life continued at order %d with no gap and no repeat\n", first2)
	return nil
}
