package postgres_test

import (
	"testing"
	"time"

	"github.com/resumable-go/resumable/adapters/postgres"
)

// TestOutboxLongTransaction: a transaction that stays open (it writes
// elsewhere, so it has a transaction id) holds the relay back; the relay
// reports since when, by which transaction and backend, and catches up
// once it ends. 1s; RESUMABLE_PG_SOAK=1: 30s.
func TestOutboxLongTransaction(t *testing.T) {
	hold := time.Second
	if soakFull() {
		hold = 30 * time.Second
	}
	pool, _ := newPool(t, newDB(t))
	execSQL(t, pool, "CREATE TABLE other (x int)")
	o := newOutbox(t, pool)
	c := openOutbox(t, o, postgres.OutboxCursor{})

	long, err := pool.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback(ctxFor(t))
	var xid uint64
	var pid int
	if err := long.QueryRow(ctxFor(t), "INSERT INTO other VALUES (1) RETURNING pg_current_xact_id()::text::bigint, pg_backend_pid()").Scan(&xid, &pid); err != nil {
		t.Fatal(err)
	}
	const rows = 5
	for i := range rows {
		commit(t, begin(t, pool, string(rune('a'+i))))
	}
	got := recvAsync(t, c, rows)
	h := awaitHold(t, o)
	if h.Tx != xid || h.PID != pid {
		t.Fatalf("Hold() = %+v, want transaction %d, pid %d", h, xid, pid)
	}
	// The workload: the transaction stays open for the hold's length.
	if err := sleepCtx(ctxFor(t), hold); err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-got:
		t.Fatalf("delivered %v while the long transaction is open", payloads(evs))
	default:
	}
	h = o.Hold()
	held := time.Since(h.Since)
	if h.Tx != xid || held < hold {
		t.Fatalf("Hold() after %v = %+v (held %v), want transaction %d held at least %v", hold, h, held, xid, hold)
	}
	ended := time.Now()
	if err := long.Commit(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if evs := <-got; len(evs) != rows {
		t.Fatalf("after the commit: %v, want %d rows", payloads(evs), rows)
	}
	t.Logf("held %v by transaction %d (pid %d); caught up %v after it committed", held.Round(time.Millisecond), h.Tx, h.PID, time.Since(ended).Round(time.Millisecond))
	if h := o.Hold(); h != (postgres.OutboxHold{}) {
		t.Errorf("Hold() after catching up = %+v, want none", h)
	}
}
