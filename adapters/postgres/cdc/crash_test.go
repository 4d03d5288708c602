package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// envCrashFull turns on the full crash test: 20,000 rows, 50 kills of the
// consumer, 5 crashes of the server (a few minutes). Unset, the test runs
// a small version.
const envCrashFull = "RESUMABLE_PG_CRASH_FULL"

// exampleBin builds examples/postgres into a directory of t's.
func exampleBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgexample")
	out, err := osexec.Command("go", "build", "-o", bin, "../../../examples/postgres").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ../../../examples/postgres: %v\n%s", err, out)
	}
	return bin
}

// handledLine is a line the example prints.
type handledLine struct {
	table, op string
	id        int
	lsn       pglogrepl.LSN
	index     int
}

var handledRE = regexp.MustCompile(`^handled (\S+) (INSERT|UPDATE|DELETE) (-?\d+) ([0-9A-F]+/[0-9A-F]+) (\d+)$`)

// readHandled parses the example's stdout, failing t on a line that is not
// in the pinned format.
func readHandled(t testing.TB, path string) []handledLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var lines []handledLine
	for i, s := range strings.Split(string(data), "\n") {
		if s == "" {
			continue
		}
		m := handledRE.FindStringSubmatch(s)
		if m == nil {
			if i == strings.Count(string(data), "\n") { // a line being written
				break
			}
			t.Fatalf("stdout line %d %q: not `handled TABLE OP ID LSN INDEX`", i+1, s)
		}
		id, _ := strconv.Atoi(m[3])
		lsn, err := pglogrepl.ParseLSN(m[4])
		if err != nil {
			t.Fatalf("stdout line %d %q: %v", i+1, s, err)
		}
		idx, _ := strconv.Atoi(m[5])
		lines = append(lines, handledLine{table: m[1], op: m[2], id: id, lsn: lsn, index: idx})
	}
	return lines
}

// savedCursor reads the example's state file; ok is false when it does
// not exist yet.
func savedCursor(t testing.TB, path string) (c cdc.Cursor, ok bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, false
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err = cursor.JSON[cdc.Cursor]().Decode(data)
	if err != nil {
		t.Fatalf("state file %s: %v", path, err)
	}
	return c, true
}

func TestReplExampleOutput(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"INSERT INTO items (id) VALUES (1), (2), (3)",
		"BEGIN; UPDATE items SET v = 7 WHERE id = 2; DELETE FROM items WHERE id = 3; COMMIT")
	dir := t.TempDir()
	state, stdout, stderr := filepath.Join(dir, "cursor.json"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	p, err := childproc.Start("example", exampleBin(t), []string{"-dsn", dsn, "-slot", slot, "-publication", "pub", "-state", state}, stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	replUntil(t, "5 lines from the example", func() bool {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the example exited: %v\n%s", err, childproc.Tail(stderr, 20))
		}
		return len(readHandled(t, stdout)) >= 5
	})
	if graceful, err := p.Stop(syscall.SIGTERM, time.Minute); !graceful || err != nil {
		t.Fatalf("SIGTERM: graceful %t, exit %v\n%s", graceful, err, childproc.Tail(stderr, 20))
	}
	data, err := os.ReadFile(stdout)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	lines := readHandled(t, stdout)
	if len(got) != 5 || len(lines) != 5 {
		t.Fatalf("stdout:\n%s\nwant 5 lines", data)
	}
	tx1, tx2 := lines[0].lsn, lines[3].lsn
	want := []string{
		fmt.Sprintf("handled public.items INSERT 1 %v 0", tx1),
		fmt.Sprintf("handled public.items INSERT 2 %v 1", tx1),
		fmt.Sprintf("handled public.items INSERT 3 %v 2", tx1),
		fmt.Sprintf("handled public.items UPDATE 2 %v 0", tx2),
		fmt.Sprintf("handled public.items DELETE 3 %v 1", tx2),
	}
	if !slices.Equal(got, want) || tx2 <= tx1 {
		t.Fatalf("stdout:\n%s\nwant:\n%s", data, strings.Join(want, "\n"))
	}
	if c, ok := savedCursor(t, state); !ok || cdc.Compare(c, cdc.Cursor{LSN: tx2, Index: 1}) < 0 {
		t.Fatalf("state file holds %v (exists %t), want at least %v #1", c, ok, tx2)
	}
	if errOut, _ := os.ReadFile(stderr); strings.Contains(string(errOut), "handled") {
		t.Fatalf("stderr has a handled line:\n%s", errOut)
	}
}

func TestReplServerReplaced(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	dsn := srv.DSN()
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 10) g")
	store := cursor.NewMemory(cdc.Cursor{})
	if _, err := replRun(t, dsn, slot, store, 3); err != nil {
		t.Fatal(err)
	}
	was, _ := store.Load(context.Background())
	if err := srv.Wipe(); err != nil {
		t.Fatal(err)
	}
	// The same objects on the new cluster, and more changes than the cursor's.
	replExec(t, dsn,
		"CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)",
		"CREATE PUBLICATION pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')",
		"INSERT INTO items (id) SELECT g FROM generate_series(1, 1000) g")
	replChanged(t, dsn, slot, store, "system identifier: was "+was.System+", now ")
}

// crashChange is one statement of the crash test's writer.
type crashChange struct {
	op string // INSERT, UPDATE or DELETE
	id int
}

// crashWorkload returns transactions of 1 to 50 changes that insert rows
// rows in all, and update and delete some of them.
func crashWorkload(rng *rand.Rand, rows int) [][]crashChange {
	var (
		txs      [][]crashChange
		live     []int
		inserted int
	)
	for inserted < rows {
		tx := make([]crashChange, 1+rng.IntN(50))
		for i := range tx {
			r := rng.IntN(10)
			switch {
			case len(live) == 0 || (r < 7 && inserted < rows):
				inserted++
				live = append(live, inserted)
				tx[i] = crashChange{op: "INSERT", id: inserted}
			case r < 9:
				tx[i] = crashChange{op: "UPDATE", id: live[rng.IntN(len(live))]}
			default:
				j := rng.IntN(len(live))
				tx[i] = crashChange{op: "DELETE", id: live[j]}
				live[j] = live[len(live)-1]
				live = live[:len(live)-1]
			}
		}
		txs = append(txs, tx)
	}
	return txs
}

// crashWrite commits txs in order, each with its number in the table done
// (not published), so that a transaction whose COMMIT's reply was lost in
// a server crash is known to have committed, or is written again.
func crashWrite(ctx context.Context, dsn string, txs [][]crashChange) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	retry := time.NewTicker(20 * time.Millisecond) // paces reconnects to a restarting server
	defer retry.Stop()
	for i := 0; i < len(txs); {
		if conn == nil {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("writer at transaction %d: %w", i, err)
				}
				<-retry.C
				continue
			}
			conn = c
			var done bool
			if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM done WHERE tx = $1)", i).Scan(&done); err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			if done {
				i++
				continue
			}
		}
		if err := crashTx(ctx, conn, i, txs[i]); err != nil {
			conn.Close(context.Background())
			conn = nil
			continue
		}
		i++
	}
	return nil
}

func crashTx(ctx context.Context, conn *pgx.Conn, n int, changes []crashChange) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	for _, c := range changes {
		q := map[string]string{
			"INSERT": "INSERT INTO items (id) VALUES ($1)",
			"UPDATE": "UPDATE items SET v = v + 1 WHERE id = $1",
			"DELETE": "DELETE FROM items WHERE id = $1",
		}[c.op]
		tag, err := tx.Exec(ctx, q, c.id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%s %d: %d rows", c.op, c.id, tag.RowsAffected())
		}
	}
	if _, err := tx.Exec(ctx, "INSERT INTO done (tx) VALUES ($1)", n); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TestReplCrash runs the example as the consumer of a writer's changes,
// kills it with SIGKILL at random moments and crashes the server (as
// pg_ctl stop -m immediate does) in between; at every kill and restart the
// slot's confirmed position must not be beyond the saved cursor, and in the
// end every change must have been handled, in commit order and in order
// within each transaction, with at most one change redelivered per kill
// (the example saves after every change).
func TestReplCrash(t *testing.T) {
	rows, kills, crashes, limit := 2000, 5, 1, 3*time.Minute
	if os.Getenv(envCrashFull) != "" {
		rows, kills, crashes, limit = 20000, 50, 5, 20*time.Minute
	}
	srv := pgtest.Start(t, pgtest.Options{})
	dsn := srv.DSN()
	slot := replSetup(t, dsn)
	replExec(t, dsn, "CREATE TABLE done (tx int PRIMARY KEY)")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d: %d rows, %d kills, %d server crashes", seed, rows, kills, crashes)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	txs := crashWorkload(rng, rows)
	total := 0
	for _, tx := range txs {
		total += len(tx)
	}
	created := confirmedFlush(t, dsn, slot)

	bin := exampleBin(t)
	dir := t.TempDir()
	state, stdout, stderr := filepath.Join(dir, "cursor.json"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	start := func() *childproc.Proc {
		p, err := childproc.Start("consumer", bin, []string{"-dsn", dsn, "-slot", slot, "-publication", "pub", "-state", state}, stdout, stderr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(when string) { // confirmed first: the saved cursor only moves on
		c := confirmedFlush(t, dsn, slot)
		saved, ok := savedCursor(t, state)
		if (ok && c > saved.LSN) || (!ok && c != created) {
			t.Fatalf("%s: confirmed_flush_lsn %v is beyond the saved cursor %v (saved: %t; slot created at %v)", when, c, saved, ok, created)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	writer := make(chan error, 1)
	go func() { writer <- crashWrite(ctx, dsn, txs) }()

	// The faults, at random counts of handled lines, in order.
	type fault struct {
		at    int
		crash bool
	}
	var faults []fault
	for range kills {
		faults = append(faults, fault{at: 1 + rng.IntN(total-1)})
	}
	for range crashes {
		faults = append(faults, fault{at: 1 + rng.IntN(total-1), crash: true})
	}
	slices.SortFunc(faults, func(a, b fault) int { return a.at - b.at })

	p := start()
	defer func() { p.Kill() }()
	wait := func(what string, cond func(n int) bool) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if exited, err := p.Exited(); exited {
				t.Fatalf("the consumer exited while waiting for %s: %v\n%s", what, err, childproc.Tail(stderr, 30))
			}
			if cond(len(readHandled(t, stdout))) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v (%d lines)\n%s", what, ctx.Err(), len(readHandled(t, stdout)), childproc.Tail(stderr, 30))
			case <-tick.C:
			}
		}
	}
	for i, f := range faults {
		wait(fmt.Sprintf("%d lines", f.at), func(n int) bool { return n >= f.at })
		if f.crash {
			if err := srv.Crash(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("fault %d, after a server crash", i))
			continue
		}
		p.Kill()
		check(fmt.Sprintf("fault %d, after a kill", i))
		p = start()
	}
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	var uniq []handledLine
	wait("every change", func(int) bool {
		uniq = crashVerify(t, readHandled(t, stdout), kills)
		return len(uniq) >= total
	})
	if graceful, err := p.Stop(syscall.SIGTERM, time.Minute); !graceful || err != nil {
		t.Fatalf("SIGTERM: graceful %t, exit %v\n%s", graceful, err, childproc.Tail(stderr, 20))
	}
	check("at the end")
	t.Logf("%d transactions, %d changes handled, %d lines (one per change, and a redelivery after some kills)", len(txs), len(uniq), len(readHandled(t, stdout)))

	// Group the changes by transaction: the writer's, in commit order.
	var got [][]crashChange
	for i, l := range uniq {
		if i == 0 || l.lsn != uniq[i-1].lsn {
			got = append(got, nil)
		}
		if l.index != len(got[len(got)-1]) {
			t.Fatalf("change %d: index %d in transaction %v, want %d", i, l.index, l.lsn, len(got[len(got)-1]))
		}
		got[len(got)-1] = append(got[len(got)-1], crashChange{op: l.op, id: l.id})
	}
	if len(got) != len(txs) {
		t.Fatalf("handled %d transactions, the writer committed %d", len(got), len(txs))
	}
	for i := range txs {
		if !slices.Equal(got[i], txs[i]) {
			t.Fatalf("transaction %d: handled %v, written %v", i, got[i], txs[i])
		}
	}
}

// crashVerify checks the order of the handled lines: every line is a new
// change after the previous one, or the redelivery of the last change
// handled before a kill (at most one per kill). It returns the changes
// without repeats.
func crashVerify(t testing.TB, lines []handledLine, kills int) []handledLine {
	t.Helper()
	var (
		uniq []handledLine
		last cdc.Cursor
		reps int
	)
	for i, l := range lines {
		pos := cdc.Cursor{LSN: l.lsn, Index: l.index}
		switch c := cdc.Compare(pos, last); {
		case c > 0 || i == 0:
			uniq = append(uniq, l)
			last = pos
		case c == 0:
			reps++
		default:
			t.Fatalf("line %d: change %v after %v: out of order", i+1, pos, last)
		}
	}
	if reps > kills {
		t.Fatalf("%d changes redelivered after %d kills, want at most one per kill", reps, kills)
	}
	return uniq
}

// TestReplExampleDemo runs the example with no flags: its own server, a
// stop after the 3rd change of a 10-row transaction, and a second run that
// goes on with the 4th.
func TestReplExampleDemo(t *testing.T) {
	if _, err := os.Stat(filepath.Join(pgBin(), "postgres")); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no PostgreSQL binaries: %v", err)
		}
		t.Fatal(err)
	}
	cmd := osexec.CommandContext(pgtest.Ctx(t), exampleBin(t))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the demo: %v\n%s", err, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "stdout")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	lines := readHandled(t, path)
	var got []string
	for _, l := range lines {
		got = append(got, fmt.Sprintf("%s %d %d", l.op, l.id, l.index))
	}
	want := []string{"INSERT 1 0", "INSERT 2 1", "INSERT 3 2", "INSERT 4 3", "INSERT 5 4", "INSERT 6 5", "INSERT 7 6",
		"INSERT 8 7", "INSERT 9 8", "INSERT 10 9", "UPDATE 4 0", "DELETE 5 0"}
	if !slices.Equal(got, want) || lines[0].lsn != lines[9].lsn {
		t.Fatalf("the demo printed:\n%s\nwant %q", out, want)
	}
	if !strings.Contains(stderr.String(), "second run") {
		t.Fatalf("the demo's stderr:\n%s", stderr.String())
	}
	// The second run says the cursor it resumes after, not 0/0.
	if resumed := fmt.Sprintf("resuming after cursor %v #2 ", lines[0].lsn); !strings.Contains(stderr.String(), resumed) {
		t.Fatalf("the demo's stderr has no %q:\n%s", resumed, stderr.String())
	}
}

// pgBin is where the example's demo looks for PostgreSQL's binaries.
func pgBin() string {
	if dir := os.Getenv(pgtest.EnvBin); dir != "" {
		return dir
	}
	return pgtest.DefaultBin
}

// TestExampleHelp: -h prints the flags and exits 0.
func TestExampleHelp(t *testing.T) {
	out, err := osexec.Command(exampleBin(t), "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-publication") {
		t.Fatalf("pgexample -h = %v\n%s\nwant exit 0 and the flags", err, out)
	}
}
