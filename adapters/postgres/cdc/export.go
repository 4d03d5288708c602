package cdc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/errclass"
)

// imported is a transaction on a plain connection that imported the
// snapshot a new slot exported: it sees the database exactly as of the
// slot's consistent point, whatever the replication connection does next.
type imported struct {
	side *pgconn.PgConn
	at   pglogrepl.LSN // the slot's consistent point
}

// createSlotImporting creates the stream's slot; with WithSnapshot it
// exports the slot's snapshot and imports it into a transaction of a plain
// connection, returned.
func (s *Source) createSlotImporting(ctx context.Context, pg *pgconn.PgConn) (*imported, error) {
	if !s.snapshot {
		return nil, s.createSlot(ctx, pg)
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, pg, s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return nil, fmt.Errorf("cdc: creating slot %q: %w", s.slot, err)
	}
	at, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return nil, fmt.Errorf("cdc: creating slot %q: %w", s.slot, err)
	}
	side, err := pgconn.ConnectConfig(ctx, s.queryConfig())
	if err != nil {
		return nil, fmt.Errorf("cdc: snapshot: connecting: %w", err)
	}
	// The exported snapshot lives until pg runs its next command: import it
	// first. The name is the server's, of hex digits and dashes.
	if _, err := side.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '"+res.SnapshotName+"'").ReadAll(); err != nil {
		closeQuietly(ctx, side)
		return nil, fmt.Errorf("cdc: snapshot: importing the slot's snapshot: %w", err)
	}
	return &imported{side: side, at: at}, nil
}

// close ends the import when no connection took it.
func (imp *imported) close(ctx context.Context) {
	if imp != nil && imp.side != nil {
		closeQuietly(ctx, imp.side)
	}
}

// useImport makes the connection deliver every published table's rows as
// of imp before any change: rows at the slot's consistent point, which
// every change delivered after them follows.
func (c *conn) useImport(imp *imported) {
	c.snap.side, c.snap.export, c.snap.at = imp.side, true, imp.at
	imp.side = nil
}

// exportRow returns the next row read in the imported snapshot; ok is false
// when a table ended (or the whole snapshot: the connection then goes on
// with chunks, if a backfill was asked for, and the stream).
func (c *conn) exportRow(ctx context.Context) (ev Event, ok bool, err error) {
	w := &c.snap
	if w.initial {
		ts, err := c.src.publishedTables(ctx, w.side)
		if err != nil {
			return Event{}, false, err
		}
		w.initial = false
		w.prog.Tables = append(w.prog.Tables[:0], ts...)
		w.text = w.prog.encode()
	}
	if len(w.prog.Tables) == 0 {
		c.endExport()
		return Event{}, false, nil
	}
	if w.next >= len(w.rows) {
		if !w.eof {
			if err := c.fetch(ctx); err != nil {
				return Event{}, false, err
			}
		}
		if len(w.rows) == 0 || w.eof && w.next >= len(w.rows) {
			if _, err := w.side.Exec(ctx, "CLOSE resumable_snapshot").ReadAll(); err != nil {
				return Event{}, false, classify(fmt.Errorf("cdc: snapshot: %w", err))
			}
			w.declared, w.eof, w.rows, w.next = false, false, w.rows[:0], 0
			c.nextTable()
			if len(w.prog.Tables) == 0 {
				c.endExport()
			}
			return Event{}, false, nil
		}
	}
	// The server ends a replication connection that says nothing for
	// wal_sender_timeout: tell it where the stream is while rows go out.
	if w.row%1024 == 0 && time.Since(w.status) >= c.src.interval {
		if err := c.sendStatus(); err != nil {
			return Event{}, false, err
		}
		w.status = time.Now()
	}
	row, tab := w.rows[w.next], w.tabs[w.prog.Tables[0]]
	w.next++
	w.text = progressAt(w.prefix, row, tab.keyIdx)
	w.row++
	pos := Cursor{LSN: w.at, Index: -1, Row: w.row}
	c.last = pos
	return Event{Op: Snapshot, Relation: tab.rel.name, New: Tuple{names: tab.rel.names, key: tab.rel.key, cols: row, rel: tab.rel},
		LSN: w.at, Index: -1, TxEnd: w.next == len(w.rows), Cursor: c.cursor(pos)}, true, nil
}

// fetch reads the next rows of the first table, declaring its cursor
// (in key order) first.
func (c *conn) fetch(ctx context.Context) error {
	w := &c.snap
	t := w.prog.Tables[0]
	tab := w.tabs[t]
	if tab == nil {
		var err error
		tab, err = c.src.describe(ctx, w.side, t)
		switch {
		case errors.Is(err, ErrInvalid):
			return errclass.Permanent(fmt.Errorf("cdc: snapshot: %w", err))
		case err != nil:
			return fmt.Errorf("cdc: snapshot: %w", err)
		}
		if w.tabs == nil {
			w.tabs = map[tableName]*table{}
		}
		w.tabs[t] = tab
	}
	if !w.declared {
		cols := make([]string, len(tab.cols))
		for i, n := range tab.cols {
			cols[i] = quoteIdent(n)
		}
		keys := make([]string, len(tab.keys))
		for i, n := range tab.keys {
			keys[i] = quoteIdent(n)
		}
		q := "DECLARE resumable_snapshot NO SCROLL CURSOR FOR SELECT " + strings.Join(cols, ", ") +
			" FROM " + tab.name.quoted() + " ORDER BY " + strings.Join(keys, ", ")
		if _, err := w.side.Exec(ctx, q).ReadAll(); err != nil {
			return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
		}
		w.declared = true
	}
	// The next FETCH is sent before the rows of this one are delivered, so
	// that the server reads while the handler works.
	fetch := "FETCH FORWARD " + strconv.Itoa(c.src.chunkRows) + " FROM resumable_snapshot"
	if w.ahead == nil {
		w.ahead = w.side.Exec(ctx, fetch)
	}
	rows, err := readRows(w.ahead, &w.arena)
	w.ahead = nil
	if err != nil {
		return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
	}
	w.eof = len(rows) < c.src.chunkRows
	if !w.eof {
		w.ahead = w.side.Exec(ctx, fetch)
	}
	w.rows, w.next = rows, 0
	w.prefix = w.prog.prefix()
	return nil
}

// readRows reads the rows of a query's results as tuples' columns, all in
// a few allocations: the rows of one FETCH share their memory.
// sizeHint is the size of the previous FETCH's values.
func readRows(mrr *pgconn.MultiResultReader, sizeHint *int) ([][]*pglogrepl.TupleDataColumn, error) {
	type span struct{ off, n int }
	arena := make([]byte, 0, *sizeHint+*sizeHint/8)
	var spans []span
	ncols := 0
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			vals := rr.Values()
			ncols = len(vals)
			for _, v := range vals {
				if v == nil {
					spans = append(spans, span{off: -1})
					continue
				}
				spans = append(spans, span{off: len(arena), n: len(v)})
				arena = append(arena, v...)
			}
		}
		if _, err := rr.Close(); err != nil {
			_ = mrr.Close()
			return nil, err
		}
	}
	if err := mrr.Close(); err != nil {
		return nil, err
	}
	*sizeHint = len(arena)
	if ncols == 0 {
		return nil, nil
	}
	data := make([]pglogrepl.TupleDataColumn, len(spans))
	ptrs := make([]*pglogrepl.TupleDataColumn, len(spans))
	for i, sp := range spans {
		data[i].DataType = pglogrepl.TupleDataTypeNull
		if sp.off >= 0 {
			data[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: arena[sp.off : sp.off+sp.n : sp.off+sp.n]}
		}
		ptrs[i] = &data[i]
	}
	rows := make([][]*pglogrepl.TupleDataColumn, len(spans)/ncols)
	for r := range rows {
		rows[r] = ptrs[r*ncols : (r+1)*ncols : (r+1)*ncols]
	}
	return rows, nil
}

// textRow makes a tuple's columns of a row of text values.
func textRow(vals [][]byte) []*pglogrepl.TupleDataColumn {
	cols := make([]*pglogrepl.TupleDataColumn, len(vals))
	data := make([]pglogrepl.TupleDataColumn, len(vals))
	for i, v := range vals {
		data[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: v}
		if v == nil {
			data[i].DataType = pglogrepl.TupleDataTypeNull
		}
		cols[i] = &data[i]
	}
	return cols
}

// endExport ends the imported snapshot's transaction.
func (c *conn) endExport() {
	w := &c.snap
	w.export, w.rows, w.next, w.ahead = false, nil, 0, nil
	if w.side != nil {
		closeQuietly(context.Background(), w.side)
		w.side = nil
	}
}

// progressAt returns the encoded progress whose tables are those of prefix
// (see progress.prefix) and whose key is row's: what progress.encode
// returns, in one allocation.
func progressAt(prefix string, row []*pglogrepl.TupleDataColumn, keyIdx []int) string {
	var b strings.Builder
	n := len(prefix) + 3
	for _, j := range keyIdx {
		n += len(row[j].Data) + 3
	}
	b.Grow(n + 8)
	var buf [64]byte
	b.WriteString(prefix)
	for i, j := range keyIdx {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendJSONText(buf[:0], row[j].Data))
	}
	b.WriteString("]}")
	return b.String()
}
