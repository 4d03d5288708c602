package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// envSoak turns on the full-size outbox runs: 20,000 committed rows and 20
// kills of the relay, a 30s long transaction. Unset, the tests run small
// versions of the same.
const envSoak = "RESUMABLE_PG_SOAK"

func soakFull() bool { return os.Getenv(envSoak) != "" }

// outboxBin builds examples/outbox into a directory of t's.
func outboxBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outbox")
	out, err := osexec.Command("go", "build", "-o", bin, "../../../examples/outbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ../../../examples/outbox: %v\n%s", err, out)
	}
	return bin
}

// soak is one run: writers commit (and roll back) rows while the example
// relays them, killed now and then; a plain id > last relay reads the same
// table.
type soak struct {
	writers, rows, kills int
	args                 []string // the example's flags beyond -dsn, -table, -state
	idle                 bool     // the writers' random pause is before BEGIN, not inside the transaction

	mu         sync.Mutex
	committed  map[int64]time.Time // id → when its commit returned
	rolledBack map[int64]bool
	seen       map[int64]time.Time // id → when the relay first printed it
	lines      int
	bad        []string // lines not in the pinned format
	naive      map[int64]bool
}

// record is the relay's stdout: it records each line as it arrives.
type record struct {
	s    *soak
	part []byte
}

func (r *record) Write(p []byte) (int, error) {
	now := time.Now()
	r.part = append(r.part, p...)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for {
		i := bytes.IndexByte(r.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(r.part[:i])
		r.part = r.part[i+1:]
		var id int64
		if n, err := fmt.Sscanf(line, "handled %d", &id); n != 1 || err != nil || line != "handled "+strconv.FormatInt(id, 10) {
			r.s.bad = append(r.s.bad, line)
			continue
		}
		r.s.lines++
		if _, ok := r.s.seen[id]; !ok {
			r.s.seen[id] = now
		}
	}
}

func (s *soak) counts() (lines, committed int, allSeen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	allSeen = true
	for id := range s.committed {
		if _, ok := s.seen[id]; !ok {
			allSeen = false
			break
		}
	}
	return s.lines, len(s.committed), allSeen
}

// write is one writer: transactions of 1 to 4 rows, each open a random 0 to
// 300ms, one in ten rolled back, until the run has its rows.
func (s *soak) write(ctx context.Context, pool *pgxpool.Pool, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		if _, committed, _ := s.counts(); committed >= s.rows {
			return nil
		}
		pause := time.Duration(rng.IntN(301)) * time.Millisecond
		if s.idle {
			if err := sleepCtx(ctx, pause); err != nil {
				return err
			}
			pause = 0
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		var ids []int64
		for range 1 + rng.IntN(4) {
			var id int64
			if err := tx.QueryRow(ctx, "INSERT INTO outbox (payload) VALUES ('x') RETURNING id").Scan(&id); err != nil {
				tx.Rollback(ctx)
				return err
			}
			ids = append(ids, id)
		}
		// The workload: a transaction that stays open a while.
		if err := sleepCtx(ctx, pause); err != nil {
			tx.Rollback(ctx)
			return err
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
		now := time.Now()
		s.mu.Lock()
		for _, id := range ids {
			if rollback {
				s.rolledBack[id] = true
			} else {
				s.committed[id] = now
			}
		}
		s.mu.Unlock()
	}
}

// naiveRelay reads the table as most hand-written relays do, id > last,
// every 10ms, until ctx ends.
func (s *soak) naiveRelay(ctx context.Context, pool *pgxpool.Pool) {
	var last int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, err := pool.Query(ctx, "SELECT id FROM outbox WHERE id > $1 ORDER BY id LIMIT 1000", last)
		if err == nil {
			for rows.Next() {
				var id int64
				if rows.Scan(&id) == nil {
					last = id
					s.mu.Lock()
					s.naive[id] = true
					s.mu.Unlock()
				}
			}
			rows.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// soakResult is what a run measured.
type soakResult struct {
	committed, rolledBack, lines, duplicates, naiveSkipped int
	p50, p99, max                                          time.Duration
	elapsed                                                time.Duration
}

func (r soakResult) String() string {
	return fmt.Sprintf("%d committed rows (%d rolled back) in %v; relay printed %d lines, %d duplicates; latency commit→handled p50 %v p99 %v max %v; id > last relay skipped %d",
		r.committed, r.rolledBack, r.elapsed.Round(time.Millisecond), r.lines, r.duplicates, r.p50, r.p99, r.max, r.naiveSkipped)
}

// run runs the soak on a database of its own and checks that every
// committed row was printed and no rolled-back one.
func (s *soak) run(t *testing.T, bin string) soakResult {
	t.Helper()
	s.committed, s.rolledBack, s.seen, s.naive = map[int64]time.Time{}, map[int64]bool{}, map[int64]time.Time{}, map[int64]bool{}
	dsn := pgtest.NewDB(t)
	pool := newPool(t, dsn+"&pool_max_conns="+strconv.Itoa(s.writers+2))
	ctx := pgtest.Ctx(t)
	if soakFull() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(t.Context(), 15*time.Minute)
		defer cancel()
	}
	state := filepath.Join(t.TempDir(), "cursor.json")
	out := &record{s: s}
	var stderr bytes.Buffer
	start := func() (*osexec.Cmd, chan error) {
		cmd := osexec.Command(bin, append([]string{"-dsn", dsn, "-table", "outbox", "-state", state}, s.args...)...)
		cmd.Stdout, cmd.Stderr = out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	cmd, done := start()
	// The relay creates the table; the writers start once it is there.
	awaitCond(t, ctx, "the table", func() bool {
		var ok bool
		return pool.QueryRow(ctx, "SELECT to_regclass('outbox') IS NOT NULL").Scan(&ok) == nil && ok
	})

	began := time.Now()
	naiveCtx, stopNaive := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.naiveRelay(naiveCtx, pool) })
	errs := make(chan error, s.writers)
	for i := range s.writers {
		wg.Go(func() { errs <- s.write(ctx, pool, uint64(i)) })
	}
	for k := 1; k <= s.kills; k++ {
		awaitCond(t, ctx, fmt.Sprintf("kill %d", k), func() bool {
			lines, _, _ := s.counts()
			return lines >= k*s.rows/(s.kills+1)
		})
		cmd.Process.Kill()
		<-done
		cmd, done = start()
	}
	for range s.writers {
		if err := <-errs; err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	awaitCond(t, ctx, "every committed row", func() bool { _, _, all := s.counts(); return all })
	elapsed := time.Since(began)
	var maxID int64
	pool.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM outbox").Scan(&maxID)
	awaitCond(t, ctx, "the id > last relay at the end", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for id := maxID; id > 0; id-- {
			if s.committed[id] != (time.Time{}) {
				return s.naive[id]
			}
		}
		return true
	})
	stopNaive()
	wg.Wait()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Errorf("the relay on SIGTERM: %v\n%s", err, stderr.String())
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Errorf("lines not in the format \"handled ID\": %q", s.bad[:min(len(s.bad), 5)])
	}
	res := soakResult{committed: len(s.committed), rolledBack: len(s.rolledBack), lines: s.lines, duplicates: s.lines - len(s.seen), elapsed: elapsed}
	var lat []time.Duration
	for id, at := range s.seen {
		c, ok := s.committed[id]
		if !ok {
			t.Errorf("row %d printed, but not committed (rolled back: %v)", id, s.rolledBack[id])
			continue
		}
		lat = append(lat, max(at.Sub(c), 0))
	}
	for id := range s.committed {
		if !s.naive[id] {
			res.naiveSkipped++
		}
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.p50, res.p99, res.max = lat[n/2], lat[n*99/100], lat[n-1]
	}
	return res
}

// awaitCond polls cond every 5ms until it holds, failing t at ctx's end.
func awaitCond(t *testing.T, ctx context.Context, what string, cond func() bool) {
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

// TestOutboxExample drives examples/outbox, built once, from outside as
// its pinned command line allows: the soak, the latency runs, the hold
// report.
func TestOutboxExample(t *testing.T) {
	bin := outboxBin(t)
	t.Run("soak", func(t *testing.T) { exampleSoak(t, bin) })
	t.Run("latency", func(t *testing.T) { exampleLatency(t, bin) })
	t.Run("hold", func(t *testing.T) { exampleHold(t, bin) })
}

// exampleSoak: 32 writers whose transactions commit out of id order (some
// roll back), the example relay SIGKILLed again and again: every committed
// row is printed at least once, no rolled-back row ever. A plain id > last
// relay reading the same table, in the same run, shows what it skips.
// RESUMABLE_PG_SOAK=1: 20,000 rows, 20 kills.
func exampleSoak(t *testing.T, bin string) {
	s := &soak{writers: 32, rows: 1000, kills: 3}
	if soakFull() {
		s.rows, s.kills = 20000, 20
	}
	res := s.run(t, bin)
	t.Logf("soak, %d kills: %v", s.kills, res)
}

// exampleLatency measures commit → handled without kills, with
// LISTEN/NOTIFY and polling alone (every 200ms): with the writers'
// transactions open 0–300ms (a row waits for the older ones: most of the
// latency), and with writers that pause 0–300ms between transactions
// committed at once (the relay's own latency).
func exampleLatency(t *testing.T, bin string) {
	rows := 1000
	if soakFull() {
		rows = 5000
	}
	for _, tc := range []struct {
		name string
		args []string
		idle bool
	}{
		{name: "listen", args: nil},
		{name: "poll 200ms", args: []string{"-listen=false", "-poll=200ms"}},
		{name: "listen, short transactions", args: nil, idle: true},
		{name: "poll 200ms, short transactions", args: []string{"-listen=false", "-poll=200ms"}, idle: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soak{writers: 32, rows: rows, args: tc.args, idle: tc.idle}
			res := s.run(t, bin)
			t.Logf("%s: %v", tc.name, res)
		})
	}
}
