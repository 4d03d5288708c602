package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// BenchmarkRelay relays b.N rows committed before the relay starts (one
// transaction), from the program's start to the last row handled: into a
// Redis stream exactly once (-redis, a MULTI/EXEC a row), and with the
// cursor in a file saved every 100ms (-state, at least once). Run it with
// -benchtime 20000x: the program's start is part of the time.
func BenchmarkRelay(b *testing.B) {
	pg := pgtest.Start(b, pgtest.Options{})
	srv := redistest.Start(b)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := b.Context()
	pool, err := pgxpool.New(ctx, pg.DSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	runs := 0 // each run has a table and a stream of its own
	for _, mode := range []string{"redis", "file"} {
		b.Run(mode, func(b *testing.B) {
			runs++
			table := "outbox" + strconv.Itoa(runs)
			args := []string{"-dsn", pg.DSN(), "-table", table}
			if mode == "redis" {
				args = append(args, "-redis", srv.Addr, "-stream", "out"+strconv.Itoa(runs))
			} else {
				args = append(args, "-state", filepath.Join(b.TempDir(), "cursor.json"))
			}
			out := &lines{handled: map[int64]int{}}
			p := startRelay(b, args, out)
			poll(b, ctx, "the table", func() bool {
				var ok bool
				return pool.QueryRow(ctx, "SELECT to_regclass('"+table+"') IS NOT NULL").Scan(&ok) == nil && ok
			})
			if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (payload) SELECT 'x' FROM generate_series(1, $1)", b.N); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			poll(b, ctx, "every row handled", func() bool { return out.count() >= b.N })
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			p.cmd.Process.Kill()
			<-p.done
		})
	}
}
