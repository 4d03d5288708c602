package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// benchPool returns a pool on a database of b's own, its sessions with
// synchronous_commit as given, and the table effects.
func benchPool(b *testing.B, syncCommit string) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = syncCommit
	pool, err := pgxpool.NewWithConfig(pgtest.Ctx(b), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	execSQL(b, pool, "CREATE TABLE effects (seq bigint NOT NULL)")
	return pool
}

// BenchmarkTransactional compares, per event, a Transactional handler
// followed by the Resumer's Save of the same cursor with a hand-written
// transaction doing the same work (begin, insert the effect, compare-and-set
// the cursor row, commit), with synchronous_commit on and off.
func BenchmarkTransactional(b *testing.B) {
	for _, syncCommit := range []string{"on", "off"} {
		b.Run("sync="+syncCommit+"/transactional", func(b *testing.B) {
			pool := benchPool(b, syncCommit)
			s, err := postgres.NewStore(pool, "bench", cursor.Int64(), 0)
			if err != nil {
				b.Fatal(err)
			}
			handle := postgres.Transactional(s, streamtest.Extract[struct{}], insertEffect)
			ctx := pgtest.Ctx(b)
			if _, err := s.Load(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e := event{Seq: int64(i + 1)}
				if err := handle(ctx, e); err != nil {
					b.Fatal(err)
				}
				if err := s.Save(ctx, e.Seq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
		b.Run("sync="+syncCommit+"/hand-written", func(b *testing.B) {
			pool := benchPool(b, syncCommit)
			ctx := pgtest.Ctx(b)
			execSQL(b, pool, "CREATE TABLE cursors (stream text PRIMARY KEY, cursor bytea NOT NULL, version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
				"INSERT INTO cursors VALUES ('bench', '0', 1)")
			codec := cursor.Int64()
			version := int64(1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := handWritten(ctx, pool, codec, int64(i+1), version); err != nil {
					b.Fatal(err)
				}
				version++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkTransactionalPaired alternates the two, event by event, on one
// server, and reports each one's events/s and their ratio: on a loaded
// machine the pairing keeps the comparison fair where two runs one after the
// other would not be.
func BenchmarkTransactionalPaired(b *testing.B) {
	for _, syncCommit := range []string{"on", "off"} {
		b.Run("sync="+syncCommit, func(b *testing.B) {
			pool := benchPool(b, syncCommit)
			ctx := pgtest.Ctx(b)
			s, err := postgres.NewStore(pool, "bench", cursor.Int64(), 0)
			if err != nil {
				b.Fatal(err)
			}
			handle := postgres.Transactional(s, streamtest.Extract[struct{}], insertEffect)
			if _, err := s.Load(ctx); err != nil {
				b.Fatal(err)
			}
			execSQL(b, pool, "CREATE TABLE cursors (stream text PRIMARY KEY, cursor bytea NOT NULL, version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
				"INSERT INTO cursors VALUES ('bench', '0', 1)")
			codec := cursor.Int64()
			var ours, theirs time.Duration
			b.ResetTimer()
			for i := range b.N {
				e := event{Seq: int64(i + 1)}
				start := time.Now()
				if err := handle(ctx, e); err != nil {
					b.Fatal(err)
				}
				if err := s.Save(ctx, e.Seq); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := handWritten(ctx, pool, codec, e.Seq, int64(i+1)); err != nil {
					b.Fatal(err)
				}
				ours, theirs = ours+mid.Sub(start), theirs+time.Since(mid)
			}
			b.ReportMetric(float64(b.N)/ours.Seconds(), "transactional-events/s")
			b.ReportMetric(float64(b.N)/theirs.Seconds(), "hand-written-events/s")
			b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
		})
	}
}

var errChanged = errors.New("the cursor row changed")

// handWritten is the loop a user would write without the adapter.
func handWritten(ctx context.Context, pool *pgxpool.Pool, codec cursor.Codec[int64], seq, version int64) error {
	enc, err := codec.Encode(seq)
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, "UPDATE cursors SET cursor = $2, version = version + 1, updated_at = now() WHERE stream = $1 AND version = $3", "bench", enc, version)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errChanged
	}
	if err := insertEffect(ctx, tx, event{Seq: seq}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
