package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// foreign is a cursor of another server: the next Open is
// stream.ErrSourceChanged, which a resync follows.
func foreign(slot string) cdc.Cursor {
	return cdc.Cursor{LSN: 0x1000000, Index: -1, System: "1", Timeline: 1, Slot: slot}
}

// copyRow applies an event to the table copy: a snapshot row or an insert.
func copyRow(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
	if ev.Op != cdc.Snapshot && ev.Op != cdc.Insert {
		return nil
	}
	id, _ := ev.New.Get("id")
	_, err := tx.Exec(ctx, "INSERT INTO copy (id) VALUES ($1::text::int) ON CONFLICT DO NOTHING", string(id))
	return err
}

// TestResyncInterruptedTransactional: a Transactional handler commits the
// cursor of every replayed row; a crash 50 rows into a 300-row replay must
// not leave the next run streaming on after those 50: it resyncs again.
func TestResyncInterruptedTransactional(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"CREATE TABLE copy (id int PRIMARY KEY)",
		"INSERT INTO items (id) SELECT g FROM generate_series(1, 300) g")
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	newStore := func() *postgres.Store[cdc.Cursor] {
		s, err := postgres.NewStore(pool, "items", cursor.JSON[cdc.Cursor](), cdc.Cursor{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seed := newStore()
	if _, err := seed.Load(pgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := seed.Save(pgtest.Ctx(t), foreign(slot)); err != nil {
		t.Fatal(err)
	}
	run := func(store *postgres.Store[cdc.Cursor], fn func(context.Context, pgx.Tx, cdc.Event) error) error {
		src, err := cdc.NewSource(dsn, slot, "pub")
		if err != nil {
			t.Fatal(err)
		}
		r, err := cdc.NewResumer(src, store, stream.WithResync(cdc.Resync(src, 7)))
		if err != nil {
			t.Fatal(err)
		}
		return r.Run(pgtest.Ctx(t), postgres.Transactional(store, cdc.Extract, fn))
	}
	errCrash := errors.New("crash")
	n := 0
	err = run(newStore(), func(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
		if ev.Op == cdc.Snapshot {
			if n++; n == 51 {
				return errclass.Permanent(errCrash)
			}
		}
		return copyRow(ctx, tx, ev)
	})
	if !errors.Is(err, errCrash) {
		t.Fatalf("first Run() = %v, want the crash", err)
	}
	// A change after the crash: streamed on without a second resync, it
	// would be the next event.
	replExec(t, dsn, "INSERT INTO items (id) VALUES (1000)")
	var ops []string
	err = run(newStore(), func(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
		ops = append(ops, ev.Op.String())
		if ev.Op == cdc.ResyncEnd || ev.Op == cdc.Insert {
			return stream.ErrStop
		}
		return copyRow(ctx, tx, ev)
	})
	if err != nil {
		t.Fatalf("second Run() = %v, want nil", err)
	}
	var rows int
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM copy").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 301 || len(ops) == 0 || ops[0] != "RESYNC-START" {
		t.Fatalf("copy has %d rows after the restart (first events %v), want 301: the replay done again", rows, ops[:min(len(ops), 3)])
	}
}

// TestResyncMixedCasePublication: a publication created as MyPub is mypub
// to the server; NewSource takes the name as SQL does, and Resync replays
// its tables.
func TestResyncMixedCasePublication(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"CREATE PUBLICATION MyPub FOR TABLE items",
		"INSERT INTO items (id) SELECT g FROM generate_series(1, 20) g")
	src, err := cdc.NewSource(dsn, slot, "MyPub")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(foreign(slot)), stream.WithResync(cdc.Resync(src, 0)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		if ev.Op == cdc.Snapshot {
			id, _ := ev.New.Get("id")
			got = append(got, string(id))
		}
		if ev.Op == cdc.ResyncEnd {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil || len(got) != 20 {
		t.Fatalf("Run() = %v after %d snapshot rows (%s), want 20", err, len(got), fmt.Sprint(got))
	}
}

// TestSnapshotRowsAsPublished: a resync's replay, the first pass and the
// chunks deliver what pgoutput would: the publication's column list
// (secret left out) and row filter (v > 2), no generated column, and the
// key flags of the key's columns.
func TestSnapshotRowsAsPublished(t *testing.T) {
	for _, tt := range []struct {
		name      string
		resync    bool // a resync's replay; else WithSnapshot
		slotFirst bool // WithSnapshot with the slot there: read by chunks
	}{
		{name: "resync", resync: true},
		{name: "first pass"},
		{name: "chunks", slotFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			slot := fmt.Sprintf("pubrows_%d", replSlots.Add(1))
			replExec(t, dsn,
				"CREATE TABLE sec (id int PRIMARY KEY, v int, secret text)",
				"CREATE TABLE gen (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v * 2) STORED)",
				"INSERT INTO sec SELECT g, g, 's' || g FROM generate_series(1, 5) g",
				"INSERT INTO gen (id, v) SELECT g, g FROM generate_series(1, 2) g",
				"CREATE PUBLICATION pub FOR TABLE sec (id, v) WHERE (v > 2), gen")
			t.Cleanup(func() { awaitInactive(t, dsn, slot) })
			if tt.slotFirst {
				replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
			}
			var opts []cdc.SourceOption
			if !tt.resync {
				opts = append(opts, cdc.WithSnapshot(2))
			}
			src, err := cdc.NewSource(dsn, slot, "pub", opts...)
			if err != nil {
				t.Fatal(err)
			}
			start, sopts := cdc.Cursor{}, []stream.Option(nil)
			if tt.resync {
				start, sopts = foreign(slot), []stream.Option{stream.WithResync(cdc.Resync(src, 2))}
			}
			r, err := cdc.NewResumer(src, cursor.NewMemory(start), sopts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
				if ev.Op != cdc.Snapshot {
					return nil
				}
				row := ev.Relation
				for i := range ev.New.Len() {
					name, v, _ := ev.New.Column(i)
					if ev.New.Key(i) {
						name = "*" + name
					}
					row += " " + name + "=" + string(v)
				}
				if got = append(got, row); len(got) == 5 {
					return stream.ErrStop
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := []string{"public.gen *id=1 v=1", "public.gen *id=2 v=2", "public.sec *id=3 v=3", "public.sec *id=4 v=4", "public.sec *id=5 v=5"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("snapshot rows (-want +got):\n%s", diff)
			}
		})
	}
}
