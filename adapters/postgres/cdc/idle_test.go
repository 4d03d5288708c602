package cdc_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// soak reports whether the long versions of the soak tests run
// (RESUMABLE_PG_SOAK=1).
func soak() bool { return os.Getenv("RESUMABLE_PG_SOAK") == "1" }

// walLSN returns the server's current WAL insert position.
func walLSN(t testing.TB, pool *pgxpool.Pool) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// TestIdleStreamQuiet runs a Transactional relay whose Store is in the
// database it replicates, with nothing written by anyone: its own saves
// must not feed progress events (before: thousands of saves a second).
// Then it writes 40 MB to a table the publication does not publish: the
// slot must still let that WAL go. RESUMABLE_PG_SOAK=1: 60s idle at the
// default status interval (10s); otherwise 3s at 250ms.
func TestIdleStreamQuiet(t *testing.T) {
	idle, interval := 3*time.Second, 250*time.Millisecond
	if soak() {
		idle, interval = 60*time.Second, 10*time.Second
	}
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	pool, store := relayStore(t, dsn)
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithStatusInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 1)
	r, err := cdc.NewResumer(src, store, stream.WithHooks(stream.Hooks[cdc.Cursor]{
		OnConnect: func(stream.ConnectEvent[cdc.Cursor]) {
			select {
			case opened <- struct{}{}:
			default:
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, postgres.Transactional(store, cdc.Extract, func(context.Context, pgx.Tx, cdc.Event) error {
			return errors.New("no change expected")
		}))
	}()
	<-opened
	version := func() int64 {
		var v int64
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT version FROM resumable_cursors WHERE stream = 'relay'").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v0, wal0, start := version(), walLSN(t, pool), time.Now()
	time.Sleep(idle) // the quiet period measured: nothing waits on it
	v1, wal1, took := version(), walLSN(t, pool), time.Since(start)
	saves := v1 - v0
	t.Logf("idle %v at status interval %v: %d saves, WAL grew %d bytes", took.Round(time.Millisecond), interval, saves, wal1-wal0)
	if limit := int64(took/interval) + 1; saves > limit {
		t.Errorf("%d saves in %v of idleness, want at most one per status interval (%d)", saves, took, limit)
	}

	// 40 MB the publication does not publish: the slot lets it go.
	for range 40 {
		if _, err := pool.Exec(pgtest.Ctx(t), "INSERT INTO other (note) SELECT repeat('x', 1000) FROM generate_series(1, 1000)"); err != nil {
			t.Fatal(err)
		}
	}
	written := time.Now()
	replUntil(t, "the slot to retain under 1 MiB of WAL", func() bool {
		var retained int64
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&retained); err != nil {
			t.Fatal(err)
		}
		return retained < 1<<20
	})
	t.Logf("40 MB written to an unpublished table: the slot retained under 1 MiB %v later", time.Since(written).Round(time.Millisecond))
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
}
