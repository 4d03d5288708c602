package cdc_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/testkit/pgtest"
	"github.com/resumable-go/resumable/stream"
)

// benchSlot makes a database with the table items, the publication pub
// and a slot, then commits rows rows in transactions of perTx rows. The
// slot is never confirmed by the benchmarks, so each reading of it sees
// every change again.
func benchSlot(b *testing.B, rows, perTx int) (dsn, slot string) {
	b.Helper()
	dsn = pgtest.NewDB(b)
	slot = replSetup(b, dsn)
	// One call, so one connection and one context: a context per
	// transaction kept 20,000 timers alive for the whole benchmark, which
	// the scheduler of this process (not pg_recvlogical's) walked.
	var txs []string
	for i := 0; i < rows; i += perTx {
		txs = append(txs, fmt.Sprintf("INSERT INTO items (id, v) SELECT g, g FROM generate_series(%d, %d) g", i+1, min(i+perTx, rows)))
	}
	replExec(b, dsn, txs...)
	return dsn, slot
}

// sourceRead reads n changes of slot through a Resumer over the Source,
// confirming nothing (its Store is not wrapped by Confirming).
func sourceRead(b *testing.B, dsn, slot string, n int, each func(cdc.Event)) {
	src, err := cdc.NewSource(dsn, slot, "pub")
	if err != nil {
		b.Fatal(err)
	}
	r, err := stream.New(src, cdc.Extract, cursor.NewMemory(cdc.Cursor{}))
	if err != nil {
		b.Fatal(err)
	}
	got := 0
	err = r.Run(pgtest.Ctx(b), func(_ context.Context, ev cdc.Event) error {
		if each != nil {
			each(ev)
		}
		if got++; got == n {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// plainRead reads n changes of slot with a plain pglogrepl receive loop,
// as pglogrepl's example does: a deadline per message for the status
// interval, Parse per message, the relation looked up per change.
func plainRead(b *testing.B, dsn, slot string, n int) {
	ctx := pgtest.Ctx(b)
	conn, err := pgconn.Connect(ctx, pgtest.Replication(dsn))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	args := []string{"proto_version '1'", "publication_names 'pub'"}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		b.Fatal(err)
	}
	rels := map[uint32]*pglogrepl.RelationMessage{}
	next := time.Now().Add(10 * time.Second)
	got, sink := 0, 0
	for got < n {
		if time.Now().After(next) {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{}); err != nil {
				b.Fatal(err)
			}
			next = time.Now().Add(10 * time.Second)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if pgconn.Timeout(err) {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		x, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			b.Fatal(err)
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			b.Fatal(err)
		}
		switch m := m.(type) {
		case *pglogrepl.RelationMessage:
			rels[m.RelationID] = m
		case *pglogrepl.InsertMessage:
			sink += len(rels[m.RelationID].Columns) + len(m.Tuple.Columns)
			got++
		case *pglogrepl.UpdateMessage:
			sink += len(rels[m.RelationID].Columns)
			got++
		case *pglogrepl.DeleteMessage:
			sink += len(rels[m.RelationID].Columns)
			got++
		}
	}
	if sink == 0 {
		b.Fatal("decoded nothing")
	}
}

// BenchmarkReplThroughput reads the same 100,000 changes (100 transactions
// of 1,000 rows) of one server through the Source (under a Resumer) and
// through a plain pglogrepl loop, in the same run; compare the events/s.
func BenchmarkReplThroughput(b *testing.B) {
	const rows = 100_000
	dsn, slot := benchSlot(b, rows, 1000)
	read := map[string]func(){
		"source":    func() { sourceRead(b, dsn, slot, rows, nil) },
		"pglogrepl": func() { plainRead(b, dsn, slot, rows) },
	}
	for _, name := range []string{"source", "pglogrepl", "source", "pglogrepl"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				awaitInactive(b, dsn, slot)
				b.StartTimer()
				read[name]()
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkReplMillionRowTransaction reads one transaction of a million
// rows through the Source and reports the peak heap in use while it
// streams: the Source holds one change at a time, never the transaction.
func BenchmarkReplMillionRowTransaction(b *testing.B) {
	const rows = 1_000_000
	dsn, slot := benchSlot(b, rows, rows)
	for b.Loop() {
		b.StopTimer()
		awaitInactive(b, dsn, slot)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, peak := ms.HeapInuse, ms.HeapInuse
		b.StartTimer()
		n := 0
		sourceRead(b, dsn, slot, rows, func(cdc.Event) {
			if n++; n%50_000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		})
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(peak-min(base, peak))/(1<<20), "heap-growth-MiB")
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "events/s")
	}
}
