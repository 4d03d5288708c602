package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

func newStore(t testing.TB, pool *pgxpool.Pool, name string, opts ...postgres.StoreOption) *postgres.Store[int64] {
	t.Helper()
	s, err := postgres.NewStore(pool, name, cursor.Int64(), 0, opts...)
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	return s
}

func load(t testing.TB, s *postgres.Store[int64]) int64 {
	t.Helper()
	c, err := s.Load(pgtest.Ctx(t))
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	return c
}

func save(t testing.TB, s *postgres.Store[int64], c int64) {
	t.Helper()
	if err := s.Save(pgtest.Ctx(t), c); err != nil {
		t.Fatalf("Save(%d) = %v", c, err)
	}
}

func TestStoreLoadSave(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	s, err := postgres.NewStore(pool, "orders", cursor.Int64(), 42)
	if err != nil {
		t.Fatalf("NewStore() = %v", err)
	}
	if got := load(t, s); got != 42 {
		t.Fatalf("Load() on no table = %d, want the initial 42", got)
	}
	save(t, s, 43)
	save(t, s, 44)
	if got := load(t, newStore(t, pool, "orders")); got != 44 {
		t.Errorf("Load() by another Store = %d, want 44", got)
	}
	if got := load(t, newStore(t, pool, "other")); got != 0 {
		t.Errorf("Load() of another stream = %d, want 0", got)
	}
	var version int64
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT version FROM resumable_cursors WHERE stream = 'orders'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != 4 { // the first Load inserts, two Saves, another Store's Load fences
		t.Errorf("version after a Load, two Saves and a Load = %d, want 4", version)
	}
}

func TestStoreSaveBeforeLoad(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	save(t, newStore(t, pool, "s"), 5)
	s := newStore(t, pool, "s")
	save(t, s, 6) // takes the row's version as its base
	if got := load(t, s); got != 6 {
		t.Errorf("Load() = %d, want 6", got)
	}
}

func TestStoreCursorChanged(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	a, b := newStore(t, pool, "s"), newStore(t, pool, "s")
	load(t, b)
	load(t, a) // a takes the stream over
	save(t, a, 1)
	err := b.Save(pgtest.Ctx(t), 2)
	if !errors.Is(err, postgres.ErrCursorChanged) {
		t.Fatalf("Save() by the fenced Store = %v, want ErrCursorChanged", err)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want Fail", err, d)
	}
	if got := peek(t, pool, "s"); got != 1 {
		t.Errorf("cursor after the refused Save = %d, want 1", got)
	}
	// Once it reloaded, the second Store may write again.
	if got := load(t, b); got != 1 {
		t.Fatalf("Load() = %d, want 1", got)
	}
	save(t, b, 2)
	if err := a.Save(pgtest.Ctx(t), 3); !errors.Is(err, postgres.ErrCursorChanged) {
		t.Errorf("Save() by the first Store after the second wrote = %v, want ErrCursorChanged", err)
	}
}

// TestStoreLoadFences: a Load takes the stream over even when the row did
// not exist and the new owner writes nothing.
func TestStoreLoadFences(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	a, b := newStore(t, pool, "s"), newStore(t, pool, "s")
	load(t, a)
	load(t, b)
	if err := a.Save(pgtest.Ctx(t), 1); !errors.Is(err, postgres.ErrCursorChanged) {
		t.Errorf("Save() by a Store another one's Load fenced = %v, want ErrCursorChanged", err)
	}
	save(t, b, 1)
}

// peek reads the cursor of stream name without a Store (which would take
// the stream over).
func peek(t testing.TB, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var data []byte
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT cursor FROM resumable_cursors WHERE stream = $1", name).Scan(&data); err != nil {
		t.Fatalf("reading the cursor of %q: %v", name, err)
	}
	c, err := cursor.Int64().Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStoreRowDeleted(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	s := newStore(t, pool, "s")
	load(t, s)
	save(t, s, 1)
	execSQL(t, pool, "DELETE FROM resumable_cursors")
	if err := s.Save(pgtest.Ctx(t), 2); !errors.Is(err, postgres.ErrCursorChanged) {
		t.Errorf("Save() after the row was deleted = %v, want ErrCursorChanged", err)
	}
}

func TestStoreSameCursorNoRoundTrip(t *testing.T) {
	pool, count := newPool(t, pgtest.NewDB(t))
	s := newStore(t, pool, "s")
	load(t, s)
	save(t, s, 7)
	before := count.n.Load()
	save(t, s, 7)
	if got := count.n.Load() - before; got != 0 {
		t.Errorf("Save() of the stored cursor sent %d statements, want 0", got)
	}
	save(t, s, 8)
	if got := count.n.Load() - before; got != 1 {
		t.Errorf("Save() of a new cursor sent %d statements, want 1", got)
	}
}

func TestStoreWithTable(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool, `CREATE SCHEMA "Ops"`)
	s := newStore(t, pool, "s", postgres.WithTable("Ops.Cursors"))
	load(t, s)
	save(t, s, 9)
	var got int64
	if err := pool.QueryRow(pgtest.Ctx(t), `SELECT version FROM "Ops"."Cursors" WHERE stream = 's'`).Scan(&got); err != nil {
		t.Fatalf("reading the quoted table: %v", err)
	}
	if got != 2 {
		t.Errorf("version = %d, want 2 (Load, Save)", got)
	}
}

func TestNewStoreInvalid(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	for _, tc := range []struct {
		name   string
		pool   *pgxpool.Pool
		stream string
		codec  cursor.Codec[int64]
		opts   []postgres.StoreOption
	}{
		{name: "nil pool", stream: "s", codec: cursor.Int64()},
		{name: "nil codec", pool: pool, stream: "s"},
		{name: "empty name", pool: pool, codec: cursor.Int64()},
		{name: "quote in table", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable(`a"b`)}},
		{name: "three parts", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable("a.b.c")}},
		{name: "empty table", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable("")}},
		{name: "empty part", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable("a.")}},
		{name: "too long", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable(strings.Repeat("x", 64))}},
		{name: "semicolon", pool: pool, stream: "s", codec: cursor.Int64(), opts: []postgres.StoreOption{postgres.WithTable("t;drop")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgres.NewStore(tc.pool, tc.stream, tc.codec, 0, tc.opts...)
			if !errors.Is(err, postgres.ErrInvalid) || !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("NewStore() = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestStoreNoPrivilege(t *testing.T) {
	dsn := pgtest.NewDB(t)
	admin, _ := newPool(t, dsn)
	// PostgreSQL 15 grants no CREATE on schema public to ordinary roles.
	execSQL(t, admin, "DROP ROLE IF EXISTS reader", "CREATE ROLE reader LOGIN")
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP ROLE reader"); err != nil {
			t.Errorf("DROP ROLE reader: %v", err)
		}
	})
	pool, _ := newPool(t, strings.Replace(dsn, "postgres://postgres@", "postgres://reader@", 1))
	s := newStore(t, pool, "s", postgres.WithTable("my_cursors"))
	_, err := s.Load(pgtest.Ctx(t))
	if err == nil || !strings.Contains(err.Error(), "my_cursors") {
		t.Fatalf("Load() without CREATE privilege = %v, want an error naming my_cursors", err)
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want Fail", err, d)
	}
	if err := s.Save(pgtest.Ctx(t), 1); err == nil || !strings.Contains(err.Error(), "my_cursors") {
		t.Errorf("Save() without CREATE privilege = %v, want an error naming my_cursors", err)
	}
}

func TestStoreCorruptRow(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	save(t, newStore(t, pool, "s"), 1)
	execSQL(t, pool, `UPDATE resumable_cursors SET cursor = 'not a number'`)
	_, err := newStore(t, pool, "s").Load(pgtest.Ctx(t))
	if err == nil {
		t.Fatalf("Load() of a garbled row = nil, want an error")
	}
	if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want Fail", err, d)
	}
}
