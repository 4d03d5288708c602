// Command classifier builds an error classifier of its own for an HTTP API
// and resumes the API's stream with it.
//
// It starts, on the loopback interface, an API that serves a changelog of
// numbered items a page at a time (GET /v1/events?after=N, one JSON object a
// line) and fails in the ways real APIs do: 500 Internal Server Error at
// times, 429 Too Many Requests with Retry-After: 1 once, 401 Unauthorized
// when the bearer token has served its quota of items, 410 Gone once it has
// compacted its log past the client's cursor (GET /v1/snapshot then gives
// the state as of the compaction point), and pages cut in the middle of a
// line. Once every item is served it answers 204 No Content.
//
// The client (client.go) judges each failure with a classifier built with
// errclass.Chain from stock pieces (errclass.Markers, errclass.As,
// errclass.Is) and one rule of its own, which refreshes the token on a 401.
// Every decision is printed from the Resumer's hooks. At the end the command
// checks that the running total matches the server's, that the items after
// the snapshot arrived in order without gap or repeat, and that every rule
// fired; it exits with status 1 if not.
//
// Usage:
//
//	go run ./examples/classifier [-items 120] [-seed 1]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
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
		fmt.Fprintln(os.Stderr, "classifier:", err)
		stop()
		os.Exit(1)
	}
}

// run is the whole program: serve, consume, check.
func run(ctx context.Context, out io.Writer, args []string) (err error) {
	fs := flag.NewFlagSet("classifier", flag.ContinueOnError)
	fs.SetOutput(out)
	items := fs.Int("items", 120, "how many items the API serves (at least 30)")
	seed := fs.Uint64("seed", 1, "seed of the item values and of the API's extra 500s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *items < 30 {
		return fmt.Errorf("-items %d: want at least 30", *items)
	}

	api := newServer(*items, *seed)
	srv := httptest.NewServer(api.routes()) // on a loopback port
	defer srv.Close()                       // also closes the client's idle connections
	base, httpc := srv.URL, srv.Client()
	tokens := &Tokens{url: base + "/v1/token", secret: "demo-secret", client: httpc}
	client := &API{base: base, client: httpc, tokens: tokens}

	seen := map[string]int{} // what the classifier decided, by status
	r, err := stream.New(client, func(it Item) (int64, error) { return it.Seq, nil }, cursor.NewMemory[int64](0),
		stream.WithClassifier(NewClassifier(tokens)),
		stream.WithBackoff(backoff.Exponential(
			backoff.WithInitialInterval(10*time.Millisecond),
			backoff.WithMultiplier(2),
			backoff.WithMaxInterval(200*time.Millisecond),
		)),
		stream.WithResync(func(ctx context.Context, cause error, emit func(Item) error) (int64, error) {
			snap, err := client.Snapshot(ctx)
			if err != nil {
				return 0, err
			}
			return snap.Seq, emit(snap)
		}),
		stream.WithHooks(stream.Hooks[int64]{
			OnDisconnect: func(e stream.DisconnectEvent[int64]) {
				if e.Clean {
					fmt.Fprintf(out, "page ended after %d items\n", e.Events)
					return
				}
				seen[label(e.Err, e.Decision)]++
				fmt.Fprintf(out, "decision: %-17s <- %v\n", e.Decision, e.Err)
			},
			OnRetry: func(e stream.RetryEvent[int64]) {
				fmt.Fprintf(out, "  reopen after item %d in %v (%s)\n", e.After, e.Delay.Round(time.Millisecond), e.Reason)
			},
			OnResync: func(e stream.ResyncEvent[int64]) {
				fmt.Fprintf(out, "  resynced: cursor %d -> %d\n", e.From, e.To)
			},
		}),
	)
	if err != nil {
		return err
	}

	var st state
	if err := r.Run(ctx, func(_ context.Context, it Item) error {
		st.apply(it)
		if it.Snapshot {
			fmt.Fprintf(out, "snapshot at item %d: total %d\n", it.Seq, it.Total)
		} else {
			fmt.Fprintf(out, "item %d: %+d -> total %d\n", it.Seq, it.Delta, st.total)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("the stream failed: %w", err)
	}
	if err := st.verify(api.final(), seen, tokens.Refreshes()); err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: total %d after item %d matches the server; decisions: %s; %d token refreshes\n",
		st.total, st.last, summary(seen), tokens.Refreshes())
	return nil
}

// label names a decision for the end check: which rule made it.
func label(err error, d errclass.Decision) string {
	var se *StatusError
	if errors.As(err, &se) {
		return strconv.Itoa(se.Code) + " " + d.Action.String()
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "cut " + d.Action.String()
	}
	return "other " + d.Action.String()
}

func summary(seen map[string]int) string {
	var s []string
	for k, n := range seen {
		s = append(s, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// state is what the handler builds from the items.
type state struct {
	last, total int64
	resyncs     int
	bad         []string
}

func (s *state) apply(it Item) {
	switch {
	case it.Snapshot && it.Seq < s.last:
		s.bad = append(s.bad, fmt.Sprintf("snapshot at %d is behind item %d", it.Seq, s.last))
	case it.Snapshot:
		s.last, s.total = it.Seq, it.Total
		s.resyncs++
	case it.Seq != s.last+1:
		s.bad = append(s.bad, fmt.Sprintf("item %d after item %d", it.Seq, s.last))
	default:
		s.last, s.total = it.Seq, s.total+it.Delta
	}
}

// verify is the end check: the total and cursor match the server's final
// state, nothing arrived out of order, and every rule of the classifier
// fired as the API's script makes it.
func (s *state) verify(final Item, seen map[string]int, refreshes int64) error {
	bad := s.bad
	if s.last != final.Seq || s.total != final.Total {
		bad = append(bad, fmt.Sprintf("ended at item %d with total %d, want item %d with total %d", s.last, s.total, final.Seq, final.Total))
	}
	if s.resyncs != 1 {
		bad = append(bad, fmt.Sprintf("%d resyncs, want 1", s.resyncs))
	}
	if refreshes < 1 {
		bad = append(bad, "the token was never refreshed")
	}
	for _, want := range []string{"401 retry", "410 expired", "429 retry", "500 retry", "cut retry"} {
		if seen[want] == 0 {
			bad = append(bad, fmt.Sprintf("no %q decision", want))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("end check failed:\n\t%s", strings.Join(bad, "\n\t"))
	}
	return nil
}

// server is the API. Its failures follow a script, plus seeded extra 500s:
//
//   - requests 2 and 3 get 500 (twice in a row: the backoff grows);
//   - request 5, or the first one after it that would succeed, gets 429
//     with Retry-After: 1;
//   - every third page is cut inside a line;
//   - a token is good for tokenLife items, then gets 401;
//   - the first request after a third of the items compacts the log up to
//     two thirds: older cursors get 410 Gone from then on.
type server struct {
	deltas    []int64 // item n's delta is deltas[n-1]
	page      int
	tokenLife int
	pace      time.Duration

	mu        sync.Mutex
	rng       *rand.Rand
	requests  int  // /v1/events requests
	pages     int  // pages served (200)
	throttled bool // the 429 was sent
	gen       int
	token     string
	served    int // items served with token
	horizon   int64
}

func newServer(items int, seed uint64) *server {
	rng := rand.New(rand.NewPCG(seed, 0))
	s := &server{page: 15, tokenLife: 35, pace: 2 * time.Millisecond, rng: rng}
	for range items {
		s.deltas = append(s.deltas, int64(rng.IntN(19)-9))
	}
	return s
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/token", s.newToken)
	mux.HandleFunc("GET /v1/events", s.events)
	mux.HandleFunc("GET /v1/snapshot", s.snapshot)
	return mux
}

// final is the state after the last item.
func (s *server) final() Item { return s.state(int64(len(s.deltas))) }

// state is the state as of item seq.
func (s *server) state(seq int64) Item {
	it := Item{Seq: seq, Snapshot: true}
	for _, d := range s.deltas[:seq] {
		it.Total += d
	}
	return it
}

func (s *server) newToken(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Client-Secret") != "demo-secret" {
		http.Error(w, "bad secret", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	s.gen++
	s.token, s.served = "token-"+strconv.Itoa(s.gen), 0
	tok := s.token
	s.mu.Unlock()
	writeJSON(w, map[string]string{"token": tok})
}

// authorized reports whether r carries the current, unexhausted token.
// s.mu is held.
func (s *server) authorized(r *http.Request) bool {
	return s.token != "" && r.Header.Get("Authorization") == "Bearer "+s.token && s.served < s.tokenLife
}

func (s *server) snapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ok, horizon := s.authorized(r), s.horizon
	s.mu.Unlock()
	if !ok {
		http.Error(w, "token expired", http.StatusUnauthorized)
		return
	}
	writeJSON(w, s.state(horizon))
}

// answer is what one /v1/events request gets.
type answer struct {
	code       int
	retryAfter string
	count      int  // items to send
	cut        bool // then cut the next line in two
}

func (s *server) admit(r *http.Request, after int64) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	total := int64(len(s.deltas))
	switch {
	case !s.authorized(r):
		return answer{code: http.StatusUnauthorized}
	case after == total:
		return answer{code: http.StatusNoContent}
	case s.horizon == 0 && after >= total/3:
		s.horizon = 2 * total / 3 // compact the log
	}
	switch {
	case after < s.horizon:
		return answer{code: http.StatusGone}
	case s.requests == 2 || s.requests == 3:
		return answer{code: http.StatusInternalServerError}
	case s.requests >= 5 && !s.throttled:
		s.throttled = true
		return answer{code: http.StatusTooManyRequests, retryAfter: "1"}
	case s.rng.IntN(10) == 0:
		return answer{code: http.StatusInternalServerError}
	}
	s.pages++
	a := answer{code: http.StatusOK, count: min(s.page, int(total-after), s.tokenLife-s.served)}
	s.served += a.count
	a.cut = s.pages%3 == 0 && after+int64(a.count) < total
	return a
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 || after > int64(len(s.deltas)) {
		http.Error(w, "bad cursor", http.StatusBadRequest)
		return
	}
	a := s.admit(r, after)
	switch a.code {
	case http.StatusOK:
	case http.StatusNoContent:
		w.WriteHeader(a.code)
		return
	default:
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		http.Error(w, http.StatusText(a.code), a.code)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	tick := time.NewTicker(s.pace)
	defer tick.Stop()
	for seq := after + 1; seq <= after+int64(a.count); seq++ {
		if _, err := fmt.Fprintf(w, "{\"seq\":%d,\"delta\":%d}\n", seq, s.deltas[seq-1]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
	if a.cut {
		fmt.Fprintf(w, "{\"seq\":%d,\"del", after+int64(a.count)+1)
		_ = rc.Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-line
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
