package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

type event = streamtest.Event[struct{}]

// insertEffect is a transactional function that records the event in the
// table effects, which has no unique constraint.
func insertEffect(ctx context.Context, tx pgx.Tx, ev event) error {
	_, err := tx.Exec(ctx, "INSERT INTO effects (seq) VALUES ($1)", ev.Seq)
	return err
}

// setupEffects creates the table effects and the cursor table (by a Load
// of a Store of another stream), so that counted statements start after.
func setupEffects(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	execSQL(t, pool, "CREATE TABLE effects (seq bigint NOT NULL)")
	load(t, newStore(t, pool, "setup"))
}

func ev(seq int64) event { return event{Seq: seq} }

func TestTransactionalCommit(t *testing.T) {
	pool, count := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	if s.CommitsInHandler() {
		t.Fatalf("CommitsInHandler() before Transactional = true")
	}
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], insertEffect)
	if !s.CommitsInHandler() {
		t.Fatalf("CommitsInHandler() after Transactional = false")
	}
	load(t, s)
	before := count.n.Load()
	for seq := int64(1); seq <= 3; seq++ {
		if err := handle(pgtest.Ctx(t), ev(seq)); err != nil {
			t.Fatalf("handle(%d) = %v", seq, err)
		}
		save(t, s, seq) // the Resumer's Save: nothing to write
	}
	// BEGIN, the cursor, the effect, COMMIT: four statements an event.
	if got := count.n.Load() - before; got != 12 {
		t.Errorf("3 events sent %d statements, want 12", got)
	}
	if got, dups := effects(t, pool, "effects"); got != want(3) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(3))
	}
	if got := load(t, newStore(t, pool, "s")); got != 3 {
		t.Errorf("stored cursor = %d, want 3", got)
	}
}

func TestTransactionalRollback(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	load(t, s)
	errBoom := errors.New("boom")
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		calls.Add(1)
		if err := insertEffect(ctx, tx, e); err != nil {
			return err
		}
		return errBoom
	})
	if err := handle(pgtest.Ctx(t), ev(1)); !errors.Is(err, errBoom) {
		t.Fatalf("handle() = %v, want %v", err, errBoom)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("fn called %d times, want 1: its own error is not retried", got)
	}
	if got, _ := effects(t, pool, "effects"); got != want(0) {
		t.Errorf("effects after the rollback = %s, want none", got)
	}
	if got := peek(t, pool, "s"); got != 0 {
		t.Errorf("stored cursor after the rollback = %d, want 0", got)
	}
	// The Store is still in step with the row.
	save(t, s, 1)
}

func TestTransactionalConstraintViolation(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	execSQL(t, pool, "CREATE TABLE once (k int PRIMARY KEY)", "INSERT INTO once VALUES (1)")
	s := newStore(t, pool, "s")
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		calls.Add(1)
		_, err := tx.Exec(ctx, "INSERT INTO once VALUES (1)")
		return err
	})
	err := handle(pgtest.Ctx(t), ev(1))
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Fatalf("handle() = %v, want the unique violation", err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("fn called %d times, want 1", got)
	}
	if got := load(t, newStore(t, pool, "s")); got != 0 {
		t.Errorf("stored cursor = %d, want 0", got)
	}
}

func TestTransactionalCursorChanged(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  bool // the row exists before both Stores load it
		iso  pgx.TxIsoLevel
	}{
		{name: "insert", row: false},
		{name: "update", row: true},
		{name: "update serializable", row: true, iso: pgx.Serializable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, _ := newPool(t, pgtest.NewDB(t))
			setupEffects(t, pool)
			if tc.row {
				save(t, newStore(t, pool, "s"), 0)
			}
			a, b := newStore(t, pool, "s", postgres.WithIsolation(tc.iso)), newStore(t, pool, "s", postgres.WithIsolation(tc.iso))
			load(t, b)
			load(t, a) // the later Load takes the stream over
			var bCalls atomic.Int32
			handleA := postgres.Transactional(a, streamtest.Extract[struct{}], insertEffect)
			handleB := postgres.Transactional(b, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
				bCalls.Add(1)
				return insertEffect(ctx, tx, e)
			})
			if err := handleA(pgtest.Ctx(t), ev(1)); err != nil {
				t.Fatalf("first Store's handle() = %v", err)
			}
			err := handleB(pgtest.Ctx(t), ev(1))
			if !errors.Is(err, postgres.ErrCursorChanged) {
				t.Fatalf("second Store's handle() = %v, want ErrCursorChanged", err)
			}
			if d := errclass.Default().Classify(err); d.Action != errclass.Fail {
				t.Errorf("Classify(%v) = %v, want Fail", err, d)
			}
			if got := bCalls.Load(); got != 0 {
				t.Errorf("second Store's fn called %d times, want 0: the cursor is written first", got)
			}
			if got, dups := effects(t, pool, "effects"); got != want(1) || len(dups) != 0 {
				t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(1))
			}
		})
	}
}

func TestTransactionalResumer(t *testing.T) {
	pool, count := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	const n = 20
	src := streamtest.NewSource(make([]struct{}, n))
	// Every fifth event, the last included, carries only progress.
	extract := func(e event) (int64, error) {
		if e.Seq%5 == 0 {
			return e.Seq, cursor.ProgressOnly
		}
		return e.Seq, nil
	}
	r, err := stream.New(src, extract, s)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	before := count.n.Load()
	if err := r.Run(pgtest.Ctx(t), postgres.Transactional(s, extract, insertEffect)); err != nil {
		t.Fatalf("Run() = %v", err)
	}
	handled, progressed := int64(n-n/5), int64(n/5)
	// Load, then four statements a handled event, one Save a progress-only one.
	if got, want := count.n.Load()-before, 1+4*handled+progressed; got != want {
		t.Errorf("Run() sent %d statements, want %d", got, want)
	}
	var seqs []int64
	rows, err := pool.Query(pgtest.Ctx(t), "SELECT seq FROM effects ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	if seqs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if int64(len(seqs)) != handled {
		t.Errorf("effects = %v, want the %d events that are not progress-only", seqs, handled)
	}
	for _, seq := range seqs {
		if seq%5 == 0 {
			t.Errorf("effects hold progress-only event %d", seq)
		}
	}
	if got := load(t, newStore(t, pool, "s")); got != n {
		t.Errorf("stored cursor = %d, want %d (the last, progress-only, event)", got, n)
	}
}

// codes is a pgx tracer that records the SQLSTATE of every failed
// statement.
type codes struct {
	counter
	seen chan string
}

func (c *codes) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	var pg *pgconn.PgError
	if errors.As(data.Err, &pg) {
		select {
		case c.seen <- pg.Code:
		default:
		}
	}
}

func TestTransactionalSerializationFailure(t *testing.T) {
	dsn := pgtest.NewDB(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tracer := &codes{seen: make(chan string, 16)}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(pgtest.Ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	setupEffects(t, pool)
	execSQL(t, pool, "CREATE TABLE items (v int NOT NULL)")
	for len(tracer.seen) > 0 {
		<-tracer.seen // the setup's missing table
	}
	other, err := pgx.Connect(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())

	// Write skew: each transaction reads the sum of items and inserts a
	// row. The other transaction reads and writes first and commits while
	// the handler's is open: the handler's must fail with 40001.
	otherTx, err := other.BeginTx(pgtest.Ctx(t), pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherTx.Exec(pgtest.Ctx(t), "INSERT INTO items SELECT coalesce(sum(v), 0) + 1 FROM items"); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, pool, "s", postgres.WithIsolation(pgx.Serializable),
		postgres.WithTxRetry(backoff.Exponential(backoff.WithInitialInterval(0), backoff.WithMaxInterval(0), backoff.WithMaxRetries(3))))
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		calls.Add(1)
		if _, err := tx.Exec(ctx, "INSERT INTO items SELECT coalesce(sum(v), 0) + 10 FROM items"); err != nil {
			return err
		}
		if calls.Load() == 1 {
			if err := otherTx.Commit(ctx); err != nil {
				return err
			}
		}
		return insertEffect(ctx, tx, e)
	})
	if err := handle(pgtest.Ctx(t), ev(1)); err != nil {
		t.Fatalf("handle() = %v", err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("fn called %d times, want 2", got)
	}
	select {
	case code := <-tracer.seen:
		if code != "40001" {
			t.Errorf("the first attempt failed with SQLSTATE %s, want 40001", code)
		}
	default:
		t.Errorf("no statement failed: the serialization failure did not happen")
	}
	if got, dups := effects(t, pool, "effects"); got != want(1) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(1))
	}
	var items int
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM items").Scan(&items); err != nil {
		t.Fatal(err)
	}
	if items != 2 {
		t.Errorf("items holds %d rows, want 2 (the other transaction's and the retried one's)", items)
	}
}

func TestTransactionalLostConnection(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		if err := insertEffect(ctx, tx, e); err != nil {
			return err
		}
		if calls.Add(1) == 1 {
			// The server ends this session: the transaction is lost.
			_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
			return err
		}
		return nil
	})
	if err := handle(pgtest.Ctx(t), ev(1)); err != nil {
		t.Fatalf("handle() = %v", err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("fn called %d times, want 2", got)
	}
	if got, dups := effects(t, pool, "effects"); got != want(1) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(1))
	}
	if got := load(t, newStore(t, pool, "s")); got != 1 {
		t.Errorf("stored cursor = %d, want 1", got)
	}
}

func TestTransactionalRetriesGiveUp(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s", postgres.WithTxRetry(backoff.Exponential(backoff.WithInitialInterval(0), backoff.WithMaxInterval(0), backoff.WithMaxRetries(2))))
	var calls atomic.Int32
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		calls.Add(1)
		return &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	})
	err := handle(pgtest.Ctx(t), ev(1))
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "40P01" {
		t.Fatalf("handle() = %v, want the deadlock", err)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("fn called %d times, want 3 (two retries)", got)
	}
}

func TestTransactionalNil(t *testing.T) {
	handle := postgres.Transactional[event, int64](nil, streamtest.Extract[struct{}], insertEffect)
	err := handle(context.Background(), ev(1))
	if !errors.Is(err, postgres.ErrInvalid) {
		t.Errorf("handle() of a nil Store = %v, want ErrInvalid", err)
	}
}

// TestTransactionalFnCommits: a function that sends a raw COMMIT and then
// fails committed the cursor behind the Store's back; the handler reports
// it, and the Store knows the write as its own: its next event is handled.
func TestTransactionalFnCommits(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	load(t, s)
	errBoom := errors.New("boom")
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		if err := insertEffect(ctx, tx, e); err != nil {
			return err
		}
		if e.Seq == 1 {
			if _, err := tx.Exec(ctx, "COMMIT"); err != nil {
				return err
			}
			return errBoom
		}
		return nil
	})
	if err := handle(pgtest.Ctx(t), ev(1)); err == nil || !strings.Contains(err.Error(), "ended the transaction") {
		t.Fatalf("handle(1) of a fn that committed = %v, want an error saying fn ended the transaction", err)
	}
	if err := handle(pgtest.Ctx(t), ev(2)); err != nil {
		t.Fatalf("handle(2) after fn committed = %v, want nil: the committed cursor was the Store's own", err)
	}
	if got := peek(t, pool, "s"); got != 2 {
		t.Errorf("stored cursor = %d, want 2", got)
	}
}
