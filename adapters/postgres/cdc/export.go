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
		if err := c.fetch(ctx); err != nil {
			return Event{}, false, err
		}
		if len(w.rows) == 0 {
			if _, err := w.side.Exec(ctx, "CLOSE resumable_snapshot").ReadAll(); err != nil {
				return Event{}, false, classify(fmt.Errorf("cdc: snapshot: %w", err))
			}
			w.declared = false
			c.nextTable()
			if len(w.prog.Tables) == 0 {
				c.endExport()
			}
			return Event{}, false, nil
		}
	}
	// The server ends a replication connection that says nothing for
	// wal_sender_timeout: tell it where the stream is while rows go out.
	if time.Since(w.status) >= c.src.interval {
		if err := c.sendStatus(); err != nil {
			return Event{}, false, err
		}
		w.status = time.Now()
	}
	row, tab := w.rows[w.next], w.tabs[w.prog.Tables[0]]
	w.next++
	w.prog.After = w.prog.After[:0:0]
	for _, j := range tab.keyIndex() {
		w.prog.After = append(w.prog.After, string(row[j].Data))
	}
	w.text = w.prog.encode()
	w.row++
	pos := Cursor{LSN: w.at, Index: -1, Row: w.row}
	c.last = pos
	return Event{Op: Snapshot, Relation: tab.rel.name, New: Tuple{names: tab.rel.names, cols: row, rel: tab.rel},
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
	rows, err := query(ctx, w.side, "FETCH FORWARD "+strconv.Itoa(c.src.chunkRows)+" FROM resumable_snapshot")
	if err != nil {
		return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
	}
	w.rows, w.next = w.rows[:0], 0
	for _, vals := range rows {
		w.rows = append(w.rows, textRow(vals))
	}
	return nil
}

// textRow makes a tuple's columns of a row of text values.
func textRow(vals [][]byte) []*pglogrepl.TupleDataColumn {
	cols := make([]*pglogrepl.TupleDataColumn, len(vals))
	for i, v := range vals {
		cols[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: v}
		if v == nil {
			cols[i].DataType = pglogrepl.TupleDataTypeNull
		}
	}
	return cols
}

// endExport ends the imported snapshot's transaction.
func (c *conn) endExport() {
	w := &c.snap
	w.export, w.rows, w.next = false, nil, 0
	if w.side != nil {
		closeQuietly(context.Background(), w.side)
		w.side = nil
	}
}
