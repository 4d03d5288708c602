package cdc

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// Open of a Source that may resume a snapshot returns with the snapshot's
// side connection made (while the replication connection started), so the
// first chunk waits for no connection; a Source with no snapshot makes
// none.
func TestOpenMakesTheSideConnection(t *testing.T) {
	dsn := pgtest.NewDB(t)
	ctx := pgtest.Ctx(t)
	pg, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.Background())
	// A slot made by hand: the snapshot is read by chunks from the start.
	for _, q := range []string{
		"CREATE TABLE items (id int PRIMARY KEY)",
		"INSERT INTO items SELECT generate_series(1, 5)",
		"CREATE PUBLICATION pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('side_snap', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('side_plain', 'pgoutput')",
	} {
		if _, err := pg.Exec(ctx, q).ReadAll(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, tc := range []struct {
		name     string
		slot     string
		opts     []SourceOption
		wantSide bool
	}{
		{name: "snapshot", slot: "side_snap", opts: []SourceOption{WithSnapshot(0)}, wantSide: true},
		{name: "no snapshot", slot: "side_plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewSource(dsn, tc.slot, "pub", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := src.Open(ctx, Cursor{})
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			c := sc.(*conn)
			if got := c.snap.side != nil; got != tc.wantSide {
				t.Errorf("after Open, side connection made = %v, want %v", got, tc.wantSide)
			}
			if tc.wantSide { // and it is the one the first chunk reads
				ev, err := sc.Recv(ctx)
				if err != nil || ev.Op != Snapshot {
					t.Fatalf("Recv() = %v %v, %v, want a snapshot row", ev.Op, ev.Relation, err)
				}
			}
		})
	}
}
