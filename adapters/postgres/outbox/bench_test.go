package outbox_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/outbox"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// benchOutboxRows is the table both relays of BenchmarkOutboxRelay read
// from start to end: 200 transactions of 100 rows.
const benchOutboxRows = 20000

// benchOutbox returns a pool on a database of b's own holding the outbox
// table with benchOutboxRows rows, and its Outbox.
func benchOutbox(b *testing.B) (*pgxpool.Pool, *outbox.Source[msg]) {
	b.Helper()
	pool := newPool(b, pgtest.NewDB(b))
	o := newOutbox(b, pool)
	openOutbox(b, o, outbox.Cursor{}).Close()
	for range benchOutboxRows / 100 {
		execSQL(b, pool, "INSERT INTO outbox (payload) SELECT 'payload ' || g FROM generate_series(1, 100) g")
	}
	execSQL(b, pool, "VACUUM ANALYZE outbox")
	return pool, o
}

// BenchmarkOutboxRelay reads the same 20,000 committed rows with the
// Outbox (a connection's Recv, as a Resumer calls it) and with a plain
// id > last loop of pages of the same size scanned the same way, each on a
// new connection of its own (a cold backend for both), connecting not
// counted. One op reads the table
// with both, in turns (which goes first alternates), so that a machine
// busy with other work slows both alike; outbox-rows/s and id>last-rows/s
// are their throughputs, ratio the first over the second.
func BenchmarkOutboxRelay(b *testing.B) {
	pool, o := benchOutbox(b)
	ctx := pgtest.Ctx(b)
	var outbox, naive time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			outbox += relayOutbox(b, ctx, o)
			naive += relayNaive(b, ctx, pool)
		} else {
			naive += relayNaive(b, ctx, pool)
			outbox += relayOutbox(b, ctx, o)
		}
	}
	b.ReportMetric(float64(benchOutboxRows*b.N)/outbox.Seconds(), "outbox-rows/s")
	b.ReportMetric(float64(benchOutboxRows*b.N)/naive.Seconds(), "id>last-rows/s")
	b.ReportMetric(naive.Seconds()/outbox.Seconds(), "ratio")
}

// relayOutbox reads the whole table with o and returns how long the reads
// took.
func relayOutbox(b *testing.B, ctx context.Context, o *outbox.Source[msg]) time.Duration {
	c, err := o.Open(ctx, outbox.Cursor{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	for range benchOutboxRows {
		if _, err := c.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// relayNaive reads the whole table id > last and returns how long the
// reads took.
func relayNaive(b *testing.B, ctx context.Context, pool *pgxpool.Pool) time.Duration {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig) // a new backend, as each Open has
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now()
	readIDGreater(b, ctx, conn, 0)
	return time.Since(start)
}

// BenchmarkOutboxRecv reads the 20,000 rows with a scan function that
// allocates nothing (it keeps the id, decoded from the raw value), so that
// allocs/row counts the Outbox's own: a page's query, none per row.
func BenchmarkOutboxRecv(b *testing.B) {
	pool, _ := benchOutbox(b)
	o, err := outbox.NewSource(pool, "outbox", func(row pgx.CollectableRow) (int64, error) {
		raw := row.RawValues()[0] // id, binary int8
		return int64(binary.BigEndian.Uint64(raw)), nil
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := pgtest.Ctx(b)
	b.ReportAllocs()
	var allocs uint64
	for b.Loop() {
		c, err := o.Open(ctx, outbox.Cursor{})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range benchOutboxRows {
			if _, err := c.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		allocs += after.Mallocs - before.Mallocs
		c.Close()
	}
	b.ReportMetric(float64(allocs)/float64(benchOutboxRows*b.N), "allocs/row")
}

// BenchmarkOutboxRelayWarm is BenchmarkOutboxRelay in a relay's steady
// state: each relay keeps one connection for the whole run, and each op
// first commits 20,000 new rows (200 transactions of 100, then VACUUM, not
// timed), which both then read.
func BenchmarkOutboxRelayWarm(b *testing.B) {
	pool, o := benchOutbox(b)
	ctx := pgtest.Ctx(b)
	c, err := o.Open(ctx, outbox.Cursor{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var last int64
	var outbox, naive time.Duration
	recvAll := func() {
		start := time.Now()
		for range benchOutboxRows {
			if _, err := c.Recv(ctx); err != nil {
				b.Fatal(err)
			}
		}
		outbox += time.Since(start)
	}
	pageAll := func() {
		start := time.Now()
		last = readIDGreater(b, ctx, conn, last)
		naive += time.Since(start)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i > 0 { // the first op reads the rows benchOutbox wrote
			b.StopTimer()
			for range benchOutboxRows / 100 {
				execSQL(b, pool, "INSERT INTO outbox (payload) SELECT 'payload ' || g FROM generate_series(1, 100) g")
			}
			execSQL(b, pool, "VACUUM outbox") // hint bits set: the relay that reads first does not pay for them
			b.StartTimer()
		}
		if i%2 == 0 {
			recvAll()
			pageAll()
		} else {
			pageAll()
			recvAll()
		}
	}
	b.ReportMetric(float64(benchOutboxRows*b.N)/outbox.Seconds(), "outbox-rows/s")
	b.ReportMetric(float64(benchOutboxRows*b.N)/naive.Seconds(), "id>last-rows/s")
	b.ReportMetric(naive.Seconds()/outbox.Seconds(), "ratio")
}

// readIDGreater reads benchOutboxRows rows after id last, id > last in
// pages of 500 (the Outbox's default batch), and returns the last id.
func readIDGreater(b *testing.B, ctx context.Context, conn *pgx.Conn, last int64) int64 {
	for n := 0; n < benchOutboxRows; {
		rows, err := conn.Query(ctx, "SELECT id, payload FROM outbox WHERE id > $1 ORDER BY id LIMIT 500", last)
		if err != nil {
			b.Fatal(err)
		}
		page, err := pgx.CollectRows(rows, pgx.RowToStructByName[msg])
		if err != nil {
			b.Fatal(err)
		}
		n += len(page)
		last = page[len(page)-1].ID
	}
	return last
}
