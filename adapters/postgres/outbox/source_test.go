package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// msg is a row of the tests' outbox table (id, payload).
type msg struct {
	ID      int64
	Payload string
}

type msgEvent = outbox.Event[msg]

// newOutbox returns an Outbox over the table outbox of pool's database,
// created by its first Open.
func newOutbox(t testing.TB, pool *pgxpool.Pool, opts ...outbox.Option) *outbox.Source[msg] {
	t.Helper()
	opts = append([]outbox.Option{outbox.WithCreate("payload text NOT NULL")}, opts...)
	o, err := outbox.NewSource(pool, "outbox", pgx.RowToStructByName[msg], opts...)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// openOutbox opens a connection of o after after, closed when t ends.
func openOutbox(t testing.TB, o *outbox.Source[msg], after outbox.Cursor) stream.Conn[msgEvent] {
	t.Helper()
	c, err := o.Open(pgtest.Ctx(t), after)
	if err != nil {
		t.Fatalf("Open(%v) = %v", after, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// recvN receives n rows from c.
func recvN(t testing.TB, c stream.Conn[msgEvent], n int) []msgEvent {
	t.Helper()
	var got []msgEvent
	for range n {
		ev, err := c.Recv(pgtest.Ctx(t))
		if err != nil {
			t.Fatalf("Recv() after %d rows = %v", len(got), err)
		}
		got = append(got, ev)
	}
	return got
}

// payloads returns the payloads of evs.
func payloads(evs []msgEvent) []string {
	var p []string
	for _, ev := range evs {
		p = append(p, ev.Row.Payload)
	}
	return p
}

// begin starts a transaction on pool that inserts payload into outbox; it
// is rolled back when t ends unless committed.
func begin(t testing.TB, pool *pgxpool.Pool, payload string) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(pgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(pgtest.Ctx(t), "INSERT INTO outbox (payload) VALUES ($1)", payload); err != nil {
		t.Fatal(err)
	}
	return tx
}

func commit(t testing.TB, tx pgx.Tx) {
	t.Helper()
	if err := tx.Commit(pgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// awaitHold polls o.Hold until it names a holder, within deadline.
func awaitHold(t testing.TB, o *outbox.Source[msg]) outbox.Hold {
	t.Helper()
	ctx := pgtest.Ctx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if h := o.Hold(); h.Tx != 0 && h.PID != 0 {
			return h
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no hold reported within %v", pgtest.Deadline)
		case <-tick.C:
		}
	}
}

// recvAsync receives n rows from c on another goroutine.
func recvAsync(t testing.TB, c stream.Conn[msgEvent], n int) <-chan []msgEvent {
	out := make(chan []msgEvent, 1)
	go func() {
		var got []msgEvent
		for range n {
			ev, err := c.Recv(pgtest.Ctx(t))
			if err != nil {
				t.Errorf("Recv() after %d rows = %v", len(got), err)
				break
			}
			got = append(got, ev)
		}
		out <- got
	}()
	return out
}

// TestOutboxOutOfOrderCommit is the row an id > last relay skips: the
// transaction with the smaller id commits last. The Outbox holds the
// later row back until the earlier one committed, reports the hold, and
// then delivers both in transaction order.
func TestOutboxOutOfOrderCommit(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithPollInterval(10*time.Minute))
	c := openOutbox(t, o, outbox.Cursor{})

	first := begin(t, pool, "first")   // takes id 1 and the smaller xid
	second := begin(t, pool, "second") // takes id 2
	var pid int
	if err := first.QueryRow(pgtest.Ctx(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	commit(t, second)
	got := recvAsync(t, c, 2)
	h := awaitHold(t, o) // woken by second's notification, it finds second held
	if h.PID != pid || h.Since.IsZero() {
		t.Errorf("Hold() = %+v, want PID %d and a Since", h, pid)
	}
	select {
	case evs := <-got:
		t.Fatalf("delivered %v while the first transaction is open", payloads(evs))
	default:
	}
	commit(t, first)
	evs := <-got
	if fmt.Sprint(payloads(evs)) != "[first second]" {
		t.Fatalf("rows = %v, want [first second]", payloads(evs))
	}
	if evs[0].Cursor.Tx != h.Tx || evs[0].Row.ID != 1 || evs[0].Cursor.Seq != 1 || evs[0].Cursor.System == "" {
		t.Errorf("first row = %+v, want id 1 of tx %d with a system identifier", evs[0], h.Tx)
	}
	if evs[0].Cursor.Compare(evs[1].Cursor) >= 0 {
		t.Errorf("cursors %v, %v not increasing", evs[0].Cursor, evs[1].Cursor)
	}
	if h := o.Hold(); h != (outbox.Hold{}) {
		t.Errorf("Hold() after the commit = %+v, want none", h)
	}
}

// TestOutboxRollback: a rolled-back row is never delivered, and a row held
// behind a transaction that rolls back (which notifies nobody) is read by
// the re-reads while held.
func TestOutboxRollback(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithPollInterval(10*time.Minute))
	c := openOutbox(t, o, outbox.Cursor{})
	aborted := begin(t, pool, "aborted")
	commit(t, begin(t, pool, "kept"))
	got := recvAsync(t, c, 1)
	awaitHold(t, o)
	if err := aborted.Rollback(pgtest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if evs := <-got; fmt.Sprint(payloads(evs)) != "[kept]" {
		t.Fatalf("rows = %v, want [kept]", payloads(evs))
	}
}

// TestOutboxNotifyWakes: with a poll interval longer than the test's
// deadline, only the trigger's notification can deliver the row.
func TestOutboxNotifyWakes(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithPollInterval(time.Hour))
	c := openOutbox(t, o, outbox.Cursor{})
	got := recvAsync(t, c, 3)
	for _, p := range []string{"a", "b", "c"} {
		commit(t, begin(t, pool, p))
	}
	if evs := <-got; fmt.Sprint(payloads(evs)) != "[a b c]" {
		t.Fatalf("rows = %v, want [a b c]", payloads(evs))
	}
}

// TestOutboxPollsWithoutListen: WithNotify("") reads at the poll interval.
func TestOutboxPollsWithoutListen(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithNotify(""), outbox.WithPollInterval(20*time.Millisecond))
	c := openOutbox(t, o, outbox.Cursor{})
	got := recvAsync(t, c, 2)
	commit(t, begin(t, pool, "a"))
	commit(t, begin(t, pool, "b"))
	if evs := <-got; fmt.Sprint(payloads(evs)) != "[a b]" {
		t.Fatalf("rows = %v, want [a b]", payloads(evs))
	}
}

// TestOutboxResumesAfterCursor: a connection opened after a row's cursor
// starts with the next row, inside a transaction too; pages smaller than
// the backlog lose nothing.
func TestOutboxResumesAfterCursor(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithBatchSize(2))
	openOutbox(t, o, outbox.Cursor{}) // creates the table
	tx := begin(t, pool, "1")
	for _, p := range []string{"2", "3"} {
		if _, err := tx.Exec(pgtest.Ctx(t), "INSERT INTO outbox (payload) VALUES ($1)", p); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, tx)
	commit(t, begin(t, pool, "4"))
	commit(t, begin(t, pool, "5"))
	all := recvN(t, openOutbox(t, o, outbox.Cursor{}), 5)
	if fmt.Sprint(payloads(all)) != "[1 2 3 4 5]" {
		t.Fatalf("rows = %v, want [1 2 3 4 5]", payloads(all))
	}
	rest := recvN(t, openOutbox(t, o, all[1].Cursor), 3)
	if fmt.Sprint(payloads(rest)) != "[3 4 5]" {
		t.Fatalf("rows after %v = %v, want [3 4 5]", all[1].Cursor, payloads(rest))
	}
}

// TestOutboxCloseAndCancel: Close ends a pending Recv; so does the end of
// Recv's context, with an error matching it.
func TestOutboxCloseAndCancel(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool, outbox.WithPollInterval(time.Hour))

	c := openOutbox(t, o, outbox.Cursor{})
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Recv(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Recv() after cancel = %v, want context.Canceled", err)
	}

	c = openOutbox(t, o, outbox.Cursor{})
	go func() {
		_, err := c.Recv(pgtest.Ctx(t))
		done <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Errorf("Recv() after Close = nil, want an error")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// TestOutboxSourceChanged: a cursor of another server, or one whose
// transaction this server never assigned (a restored database), is
// stream.ErrSourceChanged, marked Expired; a cursor of this server is not.
func TestOutboxSourceChanged(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{})
	commit(t, begin(t, pool, "a"))
	row := recvN(t, openOutbox(t, o, outbox.Cursor{}), 1)[0]
	openOutbox(t, o, row.Cursor) // the server's own cursor

	for _, tc := range []struct {
		name  string
		after outbox.Cursor
	}{
		{name: "another system", after: outbox.Cursor{Tx: row.Cursor.Tx, Seq: 1, System: "1"}},
		{name: "a transaction never assigned", after: outbox.Cursor{Tx: row.Cursor.Tx + 1_000_000, Seq: 1, System: row.Cursor.System}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := o.Open(pgtest.Ctx(t), tc.after)
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, stream.ErrSourceChanged) || errclass.Default().Classify(err).Action != errclass.Expired {
				t.Fatalf("Open(%v) = %v, want stream.ErrSourceChanged (Expired)", tc.after, err)
			}
		})
	}
}

// TestOutboxServerWiped: after the server is replaced by a new cluster
// (a restore into a new one, whose transaction ids start low again), the
// saved cursor is refused instead of waiting forever for transaction ids
// it has passed.
func TestOutboxServerWiped(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	pool := newPool(t, srv.DSN())
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{})
	commit(t, begin(t, pool, "a"))
	row := recvN(t, openOutbox(t, o, outbox.Cursor{}), 1)[0]
	pool.Reset()
	if err := srv.Wipe(); err != nil {
		t.Fatal(err)
	}
	c, err := o.Open(pgtest.Ctx(t), row.Cursor)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, stream.ErrSourceChanged) {
		t.Fatalf("Open(%v) on a wiped server = %v, want stream.ErrSourceChanged", row.Cursor, err)
	}
	// A cursor without the system identifier is still refused: its
	// transaction id is beyond the new cluster's.
	c, err = o.Open(pgtest.Ctx(t), outbox.Cursor{Tx: row.Cursor.Tx, Seq: row.Cursor.Seq})
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, stream.ErrSourceChanged) && row.Cursor.Tx > 1000 {
		t.Fatalf("Open(%v without System) = %v, want stream.ErrSourceChanged", row.Cursor, err)
	}
}

// TestOutboxTable: a missing table without WithCreate, and a table
// without the xid column, are permanent errors that say what to do.
func TestOutboxTable(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool, "CREATE TABLE plain (id bigserial PRIMARY KEY, payload text NOT NULL)")
	for _, tc := range []struct {
		name, table, want string
	}{
		{name: "missing", table: "nope", want: "WithCreate"},
		{name: "no xid column", table: "plain", want: "ADD COLUMN xid xid8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := outbox.NewSource(pool, tc.table, pgx.RowToStructByName[msg])
			if err != nil {
				t.Fatal(err)
			}
			c, err := o.Open(pgtest.Ctx(t), outbox.Cursor{})
			if err == nil {
				c.Close()
			}
			if err == nil || errclass.Default().Classify(err).Action != errclass.Fail || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open() = %v, want a permanent error saying %q", err, tc.want)
			}
		})
	}
}

// TestOutboxDeleting: a Deleting store lets the Outbox delete the rows up
// to the stored cursor, never beyond.
func TestOutboxDeleting(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{})
	for _, p := range []string{"1", "2", "3", "4"} {
		commit(t, begin(t, pool, p))
	}
	store := o.Deleting(cursor.NewMemory(outbox.Cursor{}))
	c := openOutbox(t, o, outbox.Cursor{})
	evs := recvN(t, c, 4) // one page: nothing stored, nothing deleted
	if err := store.Save(pgtest.Ctx(t), evs[1].Cursor); err != nil {
		t.Fatal(err)
	}
	commit(t, begin(t, pool, "5"))
	recvN(t, c, 1) // the read that brings 5 deletes first
	var left []string
	rows, err := pool.Query(pgtest.Ctx(t), "SELECT payload FROM outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[3 4 5]" {
		t.Fatalf("rows left = %v, want [3 4 5] (deleted up to the stored %v)", left, evs[1].Cursor)
	}

	// A stored cursor of another server deletes nothing here.
	other := outbox.Cursor{Tx: evs[3].Cursor.Tx + 100, Seq: 1 << 40, System: "another"}
	if err := store.Save(pgtest.Ctx(t), other); err != nil {
		t.Fatal(err)
	}
	commit(t, begin(t, pool, "6"))
	recvN(t, c, 1)
	var n int
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM outbox").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d rows left after a cursor of another server was stored, want 4 (3 to 6)", n)
	}
}

// TestOutboxTransactional relays the outbox into a table of the same
// database with Transactional, stopping the stream several times: every
// row's effect exists exactly once.
func TestOutboxTransactional(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool, "CREATE TABLE effects (seq bigint NOT NULL)")
	o := newOutbox(t, pool, outbox.WithBatchSize(7))
	openOutbox(t, o, outbox.Cursor{})
	const rows = 60
	for i := 1; i <= rows; i++ {
		commit(t, begin(t, pool, fmt.Sprint(i)))
	}
	handled := 0
	for round := 0; handled < rows; round++ {
		if round > rows {
			t.Fatalf("no progress: %d rows handled", handled)
		}
		store, err := postgres.NewStore(pool, "relay", cursor.JSON[outbox.Cursor](), outbox.Cursor{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := stream.New(o, outbox.Extract[msg], o.Deleting(store), stream.WithCursorOrder(outbox.Compare))
		if err != nil {
			t.Fatal(err)
		}
		handle := postgres.Transactional(store, outbox.Extract[msg], func(ctx context.Context, tx pgx.Tx, ev msgEvent) error {
			_, err := tx.Exec(ctx, "INSERT INTO effects (seq) VALUES ($1)", ev.Row.ID)
			return err
		})
		n := 0
		// ErrStop is returned after the transaction committed: returned by
		// the function inside it, it would roll the effect back while the
		// stream commits the cursor.
		err = r.Run(pgtest.Ctx(t), func(ctx context.Context, ev msgEvent) error {
			if err := handle(ctx, ev); err != nil {
				return err
			}
			handled++
			if n++; n == 11 || handled == rows {
				return stream.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v", err)
		}
	}
	if got, dups := effects(t, pool, "effects"); got != want(rows) || len(dups) > 0 {
		t.Fatalf("effects %s, duplicates %v; want %s", got, dups, want(rows))
	}
}

// TestOutboxSelectOnly: a role that may only connect and SELECT from the
// table relays it, holds included: no replication, no superuser.
func TestOutboxSelectOnly(t *testing.T) {
	dsn := pgtest.NewDB(t)
	pool := newPool(t, dsn)
	openOutbox(t, newOutbox(t, pool), outbox.Cursor{}) // creates the table
	role := fmt.Sprintf("relay_%d", time.Now().UnixNano())
	execSQL(t, pool, "CREATE ROLE "+role+" LOGIN", "GRANT SELECT ON outbox TO "+role)
	t.Cleanup(func() {
		pgtest.Shared(t).Exec(context.Background(), "DROP OWNED BY "+role, "DROP ROLE "+role)
	})
	relayPool := newPool(t, strings.Replace(dsn, "postgres://postgres@", "postgres://"+role+"@", 1))
	o, err := outbox.NewSource(relayPool, "outbox", pgx.RowToStructByName[msg], outbox.WithPollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c := openOutbox(t, o, outbox.Cursor{})
	open := begin(t, pool, "first")
	commit(t, begin(t, pool, "second"))
	got := recvAsync(t, c, 2)
	ctx := pgtest.Ctx(t)
	awaitCond(t, ctx, "a hold", func() bool { return o.Hold().Tx != 0 })
	h := o.Hold()
	commit(t, open)
	evs := <-got
	if fmt.Sprint(payloads(evs)) != "[first second]" {
		t.Fatalf("rows = %v, want [first second]", payloads(evs))
	}
	t.Logf("as a SELECT-only role: system identifier %q, holder pid %d (0: not visible to the role)", evs[0].Cursor.System, h.PID)
}

// TestOutboxRowsFromAnotherCluster: rows whose transaction ids this
// server has not assigned yet (a dump of another cluster restored here)
// stop the relay with a permanent error that says how to fix the table,
// instead of waiting for them forever.
func TestOutboxRowsFromAnotherCluster(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{})
	execSQL(t, pool, "INSERT INTO outbox (xid, payload) VALUES ((pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::text::xid8, 'restored')")
	c, err := o.Open(pgtest.Ctx(t), outbox.Cursor{})
	if err == nil {
		c.Close()
	}
	if errclass.Default().Classify(err).Action != errclass.Fail || !strings.Contains(fmt.Sprint(err), "SET xid = pg_current_xact_id()") {
		t.Fatalf("Open() = %v, want a permanent error saying how to renumber the rows", err)
	}
	execSQL(t, pool, "UPDATE outbox SET xid = pg_current_xact_id()")
	if evs := recvN(t, openOutbox(t, o, outbox.Cursor{}), 1); evs[0].Row.Payload != "restored" {
		t.Fatalf("after the UPDATE: %+v, want the restored row", evs[0])
	}
}

// TestOutboxAfterConnect: a connection is set up as the pool's are, its
// AfterConnect included (here: the search_path that finds the table).
func TestOutboxAfterConnect(t *testing.T) {
	dsn := pgtest.NewDB(t)
	pool := newPool(t, dsn)
	execSQL(t, pool, "CREATE SCHEMA app")
	o, err := outbox.NewSource(pool, "app.outbox", pgx.RowToStructByName[msg], outbox.WithCreate("payload text NOT NULL"))
	if err != nil {
		t.Fatal(err)
	}
	openOutbox(t, o, outbox.Cursor{})
	execSQL(t, pool, "INSERT INTO app.outbox (payload) VALUES ('in app')")

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET search_path TO app")
		return err
	}
	appPool, err := pgxpool.NewWithConfig(pgtest.Ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(appPool.Close)
	o, err = outbox.NewSource(appPool, "outbox", pgx.RowToStructByName[msg])
	if err != nil {
		t.Fatal(err)
	}
	if evs := recvN(t, openOutbox(t, o, outbox.Cursor{}), 1); evs[0].Row.Payload != "in app" {
		t.Fatalf("row = %+v, want the row of app.outbox", evs[0])
	}
}

// TestOutboxIntegerID: a table of your own whose id is a serial (int4)
// and whose xid column was added later works as one the Outbox made.
func TestOutboxIntegerID(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool,
		"CREATE TABLE events (id serial PRIMARY KEY, topic text NOT NULL, payload text NOT NULL)",
		"INSERT INTO events (topic, payload) VALUES ('t', 'before')",
		"ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id()",
		"CREATE INDEX ON events (xid, id)",
		"INSERT INTO events (topic, payload) VALUES ('t', 'after')")
	type event struct {
		ID      int32
		Topic   string
		Payload string
	}
	o, err := outbox.NewSource(pool, "events", pgx.RowToStructByName[event], outbox.WithNotify("events"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.Open(pgtest.Ctx(t), outbox.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, want := range []event{{ID: 1, Topic: "t", Payload: "before"}, {ID: 2, Topic: "t", Payload: "after"}} {
		ev, err := c.Recv(pgtest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Row != want || ev.Cursor.Seq != int64(want.ID) {
			t.Fatalf("Recv() = %+v, want row %+v at id %d", ev, want, want.ID)
		}
	}
}

// TestOutboxPreparedWriter: on a server that admits prepared transactions,
// the table WithCreate makes lets a writer PREPARE (a transaction that
// notified could not: 0A000), and the Outbox still delivers its row.
func TestOutboxPreparedWriter(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"max_prepared_transactions": "4"}})
	pool := newPool(t, srv.DSN())
	o := newOutbox(t, pool, outbox.WithPollInterval(20*time.Millisecond))
	c := openOutbox(t, o, outbox.Cursor{}) // creates the table
	conn, err := pool.Acquire(pgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{"BEGIN", "INSERT INTO outbox (payload) VALUES ('two-phase')", "PREPARE TRANSACTION 'p1'", "COMMIT PREPARED 'p1'"} {
		if _, err := conn.Exec(pgtest.Ctx(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := payloads(recvN(t, c, 1)); fmt.Sprint(got) != "[two-phase]" {
		t.Fatalf("rows %v, want [two-phase]", got)
	}
}

// TestOutboxMigration: the error for an existing table without the xid
// column prints the migration, which, run as printed, makes the table one
// the Outbox reads.
func TestOutboxMigration(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	execSQL(t, pool, "CREATE TABLE outbox (id bigserial PRIMARY KEY, payload text NOT NULL)", "INSERT INTO outbox (payload) VALUES ('old')")
	o, err := outbox.NewSource(pool, "outbox", pgx.RowToStructByName[msg], outbox.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.Open(pgtest.Ctx(t), outbox.Cursor{})
	_, script, ok := strings.Cut(fmt.Sprint(err), ":\n")
	if !ok || errclass.Default().Classify(err).Action != errclass.Fail || !strings.Contains(script, "CREATE TRIGGER") {
		t.Fatalf("Open() = %v, want a permanent error printing the migration", err)
	}
	t.Logf("Open() = %v", err)
	execSQL(t, pool, script)
	c := openOutbox(t, o, outbox.Cursor{})
	commit(t, begin(t, pool, "new"))
	if got := payloads(recvN(t, c, 2)); fmt.Sprint(got) != "[old new]" {
		t.Fatalf("rows %v, want [old new]", got)
	}
}

// TestNewResumer: the Resumer NewResumer wires relays the rows in
// transaction order through the Store given (the row of the transaction
// that began first, committed last, comes first), and resumes after the
// cursor that Store holds.
func TestNewResumer(t *testing.T) {
	pool := newPool(t, pgtest.NewDB(t))
	o := newOutbox(t, pool)
	openOutbox(t, o, outbox.Cursor{}) // creates the table
	first := begin(t, pool, "first")
	commit(t, begin(t, pool, "second"))
	commit(t, first)
	commit(t, begin(t, pool, "third"))
	store := cursor.NewMemory(outbox.Cursor{})
	run := func(n int) []string {
		t.Helper()
		r, err := outbox.NewResumer(o, store)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		err = r.Run(pgtest.Ctx(t), func(_ context.Context, ev outbox.Event[msg]) error {
			got = append(got, ev.Row.Payload)
			if len(got) == n {
				return stream.ErrStop
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run() = %v, want nil after ErrStop", err)
		}
		return got
	}
	if got := run(2); fmt.Sprint(got) != "[first second]" {
		t.Fatalf("first run handled %v, want [first second]", got)
	}
	if got := run(1); fmt.Sprint(got) != "[third]" {
		t.Fatalf("second run handled %v, want [third]", got)
	}
}
