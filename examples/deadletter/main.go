// Command deadletter is a consumer whose stream carries poison events:
// orders for customers it does not know yet. Its handler retries a busy
// ledger in place, parks each poison order to a dead-letter file and goes
// on; once the cause is fixed (the customers were imported), it replays the
// parked orders from the file through the same handler.
//
//	go run ./examples/deadletter              # in a temporary directory
//	go run ./examples/deadletter -dir /tmp/dl # keep the files to look at
//
// The source is an in-process polled API (stream.Pages) over a fixed list
// of orders, so that every run sees the same stream.
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

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "deadletter:", err)
		os.Exit(1)
	}
}

// Order is the event type; Seq is its cursor.
type Order struct {
	Seq      int64  `json:"seq"`
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

func orderSeq(o Order) (int64, error) { return o.Seq, nil }

// orders is the stream: the customers "zed" and "yan" are not known until
// the import that fixes the cause.
var orders = []Order{
	{Seq: 1, Customer: "alice", Cents: 1200},
	{Seq: 2, Customer: "bob", Cents: 450},
	{Seq: 3, Customer: "zed", Cents: 999},
	{Seq: 4, Customer: "carol", Cents: 7000},
	{Seq: 5, Customer: "alice", Cents: 80},
	{Seq: 6, Customer: "dave", Cents: 1500},
	{Seq: 7, Customer: "yan", Cents: 300},
	{Seq: 8, Customer: "bob", Cents: 610},
	{Seq: 9, Customer: "erin", Cents: 2500},
	{Seq: 10, Customer: "zed", Cents: 45},
	{Seq: 11, Customer: "carol", Cents: 900},
	{Seq: 12, Customer: "frank", Cents: 130},
}

// errUnknownCustomer is the cause of the poison orders.
var errUnknownCustomer = errors.New("unknown customer")

// shop is the consumer: its customers, and a ledger that is busy once
// for order 6 (a transient failure, retried in place).
type shop struct {
	out       io.Writer
	customers map[string]bool
	busyOnce  map[int64]bool
	booked    map[int64]bool // orders booked, by cursor: a replay books each once
}

// handle books an order. An unknown customer can never succeed until
// someone imports it: a permanent error, parked at once.
func (s *shop) handle(_ context.Context, o Order) error {
	if !s.customers[o.Customer] {
		return errclass.Permanent(fmt.Errorf("order %d: %w %q", o.Seq, errUnknownCustomer, o.Customer))
	}
	if s.busyOnce[o.Seq] {
		delete(s.busyOnce, o.Seq)
		return fmt.Errorf("order %d: ledger busy", o.Seq)
	}
	if s.booked[o.Seq] {
		fmt.Fprintf(s.out, "order %d was booked already\n", o.Seq)
		return nil
	}
	s.booked[o.Seq] = true
	fmt.Fprintf(s.out, "booked order %d: %s, %d.%02d\n", o.Seq, o.Customer, o.Cents/100, o.Cents%100)
	return nil
}

func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("deadletter", flag.ContinueOnError)
	fs.SetOutput(out)
	dir := fs.String("dir", "", "directory of the dead-letter file; when empty, a temporary one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "resumable-deadletter-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	path := filepath.Join(*dir, "parked.jsonl")
	s := &shop{
		out:       out,
		customers: map[string]bool{"alice": true, "bob": true, "carol": true, "dave": true, "erin": true, "frank": true},
		busyOnce:  map[int64]bool{6: true},
		booked:    make(map[int64]bool),
	}

	fmt.Fprintf(out, "-- the stream: %d orders\n", len(orders))
	parked, err := consume(ctx, out, s, path)
	if err != nil {
		return err
	}

	fmt.Fprintln(out, "-- the cause is fixed: customers zed and yan imported; replaying the parked orders")
	s.customers["zed"], s.customers["yan"] = true, true
	replayed, err := replay(ctx, out, s, path)
	if err != nil {
		return err
	}
	if uint64(replayed) != parked || len(s.booked) != len(orders) {
		return fmt.Errorf("%d orders booked of %d, %d replayed of %d parked", len(s.booked), len(orders), replayed, parked)
	}
	fmt.Fprintf(out, "done: all %d orders booked, each once\n", len(orders))
	return nil
}

// consume runs the stream once to its end, parking what cannot be booked,
// and returns how many orders it parked.
func consume(ctx context.Context, out io.Writer, s *shop, path string) (parked uint64, err error) {
	dl, err := deadletter.Open(path, orderSeq)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, dl.Close()) }()
	fetch := func(_ context.Context, after int64) ([]Order, error) {
		if after >= int64(len(orders)) {
			return nil, stream.ErrEndOfStream
		}
		return orders[after:min(after+5, int64(len(orders)))], nil // pages of 5
	}
	r, err := stream.New(stream.Pages(fetch), orderSeq, cursor.NewMemory[int64](0),
		stream.WithHandlerRetry(3, backoff.Constant(0)), // a real stream waits: backoff.Default()
		stream.WithDeadLetter(dl.Park),
		stream.WithHooks(stream.Hooks[int64]{
			OnHandlerError: func(e stream.HandlerEvent[int64]) {
				then := "failed"
				switch {
				case e.Retry:
					then = "retried"
				case e.Parked:
					then = "parked"
				}
				fmt.Fprintf(out, "try %d of order %d: %v -> %s\n", e.Try, e.Cursor, e.Err, then)
			},
		}))
	if err != nil {
		return 0, err
	}
	if err := r.Run(ctx, s.handle); err != nil {
		return 0, err
	}
	st := r.Stats()
	fmt.Fprintf(out, "stream ended at cursor %d: %d orders booked, %d parked, %d retried\n",
		st.Cursor, len(s.booked), st.Parked, st.HandlerRetries)
	return st.Parked, nil
}

// replay hands each parked order to the handler, once per cursor (a crash
// between a park and its commit parks an order twice), then moves the file
// aside so that the next replay starts empty.
func replay(ctx context.Context, out io.Writer, s *shop, path string) (int, error) {
	seen := make(map[int64]bool)
	for rec, err := range deadletter.Read[Order, int64](path) {
		if err != nil {
			return 0, err
		}
		if seen[rec.Cursor] {
			continue
		}
		seen[rec.Cursor] = true
		fmt.Fprintf(out, "replaying order %d, parked after %d try: %s\n", rec.Cursor, rec.Tries, rec.Err)
		if err := s.handle(ctx, rec.Event); err != nil {
			return 0, fmt.Errorf("replaying order %d: %w", rec.Cursor, err)
		}
	}
	if err := os.Rename(path, path+".replayed"); err != nil {
		return 0, err
	}
	fmt.Fprintf(out, "replayed %d orders; the file is now %s.replayed\n", len(seen), filepath.Base(path))
	return len(seen), nil
}
