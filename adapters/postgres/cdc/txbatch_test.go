package cdc_test

import (
	"context"
	"fmt"
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
	for i, b := range batches {
		for j := 1; j < len(b); j++ {
			if b[j] != b[0] {
				t.Errorf("batch %d holds source transactions %d and %d: %v", i, b[0], b[j], b)
				break
			}
		}
	}
	var n int
	if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM target").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != total {
		t.Errorf("target holds %d rows, want %d", n, total)
	}
	// 13 transactions, one batch each; 120 takes three and 51 two.
	if want := 13 + 2 + 1; len(batches) != want {
		t.Errorf("%d batches, want %d (one per transaction, the parts of 120 and 51)", len(batches), want)
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
