package cdc_test

import (
	"context"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// BenchmarkSnapshot reads a table of two integer columns and a 100-byte
// text through WithSnapshot (a fresh slot per round, its creation counted)
// and through COPY (SELECT …) TO STDOUT on the same server, in the same
// run, in the table's order and in key order (as the snapshot reads, to
// resume by key); compare the rows/s. It reports the peak heap in use
// during the snapshot, and the CPU time this process (the client) used per
// row. The sub-benchmark chunked reads it as a stream whose slot was made
// before its first start does, and as a resumed snapshot or a backfill do:
// by key chunks, each delivered at its watermark. The sub-benchmark pairs
// reads a snapshot and the two COPYs back to back in each round
// and reports the median of the rounds' ratios: on a machine whose speed
// drifts between runs, the ratio of reads made side by side is the
// steadier number. 100,000 rows; 1,000,000 with RESUMABLE_PG_SOAK=1.
func BenchmarkSnapshot(b *testing.B) {
	rows := 100_000
	if os.Getenv("RESUMABLE_PG_SOAK") != "" {
		rows = 1_000_000
	}
	dsn := pgtest.NewDB(b)
	replExec(b, dsn,
		"CREATE TABLE snap (id int PRIMARY KEY, n int NOT NULL, t text NOT NULL)",
		fmt.Sprintf("INSERT INTO snap SELECT g, g * 7, repeat(md5(g::text), 4)::char(100) FROM generate_series(1, %d) g", rows),
		"CREATE PUBLICATION pub FOR TABLE snap",
		"VACUUM ANALYZE snap",
	)
	slots := 0
	// snapshot reads the table through a new slot: its exported snapshot,
	// or by chunks when the slot was made before the stream's first start.
	snapshot := func(b *testing.B, chunked bool) (time.Duration, uint64) {
		slots++
		slot := fmt.Sprintf("bench_snap_%d_%d", replSlots.Add(1), slots)
		if chunked {
			replExec(b, dsn, "SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak, n := ms.HeapInuse, 0
		start := time.Now()
		src, err := cdc.NewSource(dsn, slot, "pub", cdc.WithSnapshot(0))
		if err != nil {
			b.Fatal(err)
		}
		r, err := stream.New(src, cdc.Extract, cursor.NewMemory(cdc.Cursor{}))
		if err != nil {
			b.Fatal(err)
		}
		err = r.Run(pgtest.Ctx(b), func(_ context.Context, ev cdc.Event) error {
			if n++; n%20_000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
			if n == rows {
				return stream.ErrStop
			}
			return nil
		})
		took := time.Since(start)
		b.StopTimer()
		awaitInactive(b, dsn, slot)
		replExec(b, dsn, "SELECT pg_drop_replication_slot('"+slot+"')")
		b.StartTimer()
		if err != nil {
			b.Fatal(err)
		}
		return took, peak
	}
	// Each returns the time its read took (what the harness does after
	// it, such as dropping the slot, left out) and the peak heap seen.
	read := map[string]func(b *testing.B) (time.Duration, uint64){
		"snapshot":     func(b *testing.B) (time.Duration, uint64) { return snapshot(b, false) },
		"chunked":      func(b *testing.B) (time.Duration, uint64) { return snapshot(b, true) },
		"copy":         func(b *testing.B) (time.Duration, uint64) { return copyOut(b, dsn, rows, ""), 0 },
		"copy-ordered": func(b *testing.B) (time.Duration, uint64) { return copyOut(b, dsn, rows, " ORDER BY id"), 0 },
		"fetch": func(b *testing.B) (time.Duration, uint64) { // a cursor and FETCH, as the first pass read before COPY
			start := time.Now()
			pg, err := pgconn.Connect(pgtest.Ctx(b), dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer pg.Close(context.Background())
			if _, err := pg.Exec(pgtest.Ctx(b), "BEGIN; DECLARE c NO SCROLL CURSOR FOR SELECT id, n, t FROM snap ORDER BY id").ReadAll(); err != nil {
				b.Fatal(err)
			}
			for n := 0; n < rows; {
				res, err := pg.Exec(pgtest.Ctx(b), "FETCH 10000 FROM c").ReadAll()
				if err != nil {
					b.Fatal(err)
				}
				n += len(res[0].Rows)
			}
			return time.Since(start), 0
		},
	}
	for _, name := range []string{"snapshot", "chunked", "copy", "copy-ordered", "fetch", "snapshot", "chunked", "copy", "copy-ordered", "fetch"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var peak uint64
			var took time.Duration
			cpu := cpuTime()
			for b.Loop() {
				t, p := read[name](b)
				took, peak = took+t, max(peak, p)
			}
			b.ReportMetric(float64(rows*b.N)/took.Seconds(), "rows/s")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/1e3/float64(rows*b.N), "client-cpu-µs/row")
			if peak > 0 {
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
	b.Run("pairs", func(b *testing.B) {
		var vsCopy, vsOrdered []float64
		var peak uint64
		for i := 0; b.Loop(); i++ {
			var snap, copied, ordered time.Duration
			var p uint64
			if i%2 == 0 { // alternating which goes first
				snap, p = read["snapshot"](b)
				copied, ordered = copyOut(b, dsn, rows, ""), copyOut(b, dsn, rows, " ORDER BY id")
			} else {
				copied, ordered = copyOut(b, dsn, rows, ""), copyOut(b, dsn, rows, " ORDER BY id")
				snap, p = read["snapshot"](b)
			}
			peak = max(peak, p)
			vsCopy = append(vsCopy, copied.Seconds()/snap.Seconds())
			vsOrdered = append(vsOrdered, ordered.Seconds()/snap.Seconds())
		}
		reportSpread(b, vsCopy, "snapshot/copy")
		reportSpread(b, vsOrdered, "snapshot/copy-ordered")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(0, "ns/op")
	})
}

// reportSpread reports the median of v as unit, and its least and
// greatest as unit-min and unit-max.
func reportSpread(b *testing.B, v []float64, unit string) {
	b.ReportMetric(median(v), unit)
	b.ReportMetric(slices.Min(v), unit+"-min")
	b.ReportMetric(slices.Max(v), unit+"-max")
}

// median returns the median of v, which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// copyOut reads the table snap through COPY (SELECT …) TO STDOUT, and
// returns the time it took.
func copyOut(b *testing.B, dsn string, rows int, order string) time.Duration {
	start := time.Now()
	pg, err := pgconn.Connect(pgtest.Ctx(b), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close(context.Background())
	tag, err := pg.CopyTo(pgtest.Ctx(b), io.Discard, "COPY (SELECT id, n, t FROM snap"+order+") TO STDOUT")
	if err != nil || tag.RowsAffected() != int64(rows) {
		b.Fatalf("COPY = %v, %v", tag, err)
	}
	return time.Since(start)
}

// BenchmarkReplTyped reads the same 100,000 changes through the Source,
// taking each column's text (as before typed values) or decoding it with
// Tuple.Value; compare the events/s.
func BenchmarkReplTyped(b *testing.B) {
	const rows = 100_000
	dsn, slot := benchSlot(b, rows, 1000)
	text := func(ev cdc.Event) {
		for i := range ev.New.Len() {
			_, v, _ := ev.New.Column(i)
			sinkBytes += len(v)
		}
	}
	typed := func(ev cdc.Event) {
		for i := range ev.New.Len() {
			v, err := ev.New.Value(i)
			if err != nil {
				b.Fatal(err)
			}
			if v != nil {
				sinkBytes++
			}
		}
	}
	for _, name := range []string{"text", "typed", "text", "typed"} {
		each := text
		if name == "typed" {
			each = typed
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				awaitInactive(b, dsn, slot)
				b.StartTimer()
				sourceRead(b, dsn, slot, rows, each)
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

var sinkBytes int

// BenchmarkReplVsRecvlogical reads the same changes through the Source
// (under a Resumer) and through pg_recvlogical (PostgreSQL's C client,
// pgoutput, --endpos, output to /dev/null), each from its own copy of one
// slot, in the same run: 20,000 changes in single-row transactions and in
// transactions of 1,000 rows; compare the events/s, the CPU time each
// client used per event (the server's is the same for both) and the
// context switches of each client's threads.
func BenchmarkReplVsRecvlogical(b *testing.B) {
	const bin = "/usr/lib/postgresql/15/bin/pg_recvlogical"
	if _, err := os.Stat(bin); err != nil {
		b.Skip(bin, ": ", err)
	}
	const rows = 20_000
	for _, perTx := range []int{1, 1000} {
		dsn, slot := benchSlot(b, rows, perTx)
		end := currentLSN(b, dsn)
		copies := 0
		fresh := func() string { // a copy of the slot, never confirmed
			copies++
			c := fmt.Sprintf("%s_c%d", slot, copies)
			replExec(b, dsn, "SELECT pg_copy_logical_replication_slot('"+slot+"', '"+c+"')")
			return c
		}
		// Each returns the CPU time its client used (this process's, or
		// pg_recvlogical's) and its context switches: a client woken once
		// per few messages spends most of its CPU being woken.
		read := map[string]func(c string) (time.Duration, int64){
			"source": func(c string) (time.Duration, int64) {
				t, sw := cpuTime(), switches()
				sourceRead(b, dsn, c, rows, nil)
				return cpuTime() - t, switches() - sw
			},
			"pg_recvlogical": func(c string) (time.Duration, int64) {
				cmd := osexec.Command(bin, "-d", dsn, "-S", c, "--start", "--no-loop", "-E", end,
					"-o", "proto_version=1", "-o", "publication_names=pub", "-f", "/dev/null")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("pg_recvlogical: %v\n%s", err, out)
				}
				return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), childSwitches(cmd.ProcessState)
			},
		}
		// Side by side: each round reads a copy of the slot through each,
		// the first alternating; the ratios are the Source's over
		// pg_recvlogical's (events/s, client CPU, context switches).
		b.Run(fmt.Sprintf("tx%d/pairs", perTx), func(b *testing.B) {
			var speed, cpu, sw []float64
			for i := 0; b.Loop(); i++ {
				order := []string{"source", "pg_recvlogical"}
				if i%2 == 1 {
					slices.Reverse(order)
				}
				took, used, woke := map[string]time.Duration{}, map[string]time.Duration{}, map[string]int64{}
				for _, name := range order {
					c := fresh()
					start := time.Now()
					used[name], woke[name] = read[name](c)
					took[name] = time.Since(start)
					awaitInactive(b, dsn, c)
					replExec(b, dsn, "SELECT pg_drop_replication_slot('"+c+"')")
				}
				speed = append(speed, took["pg_recvlogical"].Seconds()/took["source"].Seconds())
				cpu = append(cpu, used["source"].Seconds()/used["pg_recvlogical"].Seconds())
				sw = append(sw, float64(woke["source"])/float64(max(woke["pg_recvlogical"], 1)))
			}
			reportSpread(b, speed, "events/s-x")
			reportSpread(b, cpu, "client-cpu-x")
			reportSpread(b, sw, "cswitch-x")
			b.ReportMetric(0, "ns/op")
		})
		for _, name := range []string{"source", "pg_recvlogical", "source", "pg_recvlogical"} {
			b.Run(fmt.Sprintf("tx%d/%s", perTx, name), func(b *testing.B) {
				var cpu time.Duration
				var sw int64
				for b.Loop() {
					b.StopTimer()
					c := fresh()
					b.StartTimer()
					used, woke := read[name](c)
					cpu, sw = cpu+used, sw+woke
					b.StopTimer()
					awaitInactive(b, dsn, c)
					replExec(b, dsn, "SELECT pg_drop_replication_slot('"+c+"')")
					b.StartTimer()
				}
				b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(rows*b.N), "client-cpu-µs/event")
				b.ReportMetric(float64(sw)/float64(rows*b.N), "cswitches/event")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// currentLSN returns the server's current WAL position.
func currentLSN(b *testing.B, dsn string) string {
	conn, err := pgconn.Connect(pgtest.Ctx(b), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(pgtest.Ctx(b), "SELECT pg_current_wal_lsn()::text").ReadAll()
	if err != nil {
		b.Fatal(err)
	}
	return string(res[0].Rows[0][0])
}
