package cdc_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/adapters/postgres"
	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

var errCrash = errors.New("crash after the effects")

// applyTx applies ev to the table replica in tx, as replica.apply does in
// memory: snapshot rows, inserts and updates as upserts by key, deletes as
// removal.
func applyTx(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
	del := func(t cdc.Tuple) error {
		k, _ := rowText(t)
		_, err := tx.Exec(ctx, "DELETE FROM replica WHERE tab = $1 AND k = $2", ev.Relation, k)
		return err
	}
	switch ev.Op {
	case cdc.Snapshot, cdc.Insert, cdc.Update:
		if ev.Old.Len() > 0 {
			if err := del(ev.Old); err != nil {
				return err
			}
		}
		k, r := rowText(ev.New)
		_, err := tx.Exec(ctx, "INSERT INTO replica VALUES ($1, $2, $3) ON CONFLICT (tab, k) DO UPDATE SET r = excluded.r", ev.Relation, k, r)
		return err
	case cdc.Delete:
		return del(ev.Old)
	case cdc.Truncate:
		_, err := tx.Exec(ctx, "DELETE FROM replica WHERE tab = $1", ev.Relation)
		return err
	}
	return nil
}

// TestSnapshotTransactional: a relay that applies each event to a table of
// the same database in one transaction with its cursor (Transactional
// under Run), or each batch in one (TransactionalBatch under RunBatch),
// through the first pass, a backfill of a table added to the publication
// and the stream, while writers change the tables. Each run of the relay
// ends, at random, with a stop or with a crash (an error after the
// effects were written, which rolls them back with the cursor), and the
// next picks Run or RunBatch at random: the replica ends equal to the
// tables. 2,000 rows, 3 writers for 8 runs; RESUMABLE_PG_SOAK=1: 50,000
// rows, 6 writers for 40 runs.
func TestSnapshotTransactional(t *testing.T) {
	rows, writers, maxPiece, backfillAt, quietAt := 2000, 3, 700, 3, 8
	if os.Getenv("RESUMABLE_PG_SOAK") != "" {
		rows, writers, maxPiece, backfillAt, quietAt = 50_000, 6, 5000, 15, 40
	}
	dsn := pgtest.NewDB(t)
	slot := snapSetupPub(t, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items, sentinel")
	replExec(t, dsn, "CREATE TABLE replica (tab text, k text, r text, PRIMARY KEY (tab, k))")
	pool, store := relayStore(t, dsn)
	writing, stopWriters := context.WithCancel(pgtest.Ctx(t))
	defer stopWriters()
	wg := churn(writing, t, dsn, writers, rows+rows/5)
	rng := rand.New(rand.NewPCG(3, 4))
	backfill, crashes, batched := false, 0, 0
	for piece := 0; ; piece++ {
		switch piece {
		case backfillAt: // pairs joins the publication, and is backfilled
			replExec(t, dsn, "ALTER PUBLICATION pub ADD TABLE pairs")
			backfill = true
		case quietAt:
			stopWriters()
			wg.Wait()
			replExec(t, dsn, "INSERT INTO sentinel VALUES (1)")
		}
		// The end: the sentinel applied and a cursor with no snapshot or
		// backfill under way committed, before this run or during it.
		var applied int
		if err := pool.QueryRow(pgtest.Ctx(t), "SELECT count(*) FROM replica WHERE tab = 'public.sentinel'").Scan(&applied); err != nil {
			t.Fatal(err)
		}
		saved, err := store.Load(pgtest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if piece > quietAt && applied == 1 && saved.Snapshot == "" {
			break
		}
		src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(rows/10))
		if err != nil {
			t.Fatal(err)
		}
		if backfill { // asked at every start, as the example does
			if err := src.Backfill(pgtest.Ctx(t), "pairs"); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(pgtest.Ctx(t))
		var sentinel, done atomic.Bool
		sentinel.Store(applied == 1)
		hooks := stream.WithHooks(stream.Hooks[cdc.Cursor]{OnCommit: func(e stream.CommitEvent[cdc.Cursor]) {
			if sentinel.Load() && e.Cursor.Snapshot == "" && piece >= quietAt {
				done.Store(true)
				cancel()
			}
		}})
		n, stopAt, crash := 0, rng.IntN(maxPiece)+1, rng.IntN(2) == 0
		// step applies ev and says how the run ends after it, if it does.
		step := func(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
			if err := applyTx(ctx, tx, ev); err != nil {
				return err
			}
			if n++; n >= stopAt {
				if crash {
					return errclass.Permanent(errCrash)
				}
				return stream.ErrStop
			}
			return nil
		}
		var r *stream.Resumer[cdc.Event, cdc.Cursor]
		if rng.IntN(2) == 0 {
			if r, err = cdc.NewResumer(src, store, hooks); err != nil {
				t.Fatal(err)
			}
			err = r.Run(ctx, postgres.Transactional(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, ev cdc.Event) error {
				err := step(ctx, tx, ev)
				if err == nil || errors.Is(err, stream.ErrStop) {
					sentinel.Store(sentinel.Load() || ev.Relation == "public.sentinel")
				}
				return err
			}))
		} else {
			batched++
			if r, err = cdc.NewResumer(src, store, hooks, stream.WithBatch(25, 5*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			// ErrStop commits the whole batch with its last cursor: every
			// event of it is applied first.
			err = r.RunBatch(ctx, postgres.TransactionalBatch(store, cdc.Extract, func(ctx context.Context, tx pgx.Tx, evs []cdc.Event) error {
				var stop error
				seen := false
				for _, ev := range evs {
					seen = seen || ev.Relation == "public.sentinel"
					switch err := step(ctx, tx, ev); {
					case errors.Is(err, stream.ErrStop):
						stop = err
					case err != nil:
						return err
					}
				}
				sentinel.Store(sentinel.Load() || seen)
				return stop
			}))
		}
		cancel()
		switch {
		case done.Load() && errors.Is(err, context.Canceled):
		case errors.Is(err, errCrash):
			crashes++
		case err != nil:
			t.Fatalf("piece %d: %v", piece, err)
		}
	}
	want := tableRows(t, dsn, "items", "pairs")
	got := map[string]map[string]string{"public.items": {}, "public.pairs": {}, "public.sentinel": {}}
	res, err := pool.Query(pgtest.Ctx(t), "SELECT tab, k, r FROM replica")
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		var tab, k, r string
		if err := res.Scan(&tab, &k, &r); err != nil {
			t.Fatal(err)
		}
		got[tab][k] = r
	}
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	if len(got["public.sentinel"]) != 1 {
		t.Errorf("replica of sentinel = %v, want its one row", got["public.sentinel"])
	}
	delete(got, "public.sentinel")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replica (-table +replica):\n%s", diff)
	}
	if crashes == 0 || batched == 0 {
		t.Errorf("%d crashes, %d batched runs: the seed exercised too little", crashes, batched)
	}
}
