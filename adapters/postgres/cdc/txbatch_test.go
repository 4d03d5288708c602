package cdc_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// A relay with source-transaction batches: every batch RunBatch hands over
// is whole source transactions' worth, ending at a transaction's end —
// except the parts of one larger than the batch's max — and each batch is
// applied to the target in one transaction with its cursor, so the target
// never shows part of a source transaction that fits in a batch.
func TestTxBatchesRelay(t *testing.T) {
	dsn := pgtest.NewDB(t)
	slot := replSetup(t, dsn)
	const max = 50
	sizes := []int{1, 3, 7, 2, 120, 5, 1, 1, 4, 49, 50, 51, 6}
	total, id := 0, 0
	var sql []string
	txOf := map[int]int{} // item id → its source transaction
	for tx, n := range sizes {
		sql = append(sql, "BEGIN")
		for range n {
			id++
			txOf[id] = tx
			sql = append(sql, fmt.Sprintf("INSERT INTO items (id, v) VALUES (%d, %d)", id, tx))
		}
		sql = append(sql, "COMMIT")
		total += n
	}
	replExec(t, dsn, "CREATE TABLE target (id int PRIMARY KEY, tx int NOT NULL)")
	replExec(t, dsn, sql...)

	pool, store := relayStore(t, dsn)
	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		t.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store, stream.WithBatch(max, time.Hour), cdc.WithTxBatches())
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]int // the source transaction of each event of each batch
	var applied atomic.Int64
	handle := postgres.TransactionalBatch(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, evs []cdc.Event) error {
		var b pgx.Batch
		var txs []int
		for i, ev := range evs {
			v, err := ev.New.Value(0)
			if err != nil {
				return err
			}
			item := int(v.(int32))
			b.Queue("INSERT INTO target (id, tx) VALUES ($1, $2)", item, txOf[item])
			txs = append(txs, txOf[item])
			if !ev.TxEnd && i == len(evs)-1 && len(evs) < max {
				return fmt.Errorf("a batch of %d ends inside source transaction %d", len(evs), txOf[item])
			}
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		batches = append(batches, txs)
		if applied.Add(int64(len(evs))) == int64(total) {
			return stream.ErrStop
		}
		return nil
	})
	if err := r.RunBatch(pgtest.Ctx(t), handle); err != nil {
		t.Fatalf("RunBatch() = %v", err)
	}
	inBatches := map[int]map[int]bool{} // source transaction → the batches holding its events
	for i, b := range batches {
		for _, tx := range b {
			if inBatches[tx] == nil {
				inBatches[tx] = map[int]bool{}
			}
			inBatches[tx][i] = true
		}
	}
	for tx, n := range sizes {
		if n <= max && len(inBatches[tx]) != 1 {
			t.Errorf("source transaction %d (%d changes, max %d) split over batches %v", tx, n, max, inBatches[tx])
		}
	}
	var n int
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM target").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != total {
		t.Errorf("target holds %d rows, want %d", n, total)
	}
	// Whole transactions share a batch up to max; 120 takes three parts and
	// 51 two: at most one batch per transaction and part.
	if most := 13 + 2 + 1; len(batches) > most {
		t.Errorf("%d batches, want at most %d (one per transaction, the parts of 120 and 51)", len(batches), most)
	}
}

// relayStore returns a pool on dsn, closed when t ends, and the Store
// named relay of cdc cursors in it.
func relayStore(t testing.TB, dsn string) (*pgxpool.Pool, *postgres.Store[cdc.Cursor]) {
	t.Helper()
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := postgres.NewStore(pool, "relay", cursor.JSON[cdc.Cursor](), cdc.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, store
}

// BenchmarkTxBatchesRelay measures a relay of one-row source transactions
// under WithTxBatches (batches up to 1,000) into a target table through
// TransactionalBatch, synchronous_commit on: source transactions per
// second. A batch holds the whole transactions read already, up to max:
// was one source transaction per batch, at the target's commit rate.
func BenchmarkTxBatchesRelay(b *testing.B) {
	const txs = 2000
	dsn := pgtest.NewDB(b)
	replExec(b, dsn, "CREATE TABLE target (id int NOT NULL)")
	var rate, perBatch float64
	for range b.N {
		slot := replSetup(b, dsn)
		replExec(b, dsn, "ALTER DATABASE "+dbName(b, dsn)+" SET synchronous_commit = on")
		conn, err := pgx.Connect(pgtest.Ctx(b), dsn)
		if err != nil {
			b.Fatal(err)
		}
		for i := range txs {
			if _, err := conn.Exec(pgtest.Ctx(b), "INSERT INTO items (id) VALUES ($1)", i+1); err != nil {
				b.Fatal(err)
			}
		}
		conn.Close(context.Background())
		_, store := relayStore(b, dsn)
		src, err := cdc.NewSource(dsn, slot, "pub")
		if err != nil {
			b.Fatal(err)
		}
		r, err := cdc.NewResumer(src, store, stream.WithBatch(1000, 0), cdc.WithTxBatches())
		if err != nil {
			b.Fatal(err)
		}
		n, batches := 0, 0
		start := time.Now()
		err = r.RunBatch(pgtest.Ctx(b), postgres.TransactionalBatch(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, evs []cdc.Event) error {
			rows := make([][]any, len(evs))
			for i, ev := range evs {
				v, _ := ev.New.Value(0)
				rows[i] = []any{v}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"target"}, []string{"id"}, pgx.CopyFromRows(rows)); err != nil {
				return err
			}
			n, batches = n+len(evs), batches+1
			if n >= txs {
				return stream.ErrStop
			}
			return nil
		}))
		if err != nil {
			b.Fatalf("RunBatch() = %v", err)
		}
		rate += txs / time.Since(start).Seconds()
		perBatch += float64(n) / float64(batches)
		replExec(b, dsn, "DROP PUBLICATION pub", "DROP TABLE items, other", "TRUNCATE target", "DELETE FROM resumable_cursors")
		awaitInactive(b, dsn, slot)
		replExec(b, dsn, "SELECT pg_drop_replication_slot('"+slot+"')")
	}
	b.ReportMetric(rate/float64(b.N), "source_tx/s")
	b.ReportMetric(perBatch/float64(b.N), "tx/batch")
}

// dbName returns the database dsn names.
func dbName(b *testing.B, dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
