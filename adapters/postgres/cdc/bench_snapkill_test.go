package cdc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/resumable-go/resumable/internal/testkit/childproc"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
)

// envSnapKillFull turns on the size for BenchmarkExampleSnapshotKill:
// 55,000 rows, kills at 20%, 40% and 60%. Unset: 20,000 rows, one kill at
// 30%.
const envSnapKillFull = "RESUMABLE_PG_SNAPKILL_FULL"

// BenchmarkExampleSnapshotKill measures a snapshot by examples/postgres
// with its default flags (-snapshot -format json) while 4 writers update
// the table at 200 transactions/s: once with no kill, once SIGKILLed at
// fractions of the rows. It reports the time from each restart to its
// first snapshot row (first_row_s, the longest), and the whole snapshot's
// time with the kills against without (killed_x). Run it with
// -benchtime 1x.
func BenchmarkExampleSnapshotKill(b *testing.B) {
	rows, kills := 20_000, []float64{0.3}
	if os.Getenv(envSnapKillFull) != "" {
		rows, kills = 55_000, []float64{0.2, 0.4, 0.6}
	}
	bin := exampleBin(b)
	for range b.N {
		plain, _ := snapKillRun(b, bin, rows, nil)
		killed, first := snapKillRun(b, bin, rows, kills)
		b.ReportMetric(plain.Seconds(), "plain_s")
		b.ReportMetric(killed.Seconds(), "killed_s")
		b.ReportMetric(killed.Seconds()/plain.Seconds(), "killed_x")
		b.ReportMetric(first.Seconds(), "first_row_s")
	}
}

// snapKillRun runs the example's snapshot of rows rows under writers,
// killed at each fraction of kills, and returns how long the snapshot
// took from the first start and the longest wait for a first snapshot row
// after a restart.
func snapKillRun(b *testing.B, bin string, rows int, kills []float64) (total, firstRow time.Duration) {
	dsn := pgtest.NewDB(b)
	slot := snapSetupPub(b, dsn, rows, "CREATE PUBLICATION pub FOR TABLE items")
	dir := b.TempDir()
	state, stdout, stderr := filepath.Join(dir, "cursor.json"), filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	args := []string{"-dsn", dsn, "-slot", slot, "-publication", "pub", "-state", state, "-snapshot", "-format", "json"}
	ctx, cancel := context.WithCancel(pgtest.Ctx(b))
	defer cancel()
	wg := paced(ctx, b, dsn, 4, 200, rows)
	defer wg.Wait()
	defer cancel()
	// Counted as the file grows: reading all of it at every poll would
	// take the CPU the example needs.
	var counted, seenRows, seenChanges int
	var part []byte // a line's start read last
	snapRows := func() int {
		f, err := os.Open(stdout)
		if err != nil {
			return seenRows
		}
		defer f.Close()
		data, _ := io.ReadAll(io.NewSectionReader(f, int64(counted), 1<<40))
		counted += len(data)
		data = append(part, data...)
		last := bytes.LastIndexByte(data, '\n') + 1
		n := bytes.Count(data[:last], []byte(`{"op":"snapshot"`))
		seenRows += n
		seenChanges += bytes.Count(data[:last], []byte("\n")) - n
		part = append([]byte(nil), data[last:]...)
		return seenRows
	}
	done := func() bool {
		c, ok := savedCursor(b, state)
		return ok && c.Snapshot == "" && c.LSN != 0
	}
	start := time.Now()
	var firsts []time.Duration // from each restart to its first snapshot row
	var before []int           // the changes printed meanwhile (polled: up to 20 ms more)
	var p *childproc.Proc
	run := func() {
		var err error
		if p, err = childproc.Start("example", bin, args, stdout, stderr); err != nil {
			b.Fatal(err)
		}
	}
	run()
	for _, f := range kills {
		replUntil(b, fmt.Sprintf("%.0f%% of the snapshot", f*100), func() bool { return snapRows() >= int(f*float64(rows)) })
		p.Kill()
		seen := snapRows()
		changes := seenChanges
		restart := time.Now()
		run()
		replUntil(b, "a snapshot row after the restart", func() bool { return snapRows() > seen || done() })
		firstRow = max(firstRow, time.Since(restart))
		firsts = append(firsts, time.Since(restart).Round(time.Millisecond))
		before = append(before, seenChanges-changes)
	}
	wait(b, "the snapshot's end", done, func() string {
		c, _ := savedCursor(b, state)
		return fmt.Sprintf("%d snapshot rows of %d, cursor %+v\n%s", snapRows(), rows, c, childproc.Tail(stderr, 10))
	})
	total = time.Since(start)
	p.Kill()
	snapRows()
	b.Logf("%d rows, kills at %v: the snapshot took %v, the first row after each restart %v (changes printed before it: %v), %d snapshot rows printed (%d again), %d changes\n%s",
		rows, kills, total.Round(time.Millisecond), firsts, before, seenRows, seenRows-rows, seenChanges, childproc.Tail(stderr, 6))
	return total, firstRow
}

// wait polls cond until it holds, failing b after the deadline with what
// state says.
func wait(b *testing.B, what string, cond func() bool, state func() string) {
	b.Helper()
	ctx := pgtest.Ctx(b)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			b.Fatalf("waiting for %s: %v; %s", what, ctx.Err(), state())
		case <-tick.C:
		}
	}
}

// paced starts writers that update random rows of items at rate
// transactions/s in all, until ctx ends.
func paced(ctx context.Context, b *testing.B, dsn string, writers, rate, ids int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return
			}
			defer conn.Close(context.Background())
			tick := time.NewTicker(time.Second * time.Duration(writers) / time.Duration(rate))
			defer tick.Stop()
			for i := w; ; i += writers {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := conn.Exec(ctx, "UPDATE items SET v = v + 1 WHERE id = $1", i*7919%ids+1); err != nil && ctx.Err() == nil {
					b.Errorf("update: %v", err)
					return
				}
			}
		}()
	}
	return &wg
}
