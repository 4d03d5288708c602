// Command poll consumes a paginated HTTP changes feed — GET /changes?after=N
// answering up to a page of changes, an empty page when there is nothing new
// — with stream.Pages, a steady poll interval, a cursor kept in a file and a
// classifier built from errclass pieces.
//
//	go run ./examples/poll [-state FILE]
//
// A loopback server (net/http/httptest) plays the feed: a writer appends a
// change every 20ms; the server answers 500 now and then, 503 with
// Retry-After once, and 410 Gone for a cursor older than its compaction
// point, after which the consumer starts again from GET /snapshot. The
// program runs the consumer twice, as two processes would: the first run
// stops after change 20 (stream.ErrStop), the feed moves on and compacts its
// history at change 40 while no one reads it, and the second run continues
// from the cursor file until change 60. It checks that the consumer's state equals the server's, and
// exits non-zero otherwise. With -state, the cursor file is kept at that
// path, for you to read. It needs no network and finishes in a few seconds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "poll:", err)
		os.Exit(1)
	}
}

const (
	pageSize     = 5
	pollInterval = 100 * time.Millisecond
	firstStop    = 20 // the first run stops after this change
	compactAt    = 40 // the feed compacts its history here, between the runs
	total        = 60 // changes the writer appends
)

func run(ctx context.Context, out io.Writer, args []string) error {
	flags := flag.NewFlagSet("poll", flag.ContinueOnError)
	flags.SetOutput(out)
	state := flags.String("state", "", "cursor file (default: a temporary one)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *state == "" {
		dir, err := os.MkdirTemp("", "poll-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*state = filepath.Join(dir, "changes.cursor")
	}

	f := newFeed()
	srv := httptest.NewServer(f)
	defer srv.Close()
	// The writer appends changes 1..compactAt, waits for the compaction,
	// then appends the rest.
	writerCtx, stopWriter := context.WithCancel(ctx)
	reached, resume, written := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer func() {
		stopWriter()
		<-written
	}()
	go func() {
		defer close(written)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for seq := 1; seq <= total; seq++ {
			if seq == compactAt+1 {
				close(reached)
				select {
				case <-resume:
				case <-writerCtx.Done():
					return
				}
			}
			select {
			case <-writerCtx.Done():
				return
			case <-t.C:
				f.write()
			}
		}
	}()

	api := &client{base: srv.URL, http: srv.Client(), out: out}
	orders := map[string]string{}

	fmt.Fprintln(out, "run 1: from the cursor file", *state)
	if err := consume(ctx, api, *state, orders, firstStop); err != nil {
		return fmt.Errorf("run 1: %w", err)
	}
	// While no one reads the feed, it moves on, compacts its history and
	// gets busy.
	select {
	case <-reached:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.compact()
	f.busy()
	close(resume)
	fmt.Fprintf(out, "run 2: the feed moved on to change %d and compacted its history meanwhile\n", compactAt)
	if err := consume(ctx, api, *state, orders, total); err != nil {
		return fmt.Errorf("run 2: %w", err)
	}

	want, seq := f.current()
	if !maps.Equal(want, orders) {
		return fmt.Errorf("the consumer's state %v differs from the server's %v", orders, want)
	}
	fmt.Fprintf(out, "done: the consumer's %d orders equal the server's as of change %d\n", len(orders), seq)
	return nil
}

// consume runs one consumer, as one process would: a Resumer over the feed
// that continues from the cursor file and applies each change to orders,
// until it has applied change stopAt.
func consume(ctx context.Context, api *client, state string, orders map[string]string, stopAt int64) error {
	store, err := cursor.NewFile(state, int64(0), cursor.Int64())
	if err != nil {
		return err
	}
	r, err := stream.New(stream.Pages(api.changes), changeSeq, store,
		stream.WithPollInterval(pollInterval),
		stream.WithBackoff(backoff.Exponential(backoff.WithInitialInterval(20*time.Millisecond))),
		stream.WithResync(api.resync),
		stream.WithHooks(stream.Hooks[int64]{
			OnRetry: func(e stream.RetryEvent[int64]) {
				if e.Attempt > 0 { // a failure; clean ends (pages, empty polls) are not
					fmt.Fprintf(api.out, "  %v: reopen after change %d in %v (%s)\n", e.Err, e.After, e.Delay.Round(time.Millisecond), e.Reason)
				}
			},
		}),
	)
	if err != nil {
		return err
	}
	return r.Run(ctx, func(_ context.Context, c Change) error {
		if c.Seq == 0 { // the start of a snapshot
			clear(orders)
			return nil
		}
		orders[c.Order] = c.Status
		if c.Seq >= stopAt {
			fmt.Fprintf(api.out, "  applied change %d; stopping\n", c.Seq)
			return stream.ErrStop // committed and saved; Run returns nil
		}
		return nil
	})
}

// changeSeq is the extractor: a change's cursor is its sequence number. The
// snapshot's changes carry no sequence number; a resync's replay is not
// extracted.
func changeSeq(c Change) (int64, error) { return c.Seq, nil }

// client is the consumer's side of the feed.
type client struct {
	base string
	http *http.Client
	out  io.Writer
}

// changes fetches one page: the fetch function of stream.Pages.
func (c *client) changes(ctx context.Context, after int64) ([]Change, error) {
	var p page
	err := c.get(ctx, "/changes?after="+strconv.FormatInt(after, 10)+"&limit="+strconv.Itoa(pageSize), &p)
	return p.Changes, err
}

// resync starts again from the snapshot after a 410: a marker change (Seq 0)
// that tells the handler to drop its state, then every order, then the feed
// continues after the snapshot's sequence number.
func (c *client) resync(ctx context.Context, cause error, emit func(Change) error) (int64, error) {
	var s snapshot
	if err := c.get(ctx, "/snapshot", &s); err != nil {
		return 0, err
	}
	fmt.Fprintf(c.out, "  %v: starting again from the snapshot as of change %d (%d orders)\n", cause, s.Seq, len(s.Orders))
	if err := emit(Change{}); err != nil {
		return 0, err
	}
	for order, status := range s.Orders {
		if err := emit(Change{Order: order, Status: status}); err != nil {
			return 0, err
		}
	}
	return s.Seq, nil
}

func (c *client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return errclass.Permanent(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// 410 expires the cursor (the resync takes over), 429, 503 and the other
	// 5xx are retried no sooner than Retry-After, other 4xx fail: the
	// Resumer's default classifier reads FromHTTP's markers.
	if err := errclass.FromHTTP(resp); err != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // so the connection is reused
		return err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}
