package cdc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

func TestReplTypedValuesAndMessages(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"CREATE TYPE color AS ENUM ('red', 'green')",
		"CREATE TABLE typed (id bigint, k text, n numeric(10,2), j jsonb, at timestamptz, u uuid, b bytea, a int[], c color, big text, PRIMARY KEY (id, k))",
		"ALTER TABLE typed REPLICA IDENTITY FULL",
		"ALTER PUBLICATION pub ADD TABLE typed",
		"BEGIN",
		"INSERT INTO typed VALUES (1, 'x', 12.5, '{\"a\": [1, 2]}', '2026-01-02 03:04:05+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x0102', '{1,NULL,3}', 'red', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3000) g))",
		"SELECT pg_logical_emit_message(true, 'outbox', 'paid')",
		"SELECT pg_logical_emit_message(true, 'ignored', 'no')",
		"COMMIT",
		"UPDATE typed SET n = NULL WHERE id = 1",
		"SELECT pg_logical_emit_message(false, 'outbox', 'now')",
	)
	got, err := replRun(t, dsn, slot, cursor.NewMemory(cdc.Cursor{}), 4, cdc.WithMessages("outbox"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Op      cdc.Op
		Index   int
		TxEnd   bool
		Prefix  string
		Content string
	}
	var rows []row
	for _, ev := range got {
		rows = append(rows, row{Op: ev.Op, Index: ev.Index, TxEnd: ev.TxEnd, Prefix: ev.Prefix, Content: string(ev.Content)})
		if ev.Op != cdc.Message || ev.Index >= 0 {
			if since := time.Since(ev.CommitTime); since < 0 || since > time.Hour {
				t.Errorf("%v: CommitTime = %v, want the commit's time", ev.Op, ev.CommitTime)
			}
		}
	}
	want := []row{
		{Op: cdc.Insert, Index: 0},
		// Index 2 is the message of prefix "ignored": numbered, not
		// delivered; the message before it is the last event of its
		// transaction.
		{Op: cdc.Message, Index: 1, TxEnd: true, Prefix: "outbox", Content: "paid"},
		{Op: cdc.Update, Index: 0, TxEnd: true},
		{Op: cdc.Message, Index: -1, TxEnd: true, Prefix: "outbox", Content: "now"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	ins := got[0].New
	j, err := ins.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"id":1,"k":"x","n":"12.50","j":{"a": [1, 2]},"at":"2026-01-02 03:04:05+00","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","b":"\\x0102","a":"{1,NULL,3}","c":"red","big":"`
	if len(j) < len(wantJSON) || string(j[:len(wantJSON)]) != wantJSON {
		t.Fatalf("MarshalJSON = %.300s, want it to begin %s", j, wantJSON)
	}
	keys := []bool{}
	for i := range ins.Len() {
		keys = append(keys, ins.Key(i))
	}
	// REPLICA IDENTITY FULL: every column is part of the identity.
	if diff := cmp.Diff([]bool{true, true, true, true, true, true, true, true, true, true}, keys); diff != "" {
		t.Errorf("Key (-want +got):\n%s", diff)
	}
	if oid, mod := ins.Type(2); oid != 1700 || mod != (10<<16|2)+4 {
		t.Errorf("Type(n) = %d, %d; want 1700, numeric(10,2)'s modifier", oid, mod)
	}
	vals := map[string]any{}
	for i := range ins.Len() {
		name, _, _ := ins.Column(i)
		v, err := ins.Value(i)
		if err != nil {
			t.Fatalf("Value(%s) = %v", name, err)
		}
		vals[name] = v
	}
	if vals["id"] != int64(1) || vals["c"] != "red" || string(vals["b"].([]byte)) != "\x01\x02" {
		t.Errorf("values = %v", vals)
	}
	if u, ok := vals["u"].([16]byte); !ok || u[0] != 0xa0 {
		t.Errorf("uuid = %#v, want [16]byte", vals["u"])
	}
	if a, ok := vals["a"].([]any); !ok || len(a) != 3 || a[1] != nil {
		t.Errorf("int[] = %#v, want [1 <nil> 3]", vals["a"])
	}
	// The update left big unchanged: filled from the FULL old row.
	big, err := got[2].New.Value(9)
	if s, ok := big.(string); err != nil || !ok || len(s) != 96000 {
		t.Errorf("unchanged TOASTed value = %T, %v; want the old row's string", big, err)
	}
}

func TestWithSnapshotInvalid(t *testing.T) {
	_, err := cdc.NewSource("postgres://u@127.0.0.1:1/db", "s1", "pub", cdc.WithSnapshot(-1))
	if !errors.Is(err, cdc.ErrInvalid) || !errors.Is(err, stream.ErrInvalidOption) {
		t.Fatalf("NewSource(WithSnapshot(-1)) = %v, want ErrInvalid", err)
	}
}

// A backfill asked for is kept by the Source until the Store holds a
// cursor taken after the request: a stream that stops before saving one
// still does it on its next run.
func TestBackfillRequestSurvivesAStopBeforeASave(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, 30, "CREATE PUBLICATION pub FOR TABLE items, pairs")
	replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(10))
	if err != nil {
		t.Fatal(err)
	}
	store := cursor.NewMemory(cdc.Cursor{})
	// A first run that handles one change and stops.
	replExec(t, dsn, "INSERT INTO items VALUES (1000, 1)")
	if _, err := replRun(t, dsn, slot, store, 1); err != nil {
		t.Fatal(err)
	}
	if err := src.Backfill(pgtest.Ctx(t), "pairs"); err != nil {
		t.Fatal(err)
	}
	// A run whose handler fails at once: nothing saved.
	r, err := cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := r.Run(pgtest.Ctx(t), func(context.Context, cdc.Event) error { return errclass.Permanent(boom) }); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	// The next run of the same Source delivers the backfill.
	n := 0
	r, err = cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		if ev.Op == cdc.Snapshot && ev.Relation == "public.pairs" {
			if n++; n == 15 {
				return stream.ErrStop
			}
		}
		return nil
	})
	if err != nil || n != 15 {
		t.Fatalf("Run = %v after %d rows of pairs, want the 15 rows of the backfill", err, n)
	}
}

// Snapshot rows have the columns changes have: pgoutput leaves generated
// columns out, and so does the snapshot; the key flags and types match.
func TestSnapshotColumnsMatchChanges(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, 0, "CREATE PUBLICATION pub FOR TABLE items")
	replExec(t, dsn,
		"CREATE TABLE gen (id int PRIMARY KEY, v numeric(8,2), g numeric GENERATED ALWAYS AS (v * 2) STORED, note text)",
		"INSERT INTO gen (id, v, note) VALUES (1, 1.5, NULL)",
		"ALTER PUBLICATION pub ADD TABLE gen",
	)
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(0))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		t.Fatal(err)
	}
	type col struct {
		Name string
		OID  uint32
		Mod  int32
		Key  bool
		JSON string
	}
	cols := func(tu cdc.Tuple) []col {
		var out []col
		for i := range tu.Len() {
			name, _, _ := tu.Column(i)
			oid, mod := tu.Type(i)
			out = append(out, col{Name: name, OID: oid, Mod: mod, Key: tu.Key(i)})
		}
		j, err := tu.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, col{JSON: string(j)})
		return out
	}
	var snap, ins []col
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		switch ev.Op {
		case cdc.Snapshot:
			snap = cols(ev.New)
			replExec(t, dsn, "DELETE FROM gen", "INSERT INTO gen (id, v, note) VALUES (1, 1.5, NULL)")
		case cdc.Insert:
			ins = cols(ev.New)
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ins, snap); diff != "" {
		t.Fatalf("snapshot row's columns (-change +snapshot):\n%s", diff)
	}
	if len(snap) != 4 || snap[3].JSON != `{"id":1,"v":"1.50","note":null}` {
		t.Fatalf("snapshot row = %+v, want id, v, note", snap)
	}
}

// The key of a table whose primary key INCLUDEs a column is the key
// columns only, in the first pass, in chunks and in changes alike: a chunk
// matched by (id, v) keeps a row an update of v made stale.
func TestSnapshotKeyInclude(t *testing.T) {
	for _, tt := range []struct {
		name      string
		slotFirst bool // the slot exists: the rows are read by chunks
	}{
		{name: "first pass"},
		{name: "chunks", slotFirst: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dsn := pgtest.NewDB(t)
			slot := snapSetupPub(t, dsn, 0, "CREATE PUBLICATION pub FOR TABLE items")
			replExec(t, dsn,
				"CREATE TABLE inc (id int, v int, PRIMARY KEY (id) INCLUDE (v))",
				"INSERT INTO inc SELECT g, g FROM generate_series(1, 5) g",
				"ALTER PUBLICATION pub ADD TABLE inc")
			if tt.slotFirst {
				replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
			}
			src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(2))
			if err != nil {
				t.Fatal(err)
			}
			r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
			if err != nil {
				t.Fatal(err)
			}
			keys := func(tu cdc.Tuple) string {
				var k []string
				for i := range tu.Len() {
					if name, _, _ := tu.Column(i); tu.Key(i) {
						k = append(k, name)
					}
				}
				return strings.Join(k, ",")
			}
			got := map[string]int{}
			n := 0
			err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
				got[ev.Op.String()+" "+keys(ev.New)]++
				switch n++; {
				case n == 5:
					replExec(t, dsn, "INSERT INTO inc VALUES (6, 6)")
				case ev.Op == cdc.Insert:
					return stream.ErrStop
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]int{"SNAPSHOT id": 5, "INSERT id": 1}, got); diff != "" {
				t.Fatalf("key columns by event (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSnapshotTypesPerChunk changes a column's type while a table is read
// by chunks: every row carries the type it was read with, so that Type,
// Value and MarshalJSON agree with its text.
func TestSnapshotTypesPerChunk(t *testing.T) {
	const rows = 100
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items")
	replExec(t, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')") // present: read by chunks
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(10))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		t.Fatal(err)
	}
	n, texts := 0, 0
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		if ev.Op != cdc.Snapshot {
			return fmt.Errorf("%v event during the snapshot", ev.Op)
		}
		if n++; n == 1 { // between two chunks, whichever the stream has read
			replExec(t, dsn, "ALTER TABLE items ALTER COLUMN v TYPE text USING 'x' || v")
		}
		v, _ := ev.New.Get("v")
		oid, _ := ev.New.Type(1)
		val, verr := ev.New.Value(1)
		j, jerr := ev.New.MarshalJSON()
		want := uint32(23) // int4
		if strings.HasPrefix(string(v), "x") {
			want, texts = 25, texts+1 // text
		}
		if oid != want || verr != nil || jerr != nil || !json.Valid(j) {
			return fmt.Errorf("row v=%s: Type() = %d, want %d; Value() = %v, %v; MarshalJSON() = %s, %v", v, oid, want, val, verr, j, jerr)
		}
		if n == rows {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if texts == 0 {
		t.Fatal("no row read after the ALTER")
	}
}
