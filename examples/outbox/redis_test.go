package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// relayProc is one run of the Redis relay, the program as a child
// process.
type relayProc struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once it exited
	err    error         // its exit, once done is closed
	stderr bytes.Buffer
	owner  string // the cursor's owner before it started: it loaded once that changed
}

// lines records the relay's "handled ID" lines, across its lives.
type lines struct {
	mu      sync.Mutex
	part    []byte
	handled map[int64]int
	n       int
	bad     []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.part[:i])
		l.part = l.part[i+1:]
		id, err := strconv.ParseInt(strings.TrimPrefix(line, "handled "), 10, 64)
		if err != nil || line != "handled "+strconv.FormatInt(id, 10) {
			l.bad = append(l.bad, line)
			continue
		}
		l.handled[id]++
		l.n++
	}
}

func (l *lines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// startRelay starts the program with args, its stdout to out.
func startRelay(t testing.TB, args []string, out *lines) *relayProc {
	t.Helper()
	p := &relayProc{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), envMain+"=1", envMain+"_ARGS="+strings.Join(args, " "))
	p.cmd.Stdout, p.cmd.Stderr = out, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the relay's exit, failing t at ctx's end after a
// SIGQUIT, so that its stderr shows where it was.
func (p *relayProc) wait(t testing.TB, ctx context.Context) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
			t.Fatalf("waiting for the relay to exit: %v; stderr after a SIGQUIT:\n%s", ctx.Err(), p.stderr.String())
		case <-time.After(redistest.Timeout):
			t.Fatalf("waiting for the relay to exit: %v; a SIGQUIT did not end it", ctx.Err())
		}
		return nil
	}
}

// poll polls cond every 5ms until it holds, failing t at ctx's end.
func poll(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// writes is what the writers did: the payload of every committed row,
// and the ids of rolled-back ones.
type writes struct {
	mu         sync.Mutex
	committed  map[int64]string
	rolledBack map[int64]bool
}

func (w *writes) committedN() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.committed)
}

// write is one writer: transactions of 1 to 3 rows, each held open 0 to
// 200ms, one in ten rolled back, until rows rows were committed in all.
func (w *writes) write(ctx context.Context, pool *pgxpool.Pool, seed uint64, rows int) error {
	rng := rand.New(rand.NewPCG(seed, 2))
	for seq := 0; w.committedN() < rows; seq++ {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		got := map[int64]string{}
		for i := range 1 + rng.IntN(3) {
			payload := fmt.Sprintf("w%d-%d-%d", seed, seq, i)
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO outbox (payload) VALUES ($1) RETURNING id", payload).Scan(&id); err != nil {
				tx.Rollback(ctx)
				return err
			}
			got[id] = payload
		}
		// The workload: a transaction that stays open a while.
		select {
		case <-ctx.Done():
			tx.Rollback(ctx)
			return ctx.Err()
		case <-time.After(time.Duration(rng.IntN(201)) * time.Millisecond):
		}
		rollback := rng.IntN(10) == 0
		if rollback {
			err = tx.Rollback(ctx)
		} else {
			err = tx.Commit(ctx)
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		for id, payload := range got {
			if rollback {
				w.rolledBack[id] = true
			} else {
				w.committed[id] = payload
			}
		}
		w.mu.Unlock()
	}
	return nil
}

// insert commits one row with payload.
func (w *writes) insert(ctx context.Context, pool *pgxpool.Pool, payload string) error {
	var id int64
	if err := pool.QueryRow(ctx, "INSERT INTO outbox (payload) VALUES ($1) RETURNING id", payload).Scan(&id); err != nil {
		return err
	}
	w.mu.Lock()
	w.committed[id] = payload
	w.mu.Unlock()
	return nil
}

// TestRedisRelayExactlyOnce drives the pinned command line
//
//	outbox -dsn DSN -table outbox -redis HOST:PORT -stream out
//
// against a real PostgreSQL and a real redis-server: 16 writers whose
// transactions stay open 0–200ms (one in ten rolled back), the relay
// SIGKILLed 20 times, and twice replaced by a second relay started
// while the first still runs (the first, fenced, must exit 1 and write
// nothing more). At the end, SIGTERM exits 0, and the stream holds every
// committed row exactly once, with its payload, and no rolled-back row.
func TestRedisRelayExactlyOnce(t *testing.T) {
	const (
		writers = 16
		rows    = 3000
		kills   = 22
	)
	takeovers := map[int]bool{5: true, 11: true} // rounds that start a second relay instead of a SIGKILL
	pg := pgtest.Start(t, pgtest.Options{})
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := pgtest.Ctx(t)
	pool, err := pgxpool.New(ctx, pg.DSN()+"&pool_max_conns="+strconv.Itoa(writers+2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	args := []string{"-dsn", pg.DSN(), "-table", "outbox", "-redis", srv.Addr, "-stream", "out"}
	out := &lines{handled: map[int64]int{}}
	// owner is the token of the relay that loaded the cursor last.
	owner := func() string { return rdb.HGet(ctx, cursorKey("out", "outbox"), "owner").Val() }
	start := func() *relayProc {
		before := owner()
		p := startRelay(t, args, out)
		p.owner = before
		return p
	}
	relay := start()
	poll(t, ctx, "the table", func() bool {
		var ok bool
		return pool.QueryRow(ctx, "SELECT to_regclass('outbox') IS NOT NULL").Scan(&ok) == nil && ok
	})

	w := &writes{committed: map[int64]string{}, rolledBack: map[int64]bool{}}
	errs := make(chan error, writers)
	for i := range writers {
		go func() { errs <- w.write(ctx, pool, uint64(i), rows) }()
	}
	// The rounds go by the entries in the stream: a SIGKILL may lose the
	// lines of a batch whose entries are in.
	inStream := func() int { return int(rdb.XLen(ctx, "out").Val()) }
	fenced := 0
	for k := 1; k <= kills; k++ {
		poll(t, ctx, fmt.Sprintf("round %d", k), func() bool { return inStream() >= k*rows/(kills+1) })
		if takeovers[k] {
			// The relay running loads before its successor starts: the
			// successor is the one that takes over.
			poll(t, ctx, "the relay's load", func() bool { return owner() != relay.owner })
			next := start()
			poll(t, ctx, "the successor's load", func() bool { return owner() != next.owner })
			// A row committed now reaches both relays (the writers may be
			// done, the first relay idle): the first one's transaction of it
			// is refused, and it exits 1 on its own.
			if err := w.insert(ctx, pool, "takeover-"+strconv.Itoa(k)); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, redistest.Timeout)
			err := relay.wait(t, wctx)
			cancel()
			if code := relay.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(relay.stderr.String(), "changed owner") {
				t.Fatalf("the replaced relay exited with %v (status %d), want 1 and the cursor changed; stderr:\n%s", err, code, relay.stderr.String())
			}
			fenced++
			relay = next
			continue
		}
		relay.cmd.Process.Kill()
		relay.wait(t, ctx)
		relay = start()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	committed := w.committedN()
	poll(t, ctx, "every committed row in the stream", func() bool { return inStream() >= committed })
	// SIGTERM once the last relay loaded the cursor (it handles signals
	// from before that), not while it starts.
	poll(t, ctx, "the last relay's load", func() bool { return owner() != relay.owner })
	relay.cmd.Process.Signal(syscall.SIGTERM)
	if err := relay.wait(t, ctx); err != nil {
		t.Errorf("the relay on SIGTERM: %v; stderr:\n%s", err, relay.stderr.String())
	}

	entries, err := rdb.XRange(ctx, "out", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, e := range entries {
		id, err := strconv.ParseInt(fmt.Sprint(e.Values["id"]), 10, 64)
		if err != nil || len(e.Values) != 2 {
			t.Fatalf("entry %s = %v, want the fields id and payload", e.ID, e.Values)
		}
		seen[id]++
		if w.rolledBack[id] {
			t.Errorf("rolled-back row %d is in the stream", id)
		} else if want, ok := w.committed[id]; !ok {
			t.Errorf("row %d is in the stream but was never committed", id)
		} else if e.Values["payload"] != want {
			t.Errorf("row %d: payload %v, want %q", id, e.Values["payload"], want)
		}
	}
	dups := 0
	for id := range w.committed {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("committed row %d is not in the stream", id)
		case n > 1:
			t.Errorf("committed row %d is in the stream %d times", id, n)
			dups += n - 1
		}
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.bad) > 0 {
		t.Errorf("lines not in the format \"handled ID\": %q", out.bad[:min(len(out.bad), 5)])
	}
	for id := range out.handled {
		if _, ok := w.committed[id]; !ok {
			t.Errorf("handled %d printed for a row not committed (rolled back: %v)", id, w.rolledBack[id])
		}
	}
	t.Logf("%d committed rows (%d rolled back), %d entries, %d duplicates; %d SIGKILLs, %d relays fenced out by a successor; %d lines printed for %d distinct rows",
		committed, len(w.rolledBack), len(entries), dups, kills-len(takeovers), fenced, out.n, len(out.handled))
}
