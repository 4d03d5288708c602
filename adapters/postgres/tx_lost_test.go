package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// TestTransactionalLostCommitReply loses the reply to a COMMIT that the
// server applied: the retry finds the row holding that very write and does
// not handle the event again.
func TestTransactionalLostCommitReply(t *testing.T) {
	dsn := pgtest.NewDB(t)
	direct, _ := newPool(t, dsn)
	setupEffects(t, direct)
	host := "127.0.0.1:" + strconv.Itoa(pgtest.Shared(t).Port())
	p := pgtest.NewProxy(t, host)
	pool, count := newPool(t, p.DSN(dsn, host))
	s := newStore(t, pool, "s")
	load(t, s)
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		if calls.Add(1) == 1 {
			p.Cut("commit\x00") // the simple-protocol COMMIT
		}
		return insertEffect(ctx, tx, e)
	})
	if err := handle(pgtest.Ctx(t), ev(1)); err != nil {
		t.Fatalf("handle() = %v", err)
	}
	select {
	case <-p.Fired():
	default:
		t.Fatalf("the proxy cut no commit reply")
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("fn called %d times, want 1: the commit had landed", got)
	}
	if got, dups := effects(t, direct, "effects"); got != want(1) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(1))
	}
	before := count.n.Load()
	save(t, s, 1)
	if got := count.n.Load() - before; got != 0 {
		t.Errorf("Save() of the adopted cursor sent %d statements, want 0", got)
	}
	if err := handle(pgtest.Ctx(t), ev(2)); err != nil {
		t.Fatalf("handle(2) = %v", err)
	}
	if got := load(t, newStore(t, direct, "s")); got != 2 {
		t.Errorf("stored cursor = %d, want 2", got)
	}
}

// TestStoreLostSaveReply loses the reply to a Save's UPDATE, which the
// server applied: the next Save of the same cursor finds the row holding
// that very write and adopts it instead of reporting ErrCursorChanged.
func TestStoreLostSaveReply(t *testing.T) {
	dsn := pgtest.NewDB(t)
	direct, _ := newPool(t, dsn)
	host := "127.0.0.1:" + strconv.Itoa(pgtest.Shared(t).Port())
	p := pgtest.NewProxy(t, host)
	// One connection, so that the UPDATE is prepared on the one the cut hits.
	pool, _ := newPool(t, p.DSN(dsn, host)+"&pool_max_conns=1")
	s := newStore(t, pool, "s")
	load(t, s)
	save(t, s, 1)
	save(t, s, 2) // the UPDATE is prepared: its next run is one message
	p.Cut("")
	if err := s.Save(pgtest.Ctx(t), 3); err == nil {
		t.Fatalf("Save() whose reply was cut = nil, want an error")
	}
	select {
	case <-p.Fired():
	default:
		t.Fatalf("the proxy cut no reply")
	}
	version := func() int64 {
		var v int64
		if err := direct.QueryRow(pgtest.Ctx(t), "SELECT version FROM resumable_cursors WHERE stream = 's'").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := version(); got != 4 { // Load, 1, 2, 3
		t.Fatalf("version after the cut Save = %d, want 4: the UPDATE ran", got)
	}
	save(t, s, 3)
	if got := version(); got != 4 {
		t.Errorf("version = %d, want 4: the lost write adopted, not written again", got)
	}
	save(t, s, 4)
	if got := load(t, newStore(t, direct, "s")); got != 4 {
		t.Errorf("stored cursor = %d, want 4", got)
	}
}

// TestTransactionalRetryWaitEndsWithContext cancels the context while a
// retry is due in a century: the handler returns the context's error at once.
func TestTransactionalRetryWaitEndsWithContext(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s", postgres.WithTxRetry(backoff.Constant(1<<62)))
	ctx, cancel := context.WithCancel(pgtest.Ctx(t))
	defer cancel()
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		cancel() // before the wait: it must not begin its century
		return &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
	})
	err := handle(ctx, ev(1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("handle() = %v, want context.Canceled", err)
	}
}

// TestConcurrencyRefused: a stream running handlers concurrently refuses a
// Store whose cursor is committed in the handler.
func TestConcurrencyRefused(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	s := newStore(t, pool, "s")
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], insertEffect)
	r, err := stream.New(streamtest.NewSource(make([]struct{}, 3)), streamtest.Extract[struct{}], s, stream.WithConcurrency(2))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if err := r.Run(pgtest.Ctx(t), handle); !errors.Is(err, stream.ErrInvalidOption) {
		t.Errorf("Run() with WithConcurrency(2) = %v, want ErrInvalidOption", err)
	}
	r, err = stream.New(streamtest.NewSource(make([]struct{}, 3)), streamtest.Extract[struct{}], s, stream.WithConcurrency(1))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	execSQL(t, pool, "CREATE TABLE effects (seq bigint NOT NULL)")
	if err := r.Run(pgtest.Ctx(t), handle); err != nil {
		t.Errorf("Run() with WithConcurrency(1) = %v, want nil", err)
	}
}
