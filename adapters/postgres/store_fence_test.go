package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// TestLoadFencesPredecessor is a restart racing its predecessor's last
// COMMIT: the old Store's transaction has written the cursor and its
// COMMIT is still to come when the new Store loads. The Load waits for it
// and returns the cursor it committed, so the new Store's first write
// succeeds; the predecessor, which goes on writing, is the one refused.
func TestLoadFencesPredecessor(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	old := newStore(t, pool, "s")
	load(t, old)
	inFn, release := make(chan uint32), make(chan struct{})
	handle := postgres.Transactional(old, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, ev event) error {
		if err := insertEffect(ctx, tx, ev); err != nil {
			return err
		}
		if ev.Seq == 1 {
			inFn <- tx.Conn().PgConn().PID()
			<-release
		}
		return nil
	})
	oldDone := make(chan error, 1)
	go func() { oldDone <- handle(pgtest.Ctx(t), ev(1)) }()
	pid := <-inFn // the cursor row is written and locked, the COMMIT not sent

	fresh := newStore(t, pool, "s")
	type loaded struct {
		c   int64
		err error
	}
	loadDone := make(chan loaded, 1)
	go func() {
		c, err := fresh.Load(pgtest.Ctx(t))
		loadDone <- loaded{c, err}
	}()
	// The Load must wait for the row: watch it wait, unless it returned.
	watch, err := pool.Begin(pgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Rollback(pgtest.Ctx(t))
	var loadPID uint32
	for loadPID == 0 {
		select {
		case l := <-loadDone:
			close(release)
			<-oldDone
			t.Fatalf("Load() = %d, %v while the predecessor's COMMIT was pending; want it to wait for the row", l.c, l.err)
		default:
		}
		// pg_stat_activity is read once per transaction unless cleared: without
		// this, a first look taken before the Load waited was all the loop saw.
		if _, err := watch.Exec(pgtest.Ctx(t), "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		_ = watch.QueryRow(pgtest.Ctx(t), "SELECT coalesce((SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> $1 LIMIT 1), 0)", int32(pid)).Scan(&loadPID)
	}
	close(release) // the late COMMIT lands
	if err := <-oldDone; err != nil {
		t.Fatalf("the predecessor's handle(1) = %v, want nil (its COMMIT came before the Load)", err)
	}
	l := <-loadDone
	if l.err != nil || l.c != 1 {
		t.Fatalf("Load() = %d, %v; want 1 (the predecessor's commit)", l.c, l.err)
	}
	next := postgres.Transactional(fresh, streamtest.Extract[struct{}], insertEffect)
	if err := next(pgtest.Ctx(t), ev(2)); err != nil {
		t.Fatalf("the new Store's first handle(2) = %v, want nil", err)
	}
	if err := handle(pgtest.Ctx(t), ev(3)); !errors.Is(err, postgres.ErrCursorChanged) {
		t.Fatalf("the predecessor's handle(3) after the Load = %v, want ErrCursorChanged", err)
	}
	if got, dups := effects(t, pool, "effects"); got != want(2) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(2))
	}
}
