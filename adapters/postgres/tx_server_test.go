package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// TestTransactionalServerCrash crashes the server (an immediate shutdown)
// while a Resumer runs Transactional over 2,000 events, one of its
// transactions open, then starts it again: the transaction is retried in
// place, Run goes on to
// the end, and every effect exists once.
func TestTransactionalServerCrash(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	pool, _ := newPool(t, srv.DSN())
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	const n = 2000
	var handled atomic.Int64
	crashAt, crashed := make(chan struct{}), make(chan struct{})
	fn := func(ctx context.Context, tx pgx.Tx, e event) error {
		if err := insertEffect(ctx, tx, e); err != nil {
			return err
		}
		if handled.Add(1) == n/4 {
			close(crashAt)
			<-crashed // this transaction's commit meets the crash
		}
		return nil
	}
	r, err := stream.New(streamtest.NewSource(make([]struct{}, n)), streamtest.Extract[struct{}], s)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(pgtest.Ctx(t), postgres.Transactional(s, streamtest.Extract[struct{}], fn)) }()
	select {
	case <-crashAt:
	case err := <-done:
		t.Fatalf("Run() = %v before the crash", err)
	}
	err = srv.Crash()
	close(crashed)
	if err != nil {
		t.Fatalf("Crash() = %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if got := handled.Load(); got <= n {
		t.Errorf("fn returned nil %d times for %d events, want more: the transaction cut by the crash is run again", got, n)
	}
	if got, dups := effects(t, pool, "effects"); got != want(n) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(n))
	}
	if got := load(t, newStore(t, pool, "s")); got != n {
		t.Errorf("stored cursor = %d, want %d", got, n)
	}
}

// TestTransactionalDeadlock makes the handler's transaction the victim of a
// real deadlock (SQLSTATE 40P01) with another transaction: it is retried
// once the other one has finished.
func TestTransactionalDeadlock(t *testing.T) {
	dsn := pgtest.NewDB(t)
	pool, _ := newPool(t, dsn)
	setupEffects(t, pool)
	execSQL(t, pool, "CREATE TABLE locks (k text PRIMARY KEY, n int NOT NULL)", "INSERT INTO locks VALUES ('a', 0), ('b', 0)")
	other, err := pgx.Connect(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	// The other session never detects the deadlock: the handler's does.
	if _, err := other.Exec(pgtest.Ctx(t), "SET deadlock_timeout = '1min'"); err != nil {
		t.Fatal(err)
	}
	otherTx, err := other.Begin(pgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherTx.Exec(pgtest.Ctx(t), "UPDATE locks SET n = n + 1 WHERE k = 'b'"); err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	otherOver := make(chan struct{}) // closed once the other transaction ended
	var otherPID uint32 = other.PgConn().PID()
	var calls atomic.Int32
	var codes []string
	s := newStore(t, pool, "s")
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		first := calls.Add(1) == 1
		if !first {
			// The other transaction, woken by the rollback, must take row
			// a before this attempt does: its wake-up and relock are not
			// one step, and a retry quicker than it meets it again.
			<-otherOver
		}
		if first {
			if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '10ms'"); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE locks SET n = n + 1 WHERE k = 'a'"); err != nil {
			return err
		}
		if first {
			go func() {
				_, err := otherTx.Exec(context.Background(), "UPDATE locks SET n = n + 1 WHERE k = 'a'")
				if err == nil {
					err = otherTx.Commit(context.Background())
				}
				otherDone <- err
				close(otherOver)
			}()
			if err := awaitLockWait(ctx, tx, otherPID); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, "UPDATE locks SET n = n + 1 WHERE k = 'b'")
		var pg *pgconn.PgError
		if errors.As(err, &pg) {
			codes = append(codes, pg.Code)
		}
		if err != nil {
			return err
		}
		return insertEffect(ctx, tx, e)
	})
	if err := handle(pgtest.Ctx(t), ev(1)); err != nil {
		t.Fatalf("handle() = %v", err)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other transaction: %v", err)
	}
	if got := calls.Load(); got != 2 || len(codes) != 1 || codes[0] != "40P01" {
		t.Errorf("fn called %d times, failures %v; want 2 calls after one 40P01", got, codes)
	}
	if got, dups := effects(t, pool, "effects"); got != want(1) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(1))
	}
}

// awaitLockWait polls, through q, until the session pid waits for a lock.
func awaitLockWait(ctx context.Context, q pgx.Tx, pid uint32) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting bool
		err := q.QueryRow(ctx, "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&waiting)
		if err != nil || waiting {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
