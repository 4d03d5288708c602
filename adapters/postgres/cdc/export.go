package cdc

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
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
		w.rows = nil
		if !w.eof {
			if err := c.fetch(ctx); err != nil {
				return Event{}, false, err
			}
		}
		if len(w.rows) == 0 {
			w.copying, w.eof, w.next = false, false, 0
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
	i, tab := w.next, w.reading
	w.next++
	w.text = w.texts[w.ends[i]:w.ends[i+1]]
	w.row++
	pos := Cursor{LSN: w.at, Index: -1, Row: w.row}
	c.last = pos
	return Event{Op: Snapshot, Relation: tab.rel.name, New: Tuple{names: tab.rel.names, key: tab.rel.key, cols: w.rows[i], rel: tab.rel},
		LSN: w.at, Index: -1, TxEnd: w.next == len(w.rows), Cursor: c.cursor(pos)}, true, nil
}

// fetch reads the next rows of the first table, up to chunkRows of them,
// starting its COPY (in key order) first; none when the table is done.
// The server goes on sending while they are delivered: a COPY streams, with
// no round trip between batches.
func (c *conn) fetch(ctx context.Context) error {
	w := &c.snap
	t := w.prog.Tables[0]
	tab, err := c.snapTable(ctx, t)
	if err != nil {
		return err
	}
	if !w.copying {
		cols := make([]string, len(tab.cols))
		for i, n := range tab.cols {
			cols[i] = quoteIdent(n)
		}
		keys := make([]string, len(tab.keys))
		for i, n := range tab.keys {
			keys[i] = quoteIdent(n)
		}
		q := "COPY (SELECT " + strings.Join(cols, ", ") + " FROM " + tab.name.quoted() +
			" ORDER BY " + strings.Join(keys, ", ") + ") TO STDOUT"
		w.side.Frontend().Send(&pgproto3.Query{String: q})
		if err := w.side.Frontend().Flush(); err != nil {
			return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
		}
		w.copying, w.prefix, w.reading = true, w.prog.prefix(), tab
	}
	w.rows, w.eof, err = w.batch.read(ctx, w.side, len(tab.cols), c.src.chunkRows)
	if err != nil {
		return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
	}
	w.next = 0
	// Every row's progress in one string: a row's is a part of it.
	b := w.batch.texts[:0]
	w.ends = append(w.ends[:0], 0)
	for _, row := range w.rows {
		b = appendProgress(b, w.prefix, row, tab.keyIdx)
		w.ends = append(w.ends, len(b))
	}
	w.texts, w.batch.texts = string(b), b
	return nil
}

// copyBatch reads the rows of a COPY ... TO STDOUT in text format into
// tuples' columns, a batch at a time, all of a batch in a few allocations.
// The memory of a batch is never reused: its events may still be in hand.
type copyBatch struct {
	spans []span // the values of the batch's rows, in arena
	size  int    // the size of the last batch's values
	texts []byte // room for the encoding of the batch's progress
}

// span is a value in a batch's arena; off is -1 for NULL.
type span struct{ off, n int }

// read reads up to max rows of ncols columns of the COPY under way on pg;
// eof is true when the COPY ended. The end of ctx interrupts the read and
// leaves pg unusable.
func (b *copyBatch) read(ctx context.Context, pg *pgconn.PgConn, ncols, max int) (rows [][]*pglogrepl.TupleDataColumn, eof bool, err error) {
	// The context is watched once per batch, not per message as pgconn's
	// ReceiveMessage(ctx) would.
	nc, fired := pg.Conn(), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = nc.SetReadDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-fired
			err = ctx.Err()
		}
	}()
	arena := make([]byte, 0, b.size+b.size/8)
	b.spans = b.spans[:0]
	var failed error
	for n := 0; n < max && !eof; {
		if n == 64 && b.size == 0 && cap(arena) < len(arena)/64*max { // the first batch: room for max rows like these
			arena = append(make([]byte, 0, len(arena)/64*max*9/8), arena...)
		}
		msg, err := pg.ReceiveMessage(context.Background())
		if err != nil {
			return nil, false, err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if arena, err = b.decode(arena, m.Data, ncols); err != nil {
				return nil, false, err
			}
			n++
		case *pgproto3.ErrorResponse:
			failed = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			eof = true
		}
	}
	if failed != nil {
		return nil, false, failed
	}
	b.size = len(arena)
	data := make([]pglogrepl.TupleDataColumn, len(b.spans))
	ptrs := make([]*pglogrepl.TupleDataColumn, len(b.spans))
	for i, sp := range b.spans {
		data[i].DataType = pglogrepl.TupleDataTypeNull
		if sp.off >= 0 {
			data[i] = pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(sp.n), Data: arena[sp.off : sp.off+sp.n : sp.off+sp.n]}
		}
		ptrs[i] = &data[i]
	}
	rows = make([][]*pglogrepl.TupleDataColumn, len(b.spans)/ncols)
	for r := range rows {
		rows[r] = ptrs[r*ncols : (r+1)*ncols : (r+1)*ncols]
	}
	return rows, eof, nil
}

// decode appends the values of line, a row of COPY's text format, to arena
// and their spans to b.spans.
func (b *copyBatch) decode(arena, line []byte, ncols int) ([]byte, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if bytes.IndexByte(line, '\\') < 0 { // nothing escaped, no NULL: the values as they are
		base := len(arena)
		arena = append(arena, line...)
		off := 0
		for i := range ncols {
			end := bytes.IndexByte(line[off:], '\t')
			switch {
			case end < 0 && i < ncols-1:
				return arena, fmt.Errorf("cdc: a COPY row of %d columns, want %d", i+1, ncols)
			case end < 0:
				end = len(line) - off
			case i == ncols-1:
				return arena, fmt.Errorf("cdc: a COPY row of more than %d columns", ncols)
			}
			b.spans = append(b.spans, span{off: base + off, n: end})
			off += end + 1
		}
		return arena, nil
	}
	for i := range ncols {
		end := bytes.IndexByte(line, '\t')
		if end < 0 {
			if i < ncols-1 {
				return arena, fmt.Errorf("cdc: a COPY row of %d columns, want %d", i+1, ncols)
			}
			end = len(line)
		}
		v := line[:end]
		line = line[min(end+1, len(line)):]
		if string(v) == `\N` {
			b.spans = append(b.spans, span{off: -1})
			continue
		}
		off := len(arena)
		arena = unescapeCopy(arena, v)
		b.spans = append(b.spans, span{off: off, n: len(arena) - off})
	}
	if len(line) > 0 {
		return arena, fmt.Errorf("cdc: a COPY row of more than %d columns", ncols)
	}
	return arena, nil
}

// unescapeCopy appends the value v of COPY's text format, unescaped, to b.
func unescapeCopy(b, v []byte) []byte {
	for {
		i := bytes.IndexByte(v, '\\')
		if i < 0 || i == len(v)-1 {
			return append(b, v...)
		}
		b = append(b, v[:i]...)
		c, rest := v[i+1], v[i+2:]
		switch c {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'v':
			c = '\v'
		case 'x':
			if n, d := hexDigits(rest); n > 0 {
				c, rest = d, rest[n:]
			}
		default:
			if c >= '0' && c <= '7' {
				d, n := c-'0', 0
				for n < 2 && n < len(rest) && rest[n] >= '0' && rest[n] <= '7' {
					d = d<<3 | (rest[n] - '0')
					n++
				}
				c, rest = d, rest[n:]
			}
		}
		b = append(b, c)
		v = rest
	}
}

// hexDigits reads one or two hex digits at the start of s.
func hexDigits(s []byte) (n int, d byte) {
	for n < 2 && n < len(s) {
		var x byte
		switch c := s[n]; {
		case c >= '0' && c <= '9':
			x = c - '0'
		case c >= 'a' && c <= 'f':
			x = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			x = c - 'A' + 10
		default:
			return n, d
		}
		d = d<<4 | x
		n++
	}
	return n, d
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
	w.export, w.rows, w.next, w.texts, w.batch = false, nil, 0, "", copyBatch{}
	if w.side != nil {
		closeQuietly(context.Background(), w.side)
		w.side = nil
	}
}

// appendProgress appends the encoded progress whose tables are those of
// prefix (see progress.prefix) and whose key is row's to b: what
// progress.encode returns.
func appendProgress(b []byte, prefix string, row []*pglogrepl.TupleDataColumn, keyIdx []int) []byte {
	b = append(b, prefix...)
	for i, j := range keyIdx {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONText(b, row[j].Data)
	}
	return append(b, "]}"...)
}
