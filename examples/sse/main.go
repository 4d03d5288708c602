// Command sse wraps a Server-Sent Events stream with a stream.Resumer.
//
// By default it starts an HTTP server on the loopback interface that
// publishes a numbered event stream and misbehaves on purpose: it drops
// connections at random, sometimes in the middle of an event; it answers
// 503 Service Unavailable now and then (once with Retry-After: 1); it sets
// the reconnection time with retry:; it sends heartbeat comments that carry
// no event, one before anything else on every connection (so before the
// first id of the stream); it varies line endings (LF, CRLF, CR) and
// sometimes starts with a byte order mark. Once every event is published it
// answers 204 No Content, which ends the stream for good.
//
// The client is an [sse.Source] (package adapters/sse): each Open is an HTTP
// GET that sends the committed cursor as Last-Event-ID. The command prints
// every event and every reconnect with its reason and delay, then checks that
// every event arrived exactly once and in order, and exits with status 1 if
// not.
//
// With -state FILE the cursor is kept in FILE (a cursor.File with the
// cursor.String codec, which stores any event ID, the empty one included),
// so a run that was killed resumes after the last event it handled; with
// -url URL it consumes that event stream instead of its own server, and
// prints its events until the stream ends (204) or it is interrupted.
//
// Usage:
//
//	go run ./examples/sse [-events 100] [-seed 1] [-state FILE] [-url URL]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sse:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: serve, consume, check.
func run(ctx context.Context, out io.Writer, args []string) error {
	fs := flag.NewFlagSet("sse", flag.ContinueOnError)
	fs.SetOutput(out)
	total := fs.Int("events", 100, "how many events the server publishes")
	seed := fs.Uint64("seed", 1, "seed of the server's misbehaviour")
	state := fs.String("state", "", "keep the cursor (the last event ID) in this file, to resume after a restart")
	url := fs.String("url", "", "consume this event stream instead of the program's own server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *total < 1 {
		return fmt.Errorf("-events %d: want at least 1", *total)
	}

	store, err := newStore(*state)
	if err != nil {
		return err
	}
	last, err := store.Load(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "starting after id %q\n", last)

	target, client := *url, http.DefaultClient
	var pub *publisher
	if *url == "" {
		pub = &publisher{total: *total, pace: 2 * time.Millisecond, rng: rand.New(rand.NewPCG(*seed, 0))}
		srv := httptest.NewServer(pub) // on a loopback port
		defer srv.Close()              // also closes the client's idle connections
		target, client = srv.URL+"/events", srv.Client()
	}
	src, err := sse.NewSource(target, sse.WithClient(client)) // a bad -url fails here, naming it
	if err != nil {
		return err
	}
	r, err := stream.New(src, sse.EventID, store,
		stream.WithIdleTimeout(time.Second), // heartbeats (comment lines) count as activity
		stream.WithBackoff(backoff.Exponential(
			backoff.WithInitialInterval(10*time.Millisecond),
			backoff.WithMultiplier(2),
			backoff.WithMaxInterval(200*time.Millisecond),
		)),
		stream.WithHooks(stream.Hooks[string]{
			OnRetry: func(e stream.RetryEvent[string]) {
				fmt.Fprintf(out, "reconnect after id %q in %v (set by %s; failure #%d): %v\n",
					e.After, e.Delay.Round(time.Millisecond), e.Reason, e.Attempt, e.Err)
			},
		}),
	)
	if err != nil {
		return err
	}
	if pub == nil {
		err := r.Run(ctx, func(_ context.Context, ev sse.Event) error {
			fmt.Fprintf(out, "event %s (%s): %q\n", ev.ID, ev.Type, ev.Data)
			return nil
		})
		if err != nil {
			return fmt.Errorf("the stream failed: %w", err)
		}
		fmt.Fprintln(out, "the stream ended")
		return nil
	}

	check := checker{total: *total}
	if last != "" {
		if check.next, err = strconv.Atoi(last); err != nil {
			return fmt.Errorf("-state %s: the cursor %q is not an event of this program's server", *state, last)
		}
	}
	first := check.next + 1
	if err := r.Run(ctx, func(_ context.Context, ev sse.Event) error {
		fmt.Fprintf(out, "event %s (%s): %q\n", ev.ID, ev.Type, ev.Data)
		check.add(ev)
		return nil
	}); err != nil {
		return fmt.Errorf("the stream failed: %w", err)
	}
	if err := check.verify(); err != nil {
		return err
	}
	st := r.Stats()
	if first == 1 {
		fmt.Fprintf(out, "ok: all %d events arrived exactly once and in order, over %d connections (the server answered 503 %d times)\n",
			*total, st.Opens, pub.refused())
	} else {
		fmt.Fprintf(out, "ok: events %d to %d arrived exactly once and in order, over %d connections (the server answered 503 %d times)\n",
			first, *total, st.Opens, pub.refused())
	}
	return nil
}

// newStore returns the cursor store: in memory, or, with -state, a file
// that holds the last event ID as a line of text. cursor.String stores any
// ID, the empty one included: the cursor is "" until the first id: arrives
// (a heartbeat before it commits ""), and an empty id: resets it to "".
func newStore(state string) (cursor.Store[string], error) {
	if state == "" {
		return cursor.NewMemory(""), nil
	}
	return cursor.NewFile(state, "", cursor.String())
}

// payload is the data of event n, two lines long.
func payload(n int) string { return fmt.Sprintf("tick %d\nsquare %d", n, n*n) }

// checker records what the handler saw.
type checker struct {
	total int
	next  int // the number of the last event in order
	bad   []string
}

func (c *checker) add(ev sse.Event) {
	n, err := strconv.Atoi(ev.ID)
	switch {
	case err != nil:
		c.bad = append(c.bad, fmt.Sprintf("event id %q is not a number", ev.ID))
	case n != c.next+1:
		c.bad = append(c.bad, fmt.Sprintf("event %d after event %d", n, c.next))
	case ev.Data != payload(n) || ev.Type != "tick":
		c.bad = append(c.bad, fmt.Sprintf("event %d is %s %q, want tick %q", n, ev.Type, ev.Data, payload(n)))
	default:
		c.next = n
	}
}

func (c *checker) verify() error {
	if len(c.bad) == 0 && c.next == c.total {
		return nil
	}
	if c.next != c.total {
		c.bad = append(c.bad, fmt.Sprintf("received events 1 to %d in order, want 1 to %d", c.next, c.total))
	}
	return fmt.Errorf("end check failed:\n\t%s", strings.Join(c.bad, "\n\t"))
}

// publisher serves events 1..total at /events, resuming after Last-Event-ID,
// and misbehaves at random (from a seeded generator).
type publisher struct {
	total int
	pace  time.Duration
	sent  func(n int) // if set, called once event n was written and flushed

	mu       sync.Mutex
	rng      *rand.Rand
	requests int
	busy     int
}

// plan is what one request gets.
type plan struct {
	busy       bool   // answer 503
	retryAfter bool   // with Retry-After: 1
	count      int    // events to send before ending the connection
	cut        bool   // end by cutting the next event in two, not cleanly
	eol        string // line ending
	bom        bool   // start with a byte order mark
}

func (p *publisher) plan() plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	pl := plan{
		count: 1 + p.rng.IntN(20),
		cut:   p.rng.IntN(2) == 0,
		eol:   []string{"\n", "\r\n", "\r"}[p.rng.IntN(3)],
		bom:   p.rng.IntN(4) == 0,
	}
	// At most three 503s; only the first says Retry-After (in whole
	// seconds, as HTTP has it), to keep the demo short.
	if p.requests > 1 && p.busy < 3 && p.rng.IntN(5) == 0 {
		p.busy++
		pl.busy, pl.retryAfter = true, p.busy == 1
	}
	return pl
}

func (p *publisher) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

// ServeHTTP serves one connection's worth of the stream.
func (p *publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	last := 0
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n > p.total {
			http.Error(w, "bad Last-Event-ID", http.StatusBadRequest)
			return
		}
		last = n
	}
	if last == p.total {
		w.WriteHeader(http.StatusNoContent) // the standard's "stop reconnecting"
		return
	}
	pl := p.plan()
	if pl.busy {
		if pl.retryAfter {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	var b strings.Builder
	if pl.bom {
		b.WriteString("\uFEFF")
	}
	// A heartbeat before anything else: on a first connection, it comes
	// before the stream's first id.
	b.WriteString(": hello" + pl.eol)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	b.Reset()
	b.WriteString("retry: 15" + pl.eol + pl.eol) // a retry-only block: no event
	tick := time.NewTicker(p.pace)
	defer tick.Stop()
	for i := 1; i <= pl.count && last < p.total; i++ {
		if i%4 == 0 {
			b.WriteString(": heartbeat" + pl.eol)
		}
		last++
		b.WriteString(event(last, pl.eol))
		if _, err := io.WriteString(w, b.String()); err != nil {
			return
		}
		b.Reset()
		if err := rc.Flush(); err != nil {
			return
		}
		if p.sent != nil {
			p.sent(last)
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
	if !pl.cut || last == p.total {
		return // a clean end: the server's idea of a connection's lifetime
	}
	ev := event(last+1, pl.eol)
	_, _ = io.WriteString(w, ev[:1+p.rngIntN(len(ev)-2)])
	_ = rc.Flush()
	panic(http.ErrAbortHandler) // drop the connection mid-event
}

func (p *publisher) rngIntN(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

// event formats event n with two data lines.
func event(n int, eol string) string {
	data := strings.ReplaceAll(payload(n), "\n", eol+"data: ")
	return "id: " + strconv.Itoa(n) + eol + "event: tick" + eol + "data: " + data + eol + eol
}
