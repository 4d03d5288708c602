package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// replica is a consumer that applies events as upserts: a map per table
// from the text of a row's key columns to the text of the whole row.
type replica struct {
	mu        sync.Mutex // apply may run on concurrent handlers
	rows      map[string]map[string]string
	snapshots int
	sentinel  atomic.Bool
}

func newReplica() *replica { return &replica{rows: map[string]map[string]string{}} }

// rowText returns the key and the whole row of t as text.
func rowText(t cdc.Tuple) (key, row string) {
	var k, r []string
	for i := range t.Len() {
		name, v, kind := t.Column(i)
		s := name + "=" + string(v)
		if kind == 'n' {
			s = name + "=NULL"
		}
		r = append(r, s)
		if t.Key(i) {
			k = append(k, s)
		}
	}
	return strings.Join(k, ","), strings.Join(r, ",")
}

func (rp *replica) apply(ev cdc.Event) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if ev.Relation == "public.sentinel" {
		rp.sentinel.Store(true)
		return
	}
	tab := rp.rows[ev.Relation]
	if tab == nil {
		tab = map[string]string{}
		rp.rows[ev.Relation] = tab
	}
	switch ev.Op {
	case cdc.Snapshot, cdc.Insert, cdc.Update:
		if ev.Op == cdc.Snapshot {
			rp.snapshots++
		}
		if ev.Old.Len() > 0 {
			k, _ := rowText(ev.Old)
			delete(tab, k)
		}
		k, r := rowText(ev.New)
		tab[k] = r
	case cdc.Delete:
		k, _ := rowText(ev.Old)
		delete(tab, k)
	case cdc.Truncate:
		clear(tab)
	}
}

// tableRows reads the tables as the replica holds them.
func tableRows(t testing.TB, dsn string, tables ...string) map[string]map[string]string {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	out := map[string]map[string]string{}
	for _, tab := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+tab)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		var keys []string
		switch tab {
		case "items":
			keys = []string{"id"}
		case "pairs":
			keys = []string{"a", "b"}
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			var k, r []string
			for i, f := range rows.FieldDescriptions() {
				s := f.Name + "=" + fmt.Sprint(vals[i])
				if vals[i] == nil {
					s = f.Name + "=NULL"
				}
				r = append(r, s)
				for _, kn := range keys {
					if kn == f.Name {
						k = append(k, s)
					}
				}
			}
			m[strings.Join(k, ",")] = strings.Join(r, ",")
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		out["public."+tab] = m
	}
	return out
}

// churn runs writers on items and pairs until ctx ends.
func churn(ctx context.Context, t testing.TB, dsn string, writers, ids int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return
			}
			defer conn.Close(context.Background())
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				id := rng.IntN(ids) + 1
				var q string
				switch rng.IntN(6) {
				case 0:
					q = fmt.Sprintf("INSERT INTO items VALUES (%d, %d) ON CONFLICT (id) DO UPDATE SET v = excluded.v", id, rng.IntN(1000))
				case 1:
					q = fmt.Sprintf("UPDATE items SET v = v + 1 WHERE id = %d", id)
				case 2:
					q = fmt.Sprintf("DELETE FROM items WHERE id = %d", id)
				case 3: // the key moves: deleted and inserted under another
					q = fmt.Sprintf("UPDATE items SET id = %d WHERE id = %d AND NOT EXISTS (SELECT 1 FROM items WHERE id = %d)", ids+1-id, id, ids+1-id)
				case 4:
					q = fmt.Sprintf("INSERT INTO pairs VALUES ('k%d', %d, NULL) ON CONFLICT (a, b) DO UPDATE SET note = 'n' || excluded.b", id%50, id)
				case 5:
					q = fmt.Sprintf("DELETE FROM pairs WHERE a = 'k%d' AND b = %d", id%50, id)
				}
				if _, err := conn.Exec(ctx, q); err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "duplicate key") {
					t.Errorf("%s: %v", q, err)
					return
				}
			}
		}()
	}
	return &wg
}

// snapSetup makes items (rows rows) and pairs (a composite text key and a
// NULL-bearing column), both published, and a table sentinel, published,
// and returns the slot's name (not yet created).
func snapSetup(t testing.TB, dsn string, rows int) string {
	t.Helper()
	return snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items, pairs, empty, sentinel")
}

// snapSetupPub is snapSetup with the publication made by pub.
func snapSetupPub(t testing.TB, dsn string, rows int, pub string) string {
	t.Helper()
	slot := fmt.Sprintf("snap_%d", replSlots.Add(1))
	replExec(t, dsn,
		"CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)",
		"CREATE TABLE pairs (a text, b int, note text, PRIMARY KEY (a, b))",
		"CREATE TABLE empty (id int PRIMARY KEY)",
		"CREATE TABLE sentinel (id int PRIMARY KEY)",
		fmt.Sprintf("INSERT INTO items SELECT g, g FROM generate_series(1, %d) g", rows),
		fmt.Sprintf("INSERT INTO pairs SELECT 'k' || (g %% 50), g, CASE WHEN g %% 3 = 0 THEN NULL ELSE 'x' END FROM generate_series(1, %d) g", rows/2),
		pub,
	)
	t.Cleanup(func() { awaitInactive(t, dsn, slot) })
	return slot
}

// killable is a Store that a simulated kill makes refuse every save: the
// process died, the cursor stays where it was last saved, and the replica
// has applied events beyond it.
type killable struct {
	cursor.Store[cdc.Cursor]
	dead    atomic.Bool
	refused atomic.Int64 // saves refused: the kills that lost a cursor
}

var errKilled = errors.New("killed")

func (k *killable) Save(ctx context.Context, c cdc.Cursor) error {
	if k.dead.Load() {
		k.refused.Add(1)
		return errKilled
	}
	return k.Store.Save(ctx, c)
}

// runPiece runs the stream for stopAt events, applying them to rp, then
// ends like a kill (nothing saved from then on) or, with clean, a stop.
func runPiece(t testing.TB, src *cdc.Source, store *killable, rp *replica, stopAt int, clean bool, opts ...stream.Option) error {
	t.Helper()
	store.dead.Store(false)
	r, err := cdc.NewResumer(src, store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	var n atomic.Int64
	err = r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
		rp.apply(ev)
		if n.Add(1) >= int64(stopAt) {
			if clean {
				return stream.ErrStop
			}
			store.dead.Store(true) // the process dies: nothing more is saved
			cancel()
		}
		return nil
	})
	if store.dead.Load() && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// consumeUntilSentinel runs the stream in pieces of random length (each
// ended by a stop, as a kill and a restart would), applying to rp, until
// the sentinel row arrived and a cursor with no snapshot under way was
// committed. It returns the number of pieces.
func consumeUntilSentinel(t testing.TB, src *cdc.Source, store *killable, rp *replica, rng *rand.Rand, maxPiece int, opts ...stream.Option) int {
	t.Helper()
	for pieces := 1; ; pieces++ {
		ctx, cancel := context.WithCancel(pgtest.Ctx(t))
		var done atomic.Bool
		hooks := stream.Hooks[cdc.Cursor]{OnCommit: func(e stream.CommitEvent[cdc.Cursor]) {
			if rp.sentinel.Load() && e.Cursor.Snapshot == "" && !store.dead.Load() {
				done.Store(true)
				cancel()
			}
		}}
		store.dead.Store(false)
		r, err := cdc.NewResumer(src, store, append([]stream.Option{stream.WithHooks(hooks)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		stopAt, clean := int64(rng.IntN(maxPiece)+1), rng.IntN(2) == 0
		err = r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
			rp.apply(ev)
			if n.Add(1) >= stopAt {
				if clean {
					return stream.ErrStop
				}
				store.dead.Store(true)
				cancel()
			}
			return nil
		})
		cancel()
		if err != nil && !((store.dead.Load() || done.Load()) && errors.Is(err, context.Canceled)) {
			t.Fatal(err)
		}
		if done.Load() {
			return pieces
		}
	}
}

func TestSnapshotWithWritersAndRestarts(t *testing.T) {
	// Under WithConcurrency, events are ordered by table: an UPDATE that
	// changes a row's key touches two keys, so an order by row key would let
	// the old key's events and the new key's overtake each other.
	for _, tt := range []struct {
		name string
		opts []stream.Option
	}{
		{name: "serial"},
		{name: "concurrent by table", opts: []stream.Option{stream.WithConcurrency(8), stream.WithOrderKey(func(ev cdc.Event) string { return ev.Relation })}},
	} {
		t.Run(tt.name, func(t *testing.T) { snapshotWithWritersAndRestarts(t, tt.opts...) })
	}
}

func snapshotWithWritersAndRestarts(t *testing.T, opts ...stream.Option) {
	rows, kills, writers, maxPiece, pieces := 3000, 0, 4, 700, 6
	if os.Getenv("RESUMABLE_PG_SOAK") != "" {
		rows, writers, maxPiece, pieces = 200000, 8, 20000, 20
	}
	dsn := pgtest.NewDB(t)
	slot := snapSetup(t, dsn, rows)
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(max(rows/20, 100)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	wg := churn(ctx, t, dsn, writers, rows+rows/5)
	rp := newReplica()
	store := &killable{Store: cursor.NewMemory(cdc.Cursor{})}
	rng := rand.New(rand.NewPCG(1, 2))
	// Pieces while the writers run, each ended by a kill or a stop, then
	// the writers stop and a sentinel marks the end.
	for i := range pieces {
		if err := runPiece(t, src, store, rp, rng.IntN(maxPiece)+1, i%2 == 1, opts...); err != nil {
			t.Fatal(err)
		}
		kills++
	}
	cancel()
	wg.Wait()
	replExec(t, dsn, "INSERT INTO sentinel VALUES (1)")
	kills += consumeUntilSentinel(t, src, store, rp, rng, maxPiece, opts...)
	want := tableRows(t, dsn, "items", "pairs")
	want["public.empty"] = nil
	got := map[string]map[string]string{}
	maps.Copy(got, rp.rows)
	delete(got, "public.sentinel")
	if len(got["public.empty"]) == 0 {
		got["public.empty"] = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replica (-table +replica):\n%s", diff)
	}
	if rp.snapshots < rows {
		t.Errorf("%d snapshot rows, want at least %d", rp.snapshots, rows)
	}
	if store.refused.Load() == 0 {
		t.Error("no kill lost a save")
	}
	t.Logf("%d rows, %d snapshot rows delivered, %d restarts", rows, rp.snapshots, kills)
}

func TestBackfillWithWritersAndRestarts(t *testing.T) {
	rows, writers, maxPiece, pieces := 3000, 4, 700, 4
	if os.Getenv("RESUMABLE_PG_SOAK") != "" {
		rows, writers, maxPiece, pieces = 200000, 8, 20000, 20
	}
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items, sentinel")
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(max(rows/20, 100)))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Backfill(pgtest.Ctx(t), "pairs"); !errors.Is(err, cdc.ErrInvalid) {
		t.Fatalf("Backfill(unpublished) = %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	wg := churn(ctx, t, dsn, writers, rows+rows/5)
	rp := newReplica()
	store := &killable{Store: cursor.NewMemory(cdc.Cursor{})}
	rng := rand.New(rand.NewPCG(3, 4))
	piece := func(i int) {
		if err := runPiece(t, src, store, rp, rng.IntN(maxPiece)+1, i%2 == 1); err != nil {
			t.Fatal(err)
		}
	}
	// The initial snapshot (of items), then pairs joins the publication
	// while the stream and the writers run, and is backfilled.
	for i := range 3 {
		piece(i)
	}
	replExec(t, dsn, "ALTER PUBLICATION pub ADD TABLE pairs")
	if err := src.Backfill(pgtest.Ctx(t), "public.pairs"); err != nil {
		t.Fatal(err)
	}
	for i := range pieces {
		piece(i)
	}
	cancel()
	wg.Wait()
	replExec(t, dsn, "INSERT INTO sentinel VALUES (1)")
	tail := consumeUntilSentinel(t, src, store, rp, rng, maxPiece)
	want := tableRows(t, dsn, "items", "pairs")
	got := map[string]map[string]string{}
	maps.Copy(got, rp.rows)
	delete(got, "public.sentinel")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replica (-table +replica):\n%s", diff)
	}
	if store.refused.Load() == 0 {
		t.Error("no kill lost a save")
	}
	t.Logf("%d rows, %d snapshot rows delivered, %d restarts", rows, rp.snapshots, tail+3+pieces)
}

func TestSnapshotTableWithoutKey(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, 10, "CREATE PUBLICATION pub FOR TABLE items")
	replExec(t, dsn, "CREATE TABLE nokey (v int)", "ALTER TABLE nokey REPLICA IDENTITY FULL", "ALTER PUBLICATION pub ADD TABLE nokey")
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Backfill(pgtest.Ctx(t), "nokey"); !errors.Is(err, cdc.ErrInvalid) || !strings.Contains(err.Error(), "no primary key") {
		t.Fatalf("Backfill(nokey) = %v, want ErrInvalid saying there is no key", err)
	}
	if err := src.Backfill(pgtest.Ctx(t), "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Backfill(missing) = %v, want an error naming it", err)
	}
	_, err = replRun(t, dsn, slot, cursor.NewMemory(cdc.Cursor{}), 100, cdc.WithSnapshot(0))
	if !errors.Is(err, cdc.ErrInvalid) || !strings.Contains(err.Error(), "public.nokey") {
		t.Fatalf("Run = %v, want ErrInvalid naming public.nokey", err)
	}
}

func TestSnapshotTableDropped(t *testing.T) {
	tests := []struct {
		name, sql string
	}{
		{name: "dropped", sql: "DROP TABLE items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { snapshotTableGone(t, tt.sql) })
	}
}

// snapshotTableGone runs sql half way through the chunked snapshot of
// items: the snapshot goes on with pairs.
func snapshotTableGone(t *testing.T, sql string) {
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, 50, "CREATE PUBLICATION pub FOR TABLE items, pairs")
	// A slot that exists: the snapshot is read in chunks (the snapshot a
	// new slot exports holds its tables until it has read them all).
	replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(10))
	if err != nil {
		t.Fatal(err)
	}
	store := cursor.NewMemory(cdc.Cursor{})
	rp := newReplica()
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	var snapshotted atomic.Bool
	hooks := stream.Hooks[cdc.Cursor]{OnCommit: func(e stream.CommitEvent[cdc.Cursor]) {
		if e.Cursor.Snapshot == "" && e.Cursor.LSN != 0 {
			snapshotted.Store(true)
			cancel()
		}
	}}
	r, err := cdc.NewResumer(src, store, stream.WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	// Half way through items, the table is dropped: the snapshot goes on
	// with pairs.
	n := 0
	err = r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
		rp.apply(ev)
		if n++; n == 15 {
			replExec(t, dsn, sql)
		}
		return nil
	})
	if !snapshotted.Load() || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want the end of the snapshot committed", err)
	}
	if got := len(rp.rows["public.items"]); got < 20 || got >= 50 {
		t.Errorf("%d rows of items delivered, want the chunks read before the drop (20 to 40)", got)
	}
	if diff := cmp.Diff(tableRows(t, dsn, "pairs")["public.pairs"], rp.rows["public.pairs"]); diff != "" {
		t.Errorf("pairs (-table +replica):\n%s", diff)
	}
}

func TestSnapshotExportedOnce(t *testing.T) {
	const rows = 2000
	dsn := pgtest.NewDB(t)
	slot := snapSetup(t, dsn, rows)
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(300))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	wg := churn(ctx, t, dsn, 2, rows)
	rp := newReplica()
	store := &killable{Store: cursor.NewMemory(cdc.Cursor{})}
	seen := map[string]bool{}
	var at []string
	changes := 0
	r, err := cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		rp.apply(ev)
		switch {
		case ev.Op == cdc.Snapshot:
			if changes > 0 {
				t.Fatalf("snapshot row %v after %d changes", ev.Cursor, changes)
			}
			k, _ := rowText(ev.New)
			if seen[ev.Relation+k] {
				t.Fatalf("snapshot row %s %s twice", ev.Relation, k)
			}
			seen[ev.Relation+k] = true
			if ev.Index != -1 || (len(at) > 0 && at[0] != ev.LSN.String()) {
				t.Fatalf("snapshot row at %v #%d, want every row at the slot's consistent point", ev.LSN, ev.Index)
			}
			at = append(at[:0], ev.LSN.String())
		default:
			if changes++; changes == 500 {
				return stream.ErrStop
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	if len(seen) < rows {
		t.Fatalf("%d snapshot rows, want at least %d", len(seen), rows)
	}
	replExec(t, dsn, "INSERT INTO sentinel VALUES (1)")
	consumeUntilSentinel(t, src, store, rp, rand.New(rand.NewPCG(9, 9)), 1<<30)
	got := map[string]map[string]string{}
	maps.Copy(got, rp.rows)
	delete(got, "public.sentinel")
	if diff := cmp.Diff(tableRows(t, dsn, "items", "pairs"), got); diff != "" {
		t.Fatalf("replica (-table +replica):\n%s", diff)
	}
}

// TestSnapshotServerFails breaks a snapshot's read, the first pass's COPY
// or a chunk's (the slot already there, so the snapshot is read by
// chunks): the server stops answering, the connection left open (stall),
// or the connection drops at the reply (cut). After a stall the idle
// watchdog closes the stream's connection, which must unblock the read;
// either way the stream goes on from a new connection to the last row.
func TestSnapshotServerFails(t *testing.T) {
	for _, tt := range []struct {
		name, match string
		slotFirst   bool
		cut         bool
	}{
		{name: "stall copy", match: "COPY (SELECT"},
		{name: "stall chunk", match: " LIMIT ", slotFirst: true},
		{name: "cut copy", match: "COPY (SELECT", cut: true},
		{name: "cut chunk", match: " LIMIT ", slotFirst: true, cut: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const rows = 2000
			dsn := pgtest.NewDB(t)
			slot := snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items")
			if tt.slotFirst {
				replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
			}
			host := "127.0.0.1:" + strconv.Itoa(pgtest.Shared(t).Port())
			p := pgtest.NewProxy(t, host)
			if tt.cut {
				p.Cut(tt.match)
			} else {
				p.Stall(tt.match)
			}
			src, err := cdc.NewSource(p.DSN(dsn, host), slot, "pub", cdc.WithSnapshot(0))
			if err != nil {
				t.Fatal(err)
			}
			r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}), stream.WithIdleTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			// A hang ends here, well before the test's deadline.
			ctx, cancel := context.WithTimeout(pgtest.Ctx(t), 30*time.Second)
			defer cancel()
			seen := map[string]bool{}
			err = r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
				if id, ok := ev.New.Get("id"); ok && ev.Op == cdc.Snapshot {
					seen[string(id)] = true
				}
				if len(seen) == rows {
					return stream.ErrStop
				}
				return nil
			})
			select {
			case <-p.Fired():
			default:
				t.Fatalf("the proxy broke no %q", tt.match)
			}
			if err != nil || len(seen) != rows {
				t.Fatalf("Run() = %v with %d of %d rows; want every row after the failure", err, len(seen), rows)
			}
		})
	}
}

// TestSnapshotChunkKeys reads a table by chunks of one row, so that every
// key becomes the "after" of the next chunk's query: keys of text with
// quotes, backslashes, tabs, newlines and COPY's NULL marker, of numeric,
// timestamptz and bytea, composite, come out each once, as the table holds
// them.
func TestSnapshotChunkKeys(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := fmt.Sprintf("snap_%d", replSlots.Add(1))
	replExec(t, dsn,
		"CREATE TABLE odd (k text, n numeric, ts timestamptz, b bytea, PRIMARY KEY (k, n, ts, b))",
		`INSERT INTO odd SELECT k, n, '2026-12-01 10:00:00+00'::timestamptz + g * interval '1 hour', decode(lpad(to_hex(g), 4, '0'), 'hex')
		FROM unnest(ARRAY['it''s', 'back\slash', E'tab\there', E'new\nline', '"quoted"', '\N', '', 'ünïcødé', 'a,b', E'\\\\N']) WITH ORDINALITY AS k(k, g0),
			unnest(ARRAY[1.50, -0.0, 1e10]) AS n, generate_series(1, 2) AS g`,
		"CREATE PUBLICATION pub FOR TABLE odd",
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')", // present: the snapshot is read by chunks
	)
	t.Cleanup(func() { awaitInactive(t, dsn, slot) })
	pg, err := pgconn.Connect(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pg.Exec(pgtest.Ctx(t), "SELECT k, n::text, ts::text, b::text FROM odd").ReadAll()
	pg.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, r := range res[0].Rows {
		want[fmt.Sprintf("%q", r)]++
	}
	got := map[string]int{}
	n := 0
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(1))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		if ev.Op != cdc.Snapshot {
			return fmt.Errorf("%v event before the snapshot's end", ev.Op)
		}
		var row [][]byte
		for i := range ev.New.Len() {
			_, v, _ := ev.New.Column(i)
			row = append(row, v)
		}
		got[fmt.Sprintf("%q", row)]++
		if n++; n == len(res[0].Rows) {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v after %d rows", err, n)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rows (-table +snapshot):\n%s", diff)
	}
}

// TestSnapshotTableRewritten rewrites a table the first pass has not read
// yet (the ALTER commits after the slot exported its snapshot): the
// rewritten table's rows are not visible to that snapshot, so they must be
// read another way, never delivered as an empty table.
func TestSnapshotTableRewritten(t *testing.T) {
	for _, tt := range []struct {
		name, sql string
	}{
		{name: "alter column type", sql: "ALTER TABLE pairs ALTER COLUMN b TYPE bigint"},
		{name: "add column volatile default", sql: "ALTER TABLE pairs ADD COLUMN r float8 DEFAULT random()"},
		{name: "drop column", sql: "ALTER TABLE pairs DROP COLUMN note"}, // no rewrite, but a column the snapshot has
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			// items is read first, and long enough that the stream cannot
			// read past it while the handler waits for the ALTER.
			slot := snapSetupPub(t, dsn, 5000, "CREATE PUBLICATION pub FOR TABLE items, pairs, sentinel")
			src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(100))
			if err != nil {
				t.Fatal(err)
			}
			rp := newReplica()
			ctx, cancel := context.WithCancel(pgtest.Ctx(t))
			defer cancel()
			var done atomic.Bool
			hooks := stream.Hooks[cdc.Cursor]{OnCommit: func(e stream.CommitEvent[cdc.Cursor]) {
				if rp.sentinel.Load() && e.Cursor.Snapshot == "" {
					done.Store(true)
					cancel()
				}
			}}
			r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}), stream.WithHooks(hooks))
			if err != nil {
				t.Fatal(err)
			}
			altered := false
			err = r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
				rp.apply(ev)
				if ev.Op == cdc.Snapshot && ev.Relation == "public.items" && !altered {
					altered = true // items is being read, pairs is not yet
					// A hang guard: the first pass locks a table it reads.
					replExec(t, dsn, "SET lock_timeout = '30s'", tt.sql, "INSERT INTO sentinel VALUES (1)")
				}
				return nil
			})
			if !done.Load() || !errors.Is(err, context.Canceled) {
				t.Fatalf("Run() = %v, want the sentinel and the snapshot's end committed", err)
			}
			if !altered {
				t.Fatal("no snapshot row of items: the ALTER never ran")
			}
			got := map[string]map[string]string{}
			maps.Copy(got, rp.rows)
			delete(got, "public.sentinel")
			if diff := cmp.Diff(tableRows(t, dsn, "items", "pairs"), got); diff != "" {
				t.Fatalf("replica (-table +replica):\n%s", diff)
			}
		})
	}
}

// TestSnapshotCursorSmall snapshots 60 tables, stopped and started again
// half way: every row's cursor is as small with 60 tables as with one (its
// progress names the table being read, not every table left), and every
// row arrives.
func TestSnapshotCursorSmall(t *testing.T) {
	const tables, rows = 60, 3
	for _, tt := range []struct {
		name      string
		slotFirst bool // the slot exists: the rows are read by chunks
	}{
		{name: "first pass"},
		{name: "chunks", slotFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			slot := fmt.Sprintf("small_%d", replSlots.Add(1))
			replExec(t, dsn,
				fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
					EXECUTE format('CREATE TABLE t%%s (id int PRIMARY KEY)', i);
					EXECUTE format('INSERT INTO t%%s SELECT generate_series(1, %d)', i);
				END LOOP; END $$`, tables, rows),
				"CREATE PUBLICATION pub FOR ALL TABLES")
			t.Cleanup(func() { awaitInactive(t, dsn, slot) })
			if tt.slotFirst {
				replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
			}
			src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(2))
			if err != nil {
				t.Fatal(err)
			}
			store := cursor.NewMemory(cdc.Cursor{})
			seen, longest := map[string]bool{}, 0
			for _, stopAt := range []int{tables * rows / 2, tables * rows} {
				r, err := cdc.NewResumer(src, store)
				if err != nil {
					t.Fatal(err)
				}
				err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
					id, _ := ev.New.Get("id")
					seen[ev.Relation+" "+string(id)] = true
					longest = max(longest, len(ev.Cursor.Snapshot))
					if len(seen) >= stopAt {
						return stream.ErrStop
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(seen) != tables*rows {
				t.Fatalf("%d rows, want %d", len(seen), tables*rows)
			}
			if longest > 100 {
				t.Fatalf("a cursor's snapshot progress of %d bytes, want at most 100 (one table's name and a key)", longest)
			}
		})
	}
}
