package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// noKeepaliveDSN returns dsn with wal_sender_timeout off for the
// replication connection: the server then never asks for a status update,
// and only the Source decides when it confirms.
func noKeepaliveDSN(dsn string) string {
	return dsn + "&options=-c%20wal_sender_timeout%3D0"
}

// A saved cursor is confirmed to the server soon after the save, not at
// the next status interval (an hour here): a restart then gets again at
// most what was not saved.
func TestConfirmSoonAfterSave(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	src, err := cdc.NewSource(noKeepaliveDSN(dsn), slot, "pub", cdc.WithStatusInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	store := cursor.NewMemory(cdc.Cursor{})
	r, err := cdc.NewResumer(src, store, stream.WithCheckpointEvery(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	var handled atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(context.Context, cdc.Event) error {
			handled.Add(1)
			return nil
		})
	}()
	before := confirmedFlush(t, dsn, slot)
	for i := range 3 {
		replExec(t, dsn, fmt.Sprintf("INSERT INTO items (id) VALUES (%d)", i+1))
		n := int64(i + 1)
		replUntil(t, "the insert handled", func() bool { return handled.Load() >= n })
		saved, err := store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		replUntil(t, fmt.Sprintf("confirmed_flush_lsn at the saved %v", saved.LSN), func() bool {
			return confirmedFlush(t, dsn, slot) >= saved.LSN
		})
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if after := confirmedFlush(t, dsn, slot); after <= before {
		t.Errorf("confirmed_flush_lsn %v, not past %v", after, before)
	}
}

// killedStore saves through st until killed, and then nothing more: a
// process that died.
type killedStore struct {
	cursor.Store[cdc.Cursor]
	killed atomic.Bool
	last   atomic.Pointer[cdc.Cursor]
}

func (k *killedStore) Save(ctx context.Context, c cdc.Cursor) error {
	if k.killed.Load() {
		return context.Canceled
	}
	if err := k.Store.Save(ctx, c); err != nil {
		return err
	}
	k.last.Store(&c)
	return nil
}

// BenchmarkRestartResend measures what a restart gets again: a relay
// saving every 100ms (the default status interval of 10s) reads one-row
// transactions written at about 500/s and is killed after a while; it
// reports the changes the slot would send again that the saved cursor
// covers (the consumer skips them, the server reads and sends them).
func BenchmarkRestartResend(b *testing.B) {
	dsn := pgtest.NewDB(b)
	slot := replSetup(b, dsn)
	var resent, total float64
	for i := range b.N {
		src, err := cdc.NewSource(dsn, slot, "pub")
		if err != nil {
			b.Fatal(err)
		}
		store := &killedStore{Store: cursor.NewMemory(cdc.Cursor{})}
		r, err := cdc.NewResumer(src, store, stream.WithCheckpointInterval(100*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(pgtest.Ctx(b))
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx, func(context.Context, cdc.Event) error { return nil }) }()
		wconn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		tick := time.NewTicker(2 * time.Millisecond)
		for j := range 1500 { // about 3 s
			<-tick.C
			if _, err := wconn.Exec(ctx, "INSERT INTO items (id) VALUES ($1)", i*1_000_000+j); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		wconn.Close(context.Background())
		store.killed.Store(true)
		cancel()
		<-done
		awaitInactive(b, dsn, slot)
		last := store.last.Load()
		if last == nil {
			b.Fatal("nothing saved")
		}
		var n int
		conn, err := pgx.Connect(pgtest.Ctx(b), dsn)
		if err != nil {
			b.Fatal(err)
		}
		err = conn.QueryRow(pgtest.Ctx(b), `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
			'proto_version', '1', 'publication_names', 'pub') WHERE lsn <= $2::text::pg_lsn AND get_byte(data, 0) = 73`,
			slot, last.LSN.String()).Scan(&n)
		if err == nil { // the run's changes consumed: the next starts from them
			_, err = conn.Exec(pgtest.Ctx(b), "SELECT pg_replication_slot_advance($1, $2::text::pg_lsn)", slot, last.LSN.String())
		}
		conn.Close(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		resent += float64(n)
		total += 1500
	}
	b.ReportMetric(resent/float64(b.N), "resent/restart")
	b.ReportMetric(total/float64(b.N), "written/restart")
}

// Health names a backfill chunk that waits for its watermark, with the WAL
// left before it, while the stream reads the changes committed before the
// chunk was read; and nothing once the stream ended.
func TestHealthSnapshotWait(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := pgtest.Ctx(t)
	gate, release := make(chan struct{}), make(chan struct{})
	var waiting cdc.Health
	var checked, held bool
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(ctx context.Context, ev cdc.Event) error {
			if !held {
				held = true
				close(gate) // the first change: hold the stream here
				<-release
			}
			switch {
			case ev.Op == cdc.Snapshot:
				return stream.ErrStop
			case !checked && ev.Cursor.Snapshot != "": // the backfill is under way
				checked = true
				h, err := src.Health(ctx)
				if err != nil {
					return err
				}
				waiting = h
			}
			return nil
		})
	}()
	replExec(t, dsn, "INSERT INTO items (id) VALUES (0)")
	<-gate
	// Two large transactions: the stream stops reading inside the first
	// (its read-ahead is full) and reads the backfill's chunk after it;
	// the chunk waits for the second.
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 5000) g",
		"INSERT INTO items (id) SELECT g FROM generate_series(5001, 25000) g")
	if err := src.Backfill(ctx, "items"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if !checked || waiting.SnapshotWaitTable != "public.items" || waiting.SnapshotWaitBytes <= 0 {
		t.Errorf("Health while the backfill's chunk waits: table %q, %d bytes left (checked %t); want public.items, more than 0",
			waiting.SnapshotWaitTable, waiting.SnapshotWaitBytes, checked)
	}
	h, err := src.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.SnapshotWaitTable != "" || h.SnapshotWaitBytes != 0 {
		t.Errorf("Health after Run: table %q, %d bytes, want none", h.SnapshotWaitTable, h.SnapshotWaitBytes)
	}
}

// A restart logs, and hands its OnConnect hook, the cursor it resumed
// from: the Store's Load through Confirming returns the cursor the wrapped
// Store holds (loaded once the slot is held), not zero.
func TestRestartReportsLoadedCursor(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	store := cursor.NewMemory(cdc.Cursor{})
	ctx := pgtest.Ctx(t)
	first := func() {
		src, err := cdc.NewSource(dsn, slot, "pub")
		if err != nil {
			t.Fatal(err)
		}
		r, err := cdc.NewResumer(src, store, stream.WithCheckpointEvery(1))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var handled atomic.Int64
		done := make(chan error, 1)
		go func() {
			done <- r.Run(rctx, func(context.Context, cdc.Event) error {
				handled.Add(1)
				return nil
			})
		}()
		replExec(t, dsn, "INSERT INTO items (id) VALUES (1), (2), (3)")
		replUntil(t, "3 changes handled", func() bool { return handled.Load() >= 3 })
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v", err)
		}
	}
	first()
	saved, err := store.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if saved.LSN == 0 {
		t.Fatalf("saved %v: nothing saved", saved)
	}
	awaitInactive(t, dsn, slot)

	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	connected := make(chan cdc.Cursor, 1)
	hooks := stream.Hooks[cdc.Cursor]{OnConnect: func(ev stream.ConnectEvent[cdc.Cursor]) {
		select {
		case connected <- ev.After:
		default:
		}
	}}
	r, err := cdc.NewResumer(src, store, stream.WithHooks(hooks))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx, func(context.Context, cdc.Event) error { return nil }) }()
	var after cdc.Cursor
	select {
	case after = <-connected:
	case <-ctx.Done():
		t.Fatal("no connection after the restart")
	}
	logged := r.Cursor() // what the stream logs with "stream opened"
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v", err)
	}
	if after != saved {
		t.Errorf("OnConnect After = %v, want the saved %v", after, saved)
	}
	if logged != saved {
		t.Errorf("Cursor() at the connection = %v, want the saved %v", logged, saved)
	}
}
