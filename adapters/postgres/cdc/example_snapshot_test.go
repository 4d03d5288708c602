package cdc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// jsonChange is a line of the example's -format json output.
type jsonChange struct {
	Op         string         `json:"op"`
	Table      string         `json:"table"`
	LSN        string         `json:"lsn"`
	Index      *int           `json:"index"`
	New        map[string]any `json:"new"`
	Old        map[string]any `json:"old"`
	CommitTime string         `json:"commit_time"`
}

// keyColumns are the key columns of the tables the tests write.
var keyColumns = map[string][]string{"public.items": {"id"}, "public.pairs": {"a", "b"}, "public.sentinel": {"id"}, "public.docs": {"id"}}

func jsonKey(table string, row map[string]any) string {
	var k []string
	for _, c := range keyColumns[table] {
		k = append(k, fmt.Sprint(row[c]))
	}
	return strings.Join(k, "\x00")
}

// truncateRE is the pinned form of a TRUNCATE in -format json.
var truncateRE = regexp.MustCompile(`^\{"op":"truncate","table":"[^"]+","lsn":"[0-9A-F]+/[0-9A-F]+","index":\d+,"commit_time":"[^"]+"\}$`)

// applyJSON applies the example's complete JSON lines in order, as upserts
// and removals, failing t on a line out of the pinned format.
func applyJSON(t testing.TB, path string) (map[string]map[string]map[string]any, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]map[string]map[string]any{}
	lines := strings.Split(string(data), "\n")
	snapshots := 0
	for i, s := range lines[:len(lines)-1] { // the last is empty or being written
		var c jsonChange
		if err := json.Unmarshal([]byte(s), &c); err != nil {
			t.Fatalf("stdout line %d %q: %v", i+1, s, err)
		}
		if c.Table == "" || c.LSN == "" || c.Index == nil || (c.Op != "delete" && c.Op != "truncate" && c.New == nil) || (c.Op != "snapshot" && c.CommitTime == "") {
			t.Fatalf("stdout line %d %q: not in the pinned format", i+1, s)
		}
		if c.CommitTime != "" {
			if _, err := time.Parse(time.RFC3339Nano, c.CommitTime); err != nil {
				t.Fatalf("stdout line %d: commit_time: %v", i+1, err)
			}
		}
		tab := state[c.Table]
		if tab == nil {
			tab = map[string]map[string]any{}
			state[c.Table] = tab
		}
		if c.Old != nil {
			delete(tab, jsonKey(c.Table, c.Old))
		}
		switch c.Op {
		case "snapshot", "insert", "update":
			if c.Op == "snapshot" {
				snapshots++
			}
			tab[jsonKey(c.Table, c.New)] = c.New
		case "delete":
			if c.Old == nil {
				t.Fatalf("stdout line %d %q: a delete without old", i+1, s)
			}
		case "truncate":
			if !truncateRE.MatchString(s) {
				t.Fatalf("stdout line %d %q: not the pinned truncate", i+1, s)
			}
			clear(tab)
		default:
			t.Fatalf("stdout line %d %q: op %q", i+1, s, c.Op)
		}
	}
	return state, snapshots
}

// tableJSON reads tables as row_to_json makes them.
func tableJSON(t testing.TB, dsn string, tables ...string) map[string]map[string]map[string]any {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	out := map[string]map[string]map[string]any{}
	for _, tab := range tables {
		rows, err := conn.Query(ctx, "SELECT row_to_json(t)::text FROM "+tab+" t")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]map[string]any{}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			var row map[string]any
			if err := json.Unmarshal([]byte(s), &row); err != nil {
				t.Fatal(err)
			}
			m[jsonKey("public."+tab, row)] = row
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		out["public."+tab] = m
	}
	return out
}

// TestExampleSnapshotKilled runs the example with -snapshot -format json
// and -backfill while writers change the tables, SIGKILLs it again and
// again during the snapshot, the backfill and the streaming, and applies
// its output: the result equals the tables. 1,500 rows, 2 writers, 6 kills,
// the cursor saved after every change; RESUMABLE_PG_SOAK=1: the issue's
// 200,000 rows, 8 writers and 20 kills, the cursor saved every 100ms
// (-checkpoint; an fsync per change would never catch up with 8 writers).
func TestExampleSnapshotKilled(t *testing.T) {
	rows, writers, kills := 1500, 2, 6
	var checkpoint []string
	if os.Getenv("RESUMABLE_PG_SOAK") != "" {
		rows, writers, kills = 200_000, 8, 20
		checkpoint = []string{"-checkpoint", "100ms"}
	}
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items, sentinel")
	bin := exampleBin(t)
	dir := t.TempDir()
	state, stdout, stderr := filepath.Join(dir, "cursor.json"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	args := append([]string{"-dsn", dsn, "-slot", slot, "-publication", "pub", "-state", state, "-snapshot", "-format", "json"}, checkpoint...)
	start := func(extra ...string) *childproc.Proc {
		p, err := childproc.Start("example", bin, append(args, extra...), stdout, stderr)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	wg := churn(ctx, t, dsn, writers, rows+rows/5)
	rng := rand.New(rand.NewPCG(5, 6))
	lines := func() int {
		data, _ := os.ReadFile(stdout)
		return strings.Count(string(data), "\n")
	}
	var extra []string
	for i := range kills {
		if i == kills/2 { // pairs joins the publication, and is backfilled
			replExec(t, dsn, "ALTER PUBLICATION pub ADD TABLE pairs")
			extra = []string{"-backfill", "pairs"}
		}
		p := start(extra...)
		target := lines() + rng.IntN(rows/4) + 1
		replUntil(t, "more output", func() bool {
			if exited, err := p.Exited(); exited {
				t.Fatalf("the example exited: %v\n%s", err, childproc.Tail(stderr, 20))
			}
			return lines() >= target
		})
		p.Kill()
	}
	cancel()
	wg.Wait()
	replExec(t, dsn, "INSERT INTO sentinel VALUES (1)")
	p := start(extra...)
	defer p.Kill()
	// The last run ends once the sentinel and every row of pairs arrived,
	// and the state file says no snapshot is under way.
	want := tableJSON(t, dsn, "items", "pairs", "sentinel")
	replUntil(t, "the replica to equal the tables", func() bool {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the example exited: %v\n%s", err, childproc.Tail(stderr, 20))
		}
		c, ok := savedCursor(t, state)
		got, _ := applyJSON(t, stdout)
		return ok && c.Snapshot == "" && len(got["public.sentinel"]) == 1 && len(got["public.pairs"]) == len(want["public.pairs"])
	})
	if graceful, err := p.Stop(syscall.SIGTERM, time.Minute); !graceful || err != nil {
		t.Fatalf("SIGTERM: graceful %t, exit %v", graceful, err)
	}
	got, snapshots := applyJSON(t, stdout)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replica (-table +replica):\n%s", diff)
	}
	t.Logf("%d rows, %d lines, %d snapshot rows, %d kills", rows, lines(), snapshots, kills)
}

// TestExampleJSONTruncateAndNewlines: -format json prints a TRUNCATE on
// stdout, one object per table, in its pinned form, and a json value
// written over several lines as part of its change's one line.
func TestExampleJSONTruncateAndNewlines(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"CREATE TABLE docs (id int PRIMARY KEY, j json)",
		"ALTER PUBLICATION pub ADD TABLE docs",
		`INSERT INTO docs VALUES (1, E'{"a":\n  [1,\n 2]}')`,
		"INSERT INTO items (id) VALUES (1)",
		"TRUNCATE items, docs",
		"INSERT INTO items (id) VALUES (2)")
	dir := t.TempDir()
	state, stdout, stderr := filepath.Join(dir, "cursor.json"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	p, err := childproc.Start("example", exampleBin(t), []string{"-dsn", dsn, "-slot", slot, "-publication", "pub", "-state", state, "-format", "json"}, stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	replUntil(t, "the last insert from the example", func() bool {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the example exited: %v\n%s", err, childproc.Tail(stderr, 20))
		}
		data, _ := os.ReadFile(stdout)
		return strings.Contains(string(data), `"new":{"id":2,`)
	})
	if graceful, err := p.Stop(syscall.SIGTERM, time.Minute); !graceful || err != nil {
		t.Fatalf("SIGTERM: graceful %t, exit %v\n%s", graceful, err, childproc.Tail(stderr, 20))
	}
	got, _ := applyJSON(t, stdout)
	data, _ := os.ReadFile(stdout)
	if n := strings.Count(string(data), `"op":"truncate"`); n != 2 {
		t.Fatalf("%d truncates on stdout, want 2 (items, docs):\n%s", n, data)
	}
	if !strings.Contains(string(data), `"j":{"a":[1,2]}`) {
		t.Fatalf("stdout has no json value {\"a\":[1,2]}:\n%s", data)
	}
	want := map[string]map[string]map[string]any{"public.docs": {}, "public.items": {"2": {"id": float64(2), "v": float64(0)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replica (-want +got):\n%s", diff)
	}
}
