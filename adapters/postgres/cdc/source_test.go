package cdc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// replSlots numbers the tests' slots: a slot's name is the cluster's.
var replSlots atomic.Int64

// replSetup makes the table items (published by pub) and other (not
// published), and a slot of its own, in the database dsn. It returns the
// slot's name.
func replSetup(t testing.TB, dsn string) string {
	t.Helper()
	slot := fmt.Sprintf("repl_%d", replSlots.Add(1))
	replExec(t, dsn,
		"CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL DEFAULT 0)",
		"CREATE TABLE other (id serial PRIMARY KEY, note text)",
		"CREATE PUBLICATION pub FOR TABLE items",
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')",
	)
	// Before the database is dropped: the walsender of the last stream
	// lets the slot go a moment after the stream closed its connection.
	t.Cleanup(func() { awaitInactive(t, dsn, slot) })
	return slot
}

// awaitInactive waits until no connection uses slot (or it is gone). It
// runs in cleanups too, after t's context ended.
func awaitInactive(t testing.TB, dsn, slot string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Deadline)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var active bool
		err = conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		conn.Close(context.Background())
		switch {
		case errors.Is(err, pgx.ErrNoRows) || (err == nil && !active):
			return
		case err != nil:
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("slot %s still active: %v", slot, ctx.Err())
		case <-tick.C:
		}
	}
}

// replExec runs each statement on dsn, in order, on one connection.
func replExec(t testing.TB, dsn string, sql ...string) {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	for _, q := range sql {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// confirmedFlush returns the slot's confirmed_flush_lsn.
func confirmedFlush(t testing.TB, dsn, slot string) pglogrepl.LSN {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s); err != nil {
		t.Fatalf("confirmed_flush_lsn of %s: %v", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// replUntil polls cond until it holds, failing t after the deadline.
func replUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx := pgtest.Ctx(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// replRun runs a Resumer over slot and publication pub of dsn with its
// cursor in store until n events were handled (then it stops, committing
// the last), and returns them.
func replRun(t testing.TB, dsn, slot string, store cursor.Store[cdc.Cursor], n int, opts ...cdc.SourceOption) ([]cdc.Event, error) {
	t.Helper()
	src, err := cdc.NewSource(dsn, slot, "pub", opts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	var got []cdc.Event
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		got = append(got, ev)
		if len(got) == n {
			return stream.ErrStop
		}
		return nil
	})
	return got, err
}

// line describes an event as the example prints it.
func line(ev cdc.Event) string {
	row := ev.New
	if ev.Op == cdc.Delete {
		row = ev.Old
	}
	id, _ := row.Get("id")
	return fmt.Sprintf("%s %v %s %v %d", ev.Relation, ev.Op, id, ev.LSN, ev.Index)
}

func TestReplResumeInsideTransaction(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn,
		"INSERT INTO items (id) SELECT g FROM generate_series(1, 10) g",
		"BEGIN; UPDATE items SET v = 1 WHERE id = 4; DELETE FROM items WHERE id = 5; COMMIT",
	)
	store := cursor.NewMemory(cdc.Cursor{})
	first, err := replRun(t, dsn, slot, store, 3)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	saved, _ := store.Load(context.Background())
	if saved != first[2].Cursor || saved.Index != 2 || saved.Slot != slot || saved.System == "" || saved.Timeline != 1 {
		t.Fatalf("saved cursor %+v, want the third change's %+v, with the server's identity", saved, first[2].Cursor)
	}
	rest, err := replRun(t, dsn, slot, store, 9)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	var got []string
	for _, ev := range append(first, rest...) {
		got = append(got, line(ev))
	}
	tx1, tx2 := first[0].LSN, rest[7].LSN
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("public.items INSERT %d %v %d", i+1, tx1, i))
	}
	want = append(want, fmt.Sprintf("public.items UPDATE 4 %v 0", tx2), fmt.Sprintf("public.items DELETE 5 %v 1", tx2))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("handled:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tx2 <= tx1 {
		t.Fatalf("commit LSNs %v then %v: not increasing", tx1, tx2)
	}
	if v, _ := rest[7].New.Get("v"); string(v) != "1" {
		t.Fatalf("update's new v = %q, want 1", v)
	}
}

// TestReplFeedbackFollowsTheStore checks that the slot's confirmed position
// follows what the Store holds, never what was handled: a stream that
// handled everything but saved only its first cursor confirms that one.
func TestReplFeedbackFollowsTheStore(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	for i := range 20 {
		replExec(t, dsn, fmt.Sprintf("INSERT INTO items (id) SELECT g FROM generate_series(%d, %d) g", i*10+1, i*10+10))
	}
	store := cursor.NewMemory(cdc.Cursor{})
	first, err := replRun(t, dsn, slot, store, 5)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	saved := first[4].Cursor

	// Handle the other 195 changes without saving (the checkpoint cadence
	// is larger), and wait until the server has our status with the
	// received position beyond them: the flush position must still be the
	// saved cursor's.
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithStatusInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store, stream.WithCheckpointEvery(1000))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	handled := make(chan cdc.Event, 200)
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
			handled <- ev
			return nil
		})
	}()
	var last cdc.Event
	for range 195 {
		select {
		case last = <-handled:
		case err := <-done:
			t.Fatalf("Run() = %v before handling 195 changes", err)
		}
	}
	replUntil(t, "the server to receive a status beyond the last change", func() bool {
		return writeLSN(t, dsn, slot) >= last.LSN
	})
	if c := confirmedFlush(t, dsn, slot); c > saved.LSN {
		t.Fatalf("confirmed_flush_lsn %v is beyond the saved cursor %v (handled up to %v)", c, saved, last.Cursor)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	final, _ := store.Load(context.Background())
	if cdc.Compare(final, last.Cursor) < 0 { // a progress position may follow
		t.Fatalf("store holds %v after Run, want at least %v", final, last.Cursor)
	}
	// The next Open confirms the final cursor.
	ctx, cancel = context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	r, err = cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- r.Run(ctx, func(context.Context, cdc.Event) error {
			return errors.New("no change expected")
		})
	}()
	replUntil(t, "confirmed_flush_lsn to reach the saved cursor", func() bool {
		return confirmedFlush(t, dsn, slot) == final.LSN
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
}

// writeLSN returns the write position the slot's consumer last reported
// (pg_stat_replication.write_lsn), or 0.
func writeLSN(t testing.TB, dsn, slot string) pglogrepl.LSN {
	t.Helper()
	ctx := pgtest.Ctx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	var s *string
	err = conn.QueryRow(ctx, `SELECT r.write_lsn::text FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, slot).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) || s == nil {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// TestReplProgressOnQuietPublication checks that WAL written for tables the
// publication does not publish moves the saved cursor, and so the slot,
// forward through progress-only events.
func TestReplProgressOnQuietPublication(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) VALUES (1)")
	store := cursor.NewMemory(cdc.Cursor{})
	first, err := replRun(t, dsn, slot, store, 1)
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithStatusInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(context.Context, cdc.Event) error {
			return errors.New("no change expected")
		})
	}()
	replUntil(t, "a progress-only event and the slot to pass the last change", func() bool {
		replExec(t, dsn, "INSERT INTO other (note) SELECT 'quiet' FROM generate_series(1, 1000)") // beyond the 64 KiB slack
		// confirmed_flush_lsn before the Store: the Store only moves on.
		c := confirmedFlush(t, dsn, slot)
		saved, _ := store.Load(context.Background())
		if c > saved.LSN {
			t.Fatalf("confirmed_flush_lsn %v is beyond the saved cursor %v", c, saved)
		}
		return r.Stats().Progress > 0 && c > first[0].LSN
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run() = %v, want context.Canceled", err)
	}
	saved, _ := store.Load(context.Background())
	if saved.Index != -1 || saved.LSN <= first[0].LSN {
		t.Fatalf("saved cursor %v, want a progress position after %v", saved, first[0].Cursor)
	}
	// A change committed after the progress position is still delivered.
	replExec(t, dsn, "INSERT INTO items (id) VALUES (2)")
	next, err := replRun(t, dsn, slot, store, 1)
	if err != nil || len(next) != 1 || line(next[0]) != fmt.Sprintf("public.items INSERT 2 %v 0", next[0].LSN) {
		t.Fatalf("after progress: Run() = %v, handled %d events", err, len(next))
	}
}

// replChanged runs a stream on store after the source changed, and checks
// that Run stops at once with ErrSourceChanged naming what changed,
// handling nothing.
func replChanged(t *testing.T, dsn, slot string, store cursor.Store[cdc.Cursor], want string) {
	t.Helper()
	got, err := replRun(t, dsn, slot, store, 1)
	if len(got) != 0 {
		t.Fatalf("handled %d changes after the source changed, want 0", len(got))
	}
	if !errors.Is(err, stream.ErrSourceChanged) || !errors.Is(err, errclass.ErrExpired) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run() = %v, want ErrSourceChanged saying %q", err, want)
	}
	t.Logf("Run() = %v", err)
}

func TestReplSlotRecreated(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 10) g")
	store := cursor.NewMemory(cdc.Cursor{})
	if _, err := replRun(t, dsn, slot, store, 3); err != nil {
		t.Fatal(err)
	}
	dropSlot(t, dsn, slot)
	replExec(t, dsn,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')",
		"INSERT INTO items (id) SELECT g FROM generate_series(11, 20) g")
	replChanged(t, dsn, slot, store, `slot "`+slot+`": confirmed_flush_lsn was at most`)
}

func TestReplSlotDropped(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 10) g")
	store := cursor.NewMemory(cdc.Cursor{})
	if _, err := replRun(t, dsn, slot, store, 3); err != nil {
		t.Fatal(err)
	}
	dropSlot(t, dsn, slot)
	replChanged(t, dsn, slot, store, `slot "`+slot+`": was there at cursor`)
	// A stream with no cursor creates the slot, and starts from it.
	fresh := cursor.NewMemory(cdc.Cursor{})
	replExec(t, dsn, "INSERT INTO items (id) VALUES (100)")
	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, fresh)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	done := make(chan error, 1)
	var got []string
	go func() {
		done <- r.Run(ctx, func(_ context.Context, ev cdc.Event) error {
			got = append(got, line(ev))
			return stream.ErrStop
		})
	}()
	replUntil(t, "the slot to be created", func() bool {
		var n int
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND NOT temporary", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	replExec(t, dsn, "INSERT INTO items (id) VALUES (101)")
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "public.items INSERT 101 ") {
		t.Fatalf("handled %q, want the insert of 101 (the one before the slot existed is not in it)", got)
	}
}

// TestReplSlotInvalidated invalidates the slot (max_slot_wal_keep_size:
// wal_status lost) after the stream saved a cursor: the next run stops with
// ErrSourceChanged naming the reason, and never waits on it as a standby.
func TestReplSlotInvalidated(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"max_slot_wal_keep_size": "'1MB'"}})
	dsn := srv.CreateDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 10) g")
	store := cursor.NewMemory(cdc.Cursor{})
	if _, err := replRun(t, dsn, slot, store, 3); err != nil {
		t.Fatal(err)
	}
	awaitInactive(t, dsn, slot)
	// WAL beyond the slot's, in other segments, removed at a checkpoint.
	replUntil(t, "the slot to be lost", func() bool {
		replExec(t, dsn, "INSERT INTO other (note) VALUES ('x')", "SELECT pg_switch_wal()", "CHECKPOINT")
		var status string
		conn, err := pgx.Connect(pgtest.Ctx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(pgtest.Ctx(t), "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status == "lost"
	})
	for _, tt := range []struct {
		name  string
		store cursor.Store[cdc.Cursor]
	}{
		{name: "saved cursor", store: store},
		{name: "fresh stream", store: cursor.NewMemory(cdc.Cursor{})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replChanged(t, dsn, slot, tt.store, `slot "`+slot+`": was usable, now invalidated (wal_status lost`)
		})
	}
}

// dropSlot drops slot once the stream that used it has let it go.
func dropSlot(t *testing.T, dsn, slot string) {
	t.Helper()
	replUntil(t, "the slot to be dropped", func() bool {
		conn, err := pgx.Connect(pgtest.Ctx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(pgtest.Ctx(t), "SELECT pg_drop_replication_slot($1)", slot)
		return err == nil // "is active" until the walsender has exited
	})
}

func TestReplResync(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, "INSERT INTO items (id) SELECT g FROM generate_series(1, 5) g")
	store := cursor.NewMemory(cdc.Cursor{})
	if _, err := replRun(t, dsn, slot, store, 2); err != nil {
		t.Fatal(err)
	}
	// The slot is recreated; meanwhile rows change, one is deleted.
	dropSlot(t, dsn, slot)
	replExec(t, dsn,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')",
		"UPDATE items SET v = 9 WHERE id = 2",
		"DELETE FROM items WHERE id = 4",
		"INSERT INTO items (id) SELECT g FROM generate_series(6, 12) g")

	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	var resyncs []stream.ResyncEvent[cdc.Cursor]
	r, err := cdc.NewResumer(src, store,
		stream.WithResync(cdc.Resync(src, 3)),
		stream.WithHooks(stream.Hooks[cdc.Cursor]{OnResync: func(e stream.ResyncEvent[cdc.Cursor]) { resyncs = append(resyncs, e) }}))
	if err != nil {
		t.Fatal(err)
	}
	var (
		ops  []string
		rows []string
		end  cdc.Cursor
	)
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		ops = append(ops, ev.Op.String())
		switch ev.Op {
		case cdc.Snapshot:
			id, _ := ev.New.Get("id")
			v, _ := ev.New.Get("v")
			rows = append(rows, fmt.Sprintf("%s %s=%s", ev.Relation, id, v))
		case cdc.ResyncEnd:
			end = ev.Cursor
			// Committed after the snapshot: streamed after the replay.
			replExec(t, dsn, "INSERT INTO items (id) VALUES (13)")
		case cdc.Insert:
			rows = append(rows, line(ev))
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	wantOps := "RESYNC-START" + strings.Repeat(" SNAPSHOT", 11) + " RESYNC-END INSERT"
	if got := strings.Join(ops, " "); got != wantOps {
		t.Fatalf("events %s, want %s", got, wantOps)
	}
	snap := rows[:11]
	slices.Sort(snap)
	want := []string{"public.items 2=9"} // updated; 4 deleted
	for _, id := range []int{1, 3, 5, 6, 7, 8, 9, 10, 11, 12} {
		want = append(want, fmt.Sprintf("public.items %d=0", id))
	}
	slices.Sort(want)
	if !slices.Equal(snap, want) {
		t.Fatalf("replayed %q, want %q", snap, want)
	}
	if !strings.HasPrefix(rows[11], "public.items INSERT 13 ") {
		t.Fatalf("after the replay: %q, want the insert of 13", rows[11])
	}
	if len(resyncs) != 1 || resyncs[0].Replayed != 13 || resyncs[0].To != end || end.Index != -1 || end.Slot != slot {
		t.Fatalf("resyncs %+v, want one of 13 events to %v", resyncs, end)
	}
	if !errors.Is(resyncs[0].Cause, stream.ErrSourceChanged) {
		t.Fatalf("resync cause %v, want ErrSourceChanged", resyncs[0].Cause)
	}
}

func TestReplConnCloseAndCancel(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("close unblocks recv", func(t *testing.T) {
		c, err := src.Open(pgtest.Ctx(t), cdc.Cursor{})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			for { // a progress event may come first
				if _, err := c.Recv(pgtest.Ctx(t)); err != nil {
					done <- err
					return
				}
			}
		}()
		if err := c.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if err := <-done; errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv() = %v: Close did not end it", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close() = %v", err)
		}
		awaitInactive(t, dsn, slot)
	})
	t.Run("cancel ends recv", func(t *testing.T) {
		c, err := src.Open(pgtest.Ctx(t), cdc.Cursor{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithCancel(pgtest.Ctx(t))
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := c.Recv(ctx); err != nil {
					done <- err
					return
				}
			}
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv() = %v, want context.Canceled", err)
		}
	})
}

// TestInvalidArguments gives each argument of the constructors, and each
// option, a bad value: the error matches stream.ErrInvalidOption and
// ErrInvalid and names the argument and its value.
func TestInvalidArguments(t *testing.T) {
	const dsn = "postgres://localhost/db"
	newSource := func(dsn, slot, pub string, opts ...cdc.SourceOption) func() error {
		return func() error {
			_, err := cdc.NewSource(dsn, slot, pub, opts...)
			return err
		}
	}
	tests := []struct {
		name string
		call func() error
		want []string
	}{
		{name: "bad dsn", call: newSource("postgres://u:secret@%zz", "s", "p"), want: []string{"cdc: NewSource: dsn = (23 bytes, not shown): does not parse"}},
		{name: "failover over several hosts, any may answer", call: newSource("postgres://u@h1:5432,h2:5433/db", "s", "p", cdc.WithFailover()),
			want: []string{"cdc: NewSource: dsn = (31 bytes, not shown): names several hosts without target_session_attrs=read-write"}},
		{name: "empty slot", call: newSource(dsn, "", "p"), want: []string{`cdc: NewSource: slot = "": must be 1 to 63 characters`}},
		{name: "upper-case slot", call: newSource(dsn, "Slot", "p"), want: []string{`cdc: NewSource: slot = "Slot"`}},
		{name: "quoted publication", call: newSource(dsn, "s", "p'x"), want: []string{`cdc: NewSource: publication = "p'x": must be an unquoted identifier`}},
		{name: "negative status interval", call: newSource(dsn, "s", "p", cdc.WithStatusInterval(-time.Second)), want: []string{"cdc: WithStatusInterval: d = -1s: must not be negative"}},
		{name: "negative chunk", call: newSource(dsn, "s", "p", cdc.WithSnapshot(-1)), want: []string{"cdc: WithSnapshot: chunkRows = -1: must not be negative"}},
		{name: "all at once", call: newSource("postgres://%zz", "", "p'x", cdc.WithStatusInterval(-1), cdc.WithSnapshot(-2)),
			want: []string{"dsn = ", `slot = ""`, `publication = "p'x"`, "d = -1ns", "chunkRows = -2"}},
		{name: "nil source", call: func() error { _, err := cdc.NewResumer(nil, cursor.NewMemory(cdc.Cursor{})); return err },
			want: []string{"cdc: NewResumer: src = nil: must not be nil"}},
		{name: "nil store", call: func() error {
			src, err := cdc.NewSource(dsn, "s", "p")
			if err != nil {
				t.Fatal(err)
			}
			_, err = cdc.NewResumer(src, nil)
			return err
		}, want: []string{"cdc: NewResumer: store = nil: must not be nil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, stream.ErrInvalidOption) || !errors.Is(err, cdc.ErrInvalid) {
				t.Fatalf("error = %v, want one matching stream.ErrInvalidOption and cdc.ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %v, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error = %v shows the password", err)
			}
		})
	}
	if _, err := cdc.NewSource(dsn, "s", "p", nil, cdc.WithStatusInterval(0), cdc.WithSnapshot(0), cdc.WithFailover()); err != nil {
		t.Fatalf("NewSource(nil option, zero values, WithFailover) = %v, want nil", err)
	}
	for _, multi := range []string{"postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write", "postgres://u@h1,h2/db?target_session_attrs=primary", "postgres://u@h1/db?sslmode=prefer"} {
		if _, err := cdc.NewSource(multi, "s", "p", cdc.WithFailover()); err != nil {
			t.Errorf("NewSource(%s) = %v, want nil", multi, err)
		}
	}
}

// TestReplStatusDuringLongTransaction sends a status update every
// millisecond while a 50,000-row transaction streams: the read deadline
// that paces them interrupts reads in the middle of messages, which must
// lose nothing.
func TestReplStatusDuringLongTransaction(t *testing.T) {
	const rows = 50_000
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	replExec(t, dsn, fmt.Sprintf("INSERT INTO items (id) SELECT g FROM generate_series(1, %d) g", rows))
	src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithStatusInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []cdc.Event
	err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev cdc.Event) error {
		if got = append(got, ev); len(got) == rows {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if n := cdc.StatusUpdates(src); n < 10 {
		t.Fatalf("%d status updates sent while streaming, want many", n)
	} else {
		t.Logf("%d status updates sent while streaming", n)
	}
	for i, ev := range got {
		id, _ := ev.New.Get("id")
		if ev.Index != i || string(id) != strconv.Itoa(i+1) || ev.LSN != got[0].LSN {
			t.Fatalf("change %d: %s, want INSERT %d at index %d of %v", i, line(ev), i+1, i, got[0].LSN)
		}
	}
}
