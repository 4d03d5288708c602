package outbox_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// newPool returns a pool on dsn, closed when t ends.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(pgtest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// execSQL runs statements on pool.
func execSQL(t testing.TB, pool *pgxpool.Pool, sql ...string) {
	t.Helper()
	for _, q := range sql {
		if _, err := pool.Exec(pgtest.Ctx(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// effects returns the sequence numbers in the table effects, in order, as
// "count distinct min max" and the list of duplicates.
func effects(t testing.TB, pool *pgxpool.Pool, table string) (summary string, dups []int64) {
	t.Helper()
	ctx := pgtest.Ctx(t)
	var n, distinct, lo, hi int64
	err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*), count(DISTINCT seq), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM %s", table)).Scan(&n, &distinct, &lo, &hi)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, fmt.Sprintf("SELECT seq FROM %s GROUP BY seq HAVING count(*) > 1 ORDER BY seq LIMIT 20", table))
	if err != nil {
		t.Fatal(err)
	}
	dups, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("count=%d distinct=%d min=%d max=%d", n, distinct, lo, hi), dups
}

// want is the effects summary of events 1..n each applied once.
func want(n int64) string {
	if n == 0 {
		return "count=0 distinct=0 min=0 max=0"
	}
	return fmt.Sprintf("count=%d distinct=%d min=1 max=%d", n, n, n)
}
