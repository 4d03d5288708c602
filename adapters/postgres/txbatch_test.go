package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resumable-go/resumable/cursor"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// insertBatch is a batch's transactional function: one row per event.
func insertBatch(ctx context.Context, tx pgx.Tx, evs []event) error {
	var b pgx.Batch
	for _, e := range evs {
		b.Queue("INSERT INTO effects (seq) VALUES ($1)", e.Seq)
	}
	return tx.SendBatch(ctx, &b).Close()
}

// A handler that returns stream.ErrStop has its effects committed with its
// cursor, and the stream stops after the event: nothing is skipped.
func TestTransactionalStopCommits(t *testing.T) {
	pool, _ := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	src := streamtest.NewSource(make([]struct{}, 10))
	r, err := stream.New(src, streamtest.Extract[struct{}], s)
	if err != nil {
		t.Fatal(err)
	}
	handle := postgres.Transactional(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, e event) error {
		if err := insertEffect(ctx, tx, e); err != nil {
			return err
		}
		if e.Seq == 4 {
			return stream.ErrStop
		}
		return nil
	})
	if err := r.Run(pgtest.Ctx(t), handle); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if got, dups := effects(t, pool, "effects"); got != want(4) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(4))
	}
	if got := peek(t, pool, "s"); got != 4 {
		t.Errorf("stored cursor = %d, want 4", got)
	}
}

// TransactionalBatch applies each batch and its last cursor in one
// transaction: a failed batch leaves nothing of itself, and the next run
// applies it whole, exactly once.
func TestTransactionalBatch(t *testing.T) {
	pool, count := newPool(t, pgtest.NewDB(t))
	setupEffects(t, pool)
	s := newStore(t, pool, "s")
	const n = 250
	src := streamtest.NewSource(make([]struct{}, n))
	errSink := errors.New("sink: boom")
	calls := 0
	handle := postgres.TransactionalBatch(s, streamtest.Extract[struct{}], func(ctx context.Context, tx pgx.Tx, evs []event) error {
		if err := insertBatch(ctx, tx, evs); err != nil {
			return err
		}
		if calls++; calls == 2 {
			return errSink // after its inserts: they must roll back
		}
		return nil
	})
	r, err := stream.New(src, streamtest.Extract[struct{}], s, stream.WithBatch(100, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunBatch(pgtest.Ctx(t), handle); !errors.Is(err, errSink) {
		t.Fatalf("RunBatch() = %v, want %v", err, errSink)
	}
	if got := peek(t, pool, "s"); got != 100 {
		t.Fatalf("stored cursor after the failed batch = %d, want 100", got)
	}
	s2 := newStore(t, pool, "s")
	r2, err := stream.New(src, streamtest.Extract[struct{}], s2, stream.WithBatch(100, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	before := count.n.Load()
	if err := r2.RunBatch(pgtest.Ctx(t), postgres.TransactionalBatch(s2, streamtest.Extract[struct{}], insertBatch)); err != nil {
		t.Fatalf("second RunBatch() = %v, want nil", err)
	}
	// Load, then per batch: BEGIN, the cursor, the batch's inserts, COMMIT.
	if got, max := count.n.Load()-before, int64(1+2*(4)+150); got > max {
		t.Errorf("the second run sent %d statements, want at most %d", got, max)
	}
	if got, dups := effects(t, pool, "effects"); got != want(n) || len(dups) != 0 {
		t.Errorf("effects = %s, duplicates %v; want %s", got, dups, want(n))
	}
	if got := peek(t, pool, "s"); got != n {
		t.Errorf("stored cursor = %d, want %d", got, n)
	}
	if err := postgres.TransactionalBatch[event](nil, streamtest.Extract[struct{}], insertBatch)(pgtest.Ctx(t), []event{ev(1)}); !errors.Is(err, postgres.ErrInvalid) {
		t.Errorf("TransactionalBatch(nil Store) = %v, want %v", err, postgres.ErrInvalid)
	}
}

// BenchmarkTransactionalBatch compares, per event, with synchronous_commit
// on: TransactionalBatch with batches of 100 (each followed by the
// Resumer's Save of its last cursor) and a hand-written batch loop doing
// the same work (BEGIN, the cursor's compare-and-set, the batch's inserts,
// COMMIT). Run it with BenchmarkTransactional (-bench 'Transactional')
// for per-event Transactional beside it.
func BenchmarkTransactionalBatch(b *testing.B) {
	const size = 100
	batchOf := func(from int) []event {
		evs := make([]event, size)
		for i := range evs {
			evs[i] = event{Seq: int64(from + i + 1)}
		}
		return evs
	}
	b.Run("batch=100", func(b *testing.B) {
		pool := benchPool(b, "on")
		s, err := postgres.NewStore(pool, "bench", cursor.Int64(), 0)
		if err != nil {
			b.Fatal(err)
		}
		handle := postgres.TransactionalBatch(s, streamtest.Extract[struct{}], insertBatch)
		ctx := pgtest.Ctx(b)
		if _, err := s.Load(ctx); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i += size {
			evs := batchOf(i)
			if err := handle(ctx, evs); err != nil {
				b.Fatal(err)
			}
			if err := s.Save(ctx, evs[size-1].Seq); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("hand-written-batch=100", func(b *testing.B) {
		pool := benchPool(b, "on")
		ctx := pgtest.Ctx(b)
		execSQL(b, pool, "CREATE TABLE cursors (stream text PRIMARY KEY, cursor bytea NOT NULL, version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
			"INSERT INTO cursors VALUES ('bench', '0', 1)")
		codec := cursor.Int64()
		version := int64(1)
		b.ResetTimer()
		for i := 0; i < b.N; i += size {
			evs := batchOf(i)
			enc, err := codec.Encode(evs[size-1].Seq)
			if err != nil {
				b.Fatal(err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			tag, err := tx.Exec(ctx, "UPDATE cursors SET cursor = $2, version = version + 1, updated_at = now() WHERE stream = $1 AND version = $3", "bench", enc, version)
			if err != nil || tag.RowsAffected() != 1 {
				b.Fatal(err, tag)
			}
			if err := insertBatch(ctx, tx, evs); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			version++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
