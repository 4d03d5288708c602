package cdc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
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
// connection (side's, or a new one), returned.
func (s *Source) createSlotImporting(ctx context.Context, pg *pgconn.PgConn, side *sideDial) (*imported, error) {
	if !s.snapshot {
		return nil, s.createSlot(ctx, pg)
	}
	at, name, err := s.createExporting(ctx, pg)
	if err != nil {
		return nil, err
	}
	sc, err := s.sideConn(ctx, side)
	if err != nil {
		return nil, fmt.Errorf("cdc: snapshot: connecting: %w", err)
	}
	// The exported snapshot lives until pg runs its next command: import it
	// first. The name is the server's, of hex digits and dashes.
	if _, err := sc.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '"+name+"'").ReadAll(); err != nil {
		closeQuietly(ctx, sc)
		return nil, fmt.Errorf("cdc: snapshot: importing the slot's snapshot: %w", err)
	}
	return &imported{side: sc, at: at}, nil
}

// createExporting creates the stream's slot exporting its snapshot, and
// returns the slot's consistent point and the snapshot's name.
func (s *Source) createExporting(ctx context.Context, pg *pgconn.PgConn) (pglogrepl.LSN, string, error) {
	if s.failover {
		return s.createFailoverSlot(ctx, pg, "export")
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, pg, s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		return 0, "", fmt.Errorf("cdc: creating slot %q: %w", s.slot, err)
	}
	at, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, "", fmt.Errorf("cdc: creating slot %q: %w", s.slot, err)
	}
	return at, res.SnapshotName, nil
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
	c.setSide(imp.side)
	c.snap.export, c.snap.at = true, imp.at
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
		w.prog.Tables, w.prog.Listed = append(w.prog.Tables[:0], ts...), len(ts)
		w.text = w.prog.encode()
	}
	if len(w.prog.Tables) == 0 {
		c.endExport()
		return Event{}, false, nil
	}
	if w.next >= len(w.starts)-1 {
		w.rows, w.starts = nil, nil
		if !w.copying {
			ok, err := c.exportable(ctx)
			if err != nil {
				return Event{}, false, err
			}
			if !ok { // the rest is read by chunks, as after a restart
				c.endExport()
				return Event{}, false, nil
			}
		}
		if !w.eof {
			if err := c.fetch(ctx); err != nil {
				return Event{}, false, err
			}
		}
		if len(w.starts) <= 1 {
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
	start, end := w.starts[i], w.starts[i+1]
	return Event{Op: Snapshot, Relation: tab.rel.name, New: Tuple{rel: tab.rel, packed: w.rows[start:end:end]},
		LSN: w.at, Index: -1, TxEnd: w.next == len(w.starts)-1, Cursor: c.cursor(pos)}, true, nil
}

// exportable locks the first table of the progress (and its partitions)
// for the rest of the imported snapshot's transaction, and reports whether
// that snapshot can read its rows: not when the table was rewritten since
// (ALTER ... TYPE, a volatile default, TRUNCATE: the new files' rows are
// newer than the snapshot, which would see the table empty), or dropped,
// or cannot be locked, or its columns as the snapshot has them cannot be
// read now (a column dropped or renamed since). Then the export ends: the
// tables left are read by chunks interleaved with the changes, as after a
// restart.
func (c *conn) exportable(ctx context.Context) (bool, error) {
	w := &c.snap
	t := w.prog.Tables[0]
	// pg_class as the snapshot sees it, against the files the server uses
	// now (pg_relation_filenode reads the current catalog).
	_, err := query(ctx, w.side, "LOCK TABLE "+t.quoted()+" IN ACCESS SHARE MODE")
	var rewritten [][][]byte
	if err == nil {
		// pg_partition_tree has no rows for a table that is not partitioned.
		rewritten, err = query(ctx, w.side, `SELECT 1 FROM pg_class c
			WHERE (c.oid = $1::regclass OR c.oid IN (SELECT relid FROM pg_partition_tree($1::regclass)))
				AND c.relfilenode <> 0 AND c.relfilenode IS DISTINCT FROM pg_relation_filenode(c.oid) LIMIT 1`, t.quoted())
	}
	if err == nil && len(rewritten) == 0 {
		tab, terr := c.snapTable(ctx, t)
		if terr != nil {
			return false, terr
		}
		// The columns as the snapshot has them, parsed now.
		_, err = query(ctx, w.side, tab.selectRows("false"))
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe): // the server refused: the transaction is over
		return false, nil
	case err != nil:
		return false, classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
	}
	return len(rewritten) == 0, nil
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
		if err := startCopy(w.side, tab.copySelect(nil, 0)); err != nil {
			return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
		}
		w.copying, w.prefix, w.reading = true, w.prog.prefix(), tab
	}
	w.rows, w.eof, err = w.batch.read(ctx, w.side, len(tab.cols), c.src.chunkRows)
	if err != nil {
		return classify(fmt.Errorf("cdc: snapshot of %s: %w", t, err))
	}
	w.next, w.starts = 0, w.batch.starts
	// Every row's progress in one string: a row's is a part of it.
	b := w.batch.texts[:0]
	w.ends = append(w.ends[:0], 0)
	for i := range len(w.starts) - 1 {
		b = appendProgress(b, w.prefix, w.rows[w.starts[i]:w.starts[i+1]], tab.keyIdx)
		w.ends = append(w.ends, len(b))
	}
	w.texts, w.batch.texts = string(b), b
	return nil
}

// copySelect returns a COPY ... TO STDOUT of the table's published rows
// and columns in key order, of the rows after the key after (text values;
// none: from the first) and at most limit of them (0: all).
func (t *table) copySelect(after []string, limit int) string {
	keys := make([]string, len(t.keys))
	for i, n := range t.keys {
		keys[i] = quoteIdent(n)
	}
	var where []string
	if len(after) == len(keys) {
		vals := make([]string, len(after))
		for i, v := range after {
			vals[i] = quoteLiteral(v)
		}
		where = append(where, "("+strings.Join(keys, ", ")+") > ("+strings.Join(vals, ", ")+")")
	}
	q := t.selectRows(where...) + " ORDER BY " + strings.Join(keys, ", ")
	if limit > 0 {
		q += " LIMIT " + strconv.Itoa(limit)
	}
	return "COPY (" + q + ") TO STDOUT"
}

// selectRows returns a SELECT of the table's published columns from its
// rows that the publication's row filter and every condition of where
// pass.
func (t *table) selectRows(where ...string) string {
	cols := make([]string, len(t.cols))
	for i, n := range t.cols {
		cols[i] = quoteIdent(n)
	}
	if t.filter != "" {
		where = append([]string{"(" + t.filter + ")"}, where...)
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + t.name.quoted()
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q
}

// quoteLiteral quotes s as an SQL string constant, whatever
// standard_conforming_strings says: its type is the column's it is compared
// with.
func quoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// startCopy sends q, a COPY ... TO STDOUT, on pg; copyBatch.read reads
// what it returns, straight from the socket, so nothing may wait in pg's
// buffer before it.
func startCopy(pg *pgconn.PgConn, q string) error {
	if n := pg.Frontend().ReadBufferLen(); n > 0 {
		return fmt.Errorf("%d bytes from the server before the COPY", n)
	}
	pg.Frontend().Send(&pgproto3.Query{String: q})
	return pg.Frontend().Flush()
}

// copyBatch reads the rows of a COPY ... TO STDOUT in text format into
// packed rows (see packedCol), a batch at a time, all of a batch in one
// allocation. The memory of a batch is never reused: its events may still
// be in hand.
type copyBatch struct {
	starts []int  // where each row of the last batch starts, and where the last ends
	size   int    // the size of the last batch
	texts  []byte // room for the encoding of the batch's progress
	in     msgReader
}

// read reads up to max rows of ncols columns of the COPY under way on pg,
// packed one after the other (b.starts says where each starts); eof is
// true when the COPY ended. The end of ctx interrupts the read and leaves
// pg unusable.
func (b *copyBatch) read(ctx context.Context, pg *pgconn.PgConn, ncols, max int) (rows []byte, eof bool, err error) {
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
	b.starts = b.starts[:0]
	var failed error
	for n := 0; n < max && !eof; {
		if n == 64 && b.size == 0 && cap(arena) < len(arena)/64*max { // the first batch: room for max rows like these
			arena = append(make([]byte, 0, len(arena)/64*max*9/8), arena...)
		}
		typ, body, err := b.in.next(nc)
		if err != nil {
			return nil, false, err
		}
		switch typ {
		case 'd': // CopyData: a row
			b.starts = append(b.starts, len(arena))
			if arena, err = decodeCopy(arena, body, ncols); err != nil {
				return nil, false, err
			}
			n++
		case 'E': // ErrorResponse
			var m pgproto3.ErrorResponse
			if err := m.Decode(body); err != nil {
				return nil, false, err
			}
			failed = pgconn.ErrorResponseToPgError(&m)
		case 'Z': // ReadyForQuery: pgconn reads what follows
			if b.in.buffered() > 0 {
				return nil, false, fmt.Errorf("cdc: %d bytes from the server after the COPY's end", b.in.buffered())
			}
			eof = true
		case 'H', 'c', 'C', 'N', 'S', 'A': // the COPY's start, end and tag; a notice, a parameter, a notification
		default:
			return nil, false, fmt.Errorf("cdc: a message of type %q in a COPY", typ)
		}
	}
	if failed != nil {
		return nil, false, failed
	}
	b.size = len(arena)
	b.starts = append(b.starts, len(arena))
	return arena, eof, nil
}

// msgReader reads the backend's messages from a connection's socket a
// buffer at a time: pgconn's ReceiveMessage costs more per message than
// decoding a row. A COPY's messages are read by it alone, from its query
// to its ReadyForQuery, after which the server sends nothing unasked.
type msgReader struct {
	buf        []byte
	start, end int // the bytes read and not returned
}

// maxMessage bounds a message's size: PostgreSQL's own limit on a value is
// 1 GiB. The buffer grows with the bytes that arrive, never ahead of them, so
// a size a server claims and does not send costs nothing.
const maxMessage = 1<<30 + 1<<20

// next returns the type and the body of the next message read from nc. The
// body is valid until the next call.
func (r *msgReader) next(nc net.Conn) (byte, []byte, error) {
	const size = 128 << 10
	if len(r.buf) != size && r.start == r.end { // first, or after a message larger than size
		r.buf, r.start, r.end = make([]byte, size), 0, 0
	}
	for {
		need := 5 // the bytes of the next message
		if avail := r.end - r.start; avail >= 5 {
			n := int(binary.BigEndian.Uint32(r.buf[r.start+1:]))
			if n < 4 || n > maxMessage {
				return 0, nil, fmt.Errorf("cdc: a message of %d bytes from the server", n)
			}
			if avail >= 1+n {
				typ, body := r.buf[r.start], r.buf[r.start+5:r.start+1+n]
				r.start += 1 + n
				return typ, body, nil
			}
			need = 1 + n
		}
		if r.end == len(r.buf) { // full: make room after what is read of the message
			buf := r.buf
			if need > len(r.buf) { // larger than the buffer: twice the size, at most the message's
				buf = make([]byte, min(2*len(r.buf), need))
			}
			r.start, r.end, r.buf = 0, copy(buf, r.buf[r.start:r.end]), buf
		}
		n, err := nc.Read(r.buf[r.end:])
		r.end += n
		if err != nil && n == 0 {
			return 0, nil, err
		}
	}
}

// buffered returns the number of bytes read and not returned.
func (r *msgReader) buffered() int { return r.end - r.start }

// decodeCopy appends line, a row of ncols columns in COPY's text format,
// packed, to arena.
func decodeCopy(arena, line []byte, ncols int) ([]byte, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	hdr := len(arena)
	arena = growBy(arena, packedHeader(ncols))
	binary.LittleEndian.PutUint16(arena[hdr:], uint16(ncols))
	base := len(arena)
	if bytes.IndexByte(line, '\\') < 0 { // nothing escaped, no NULL: the values as they are, tabs for separators
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
			off += end
			binary.LittleEndian.PutUint32(arena[hdr+2+4*i:], uint32(off))
			off++
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
		if i > 0 {
			arena = append(arena, '\t')
		}
		at := uint32(len(arena) - base)
		if string(v) == `\N` {
			at |= packedNull
		} else {
			arena = unescapeCopy(arena, v)
			at = uint32(len(arena) - base)
		}
		binary.LittleEndian.PutUint32(arena[hdr+2+4*i:], at)
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

// endExport ends the imported snapshot's transaction.
func (c *conn) endExport() {
	w := &c.snap
	w.export, w.rows, w.starts, w.next, w.texts, w.batch = false, nil, nil, 0, "", copyBatch{}
	w.copying, w.eof, w.reading = false, false, nil
	clear(w.tabs) // described as of the snapshot
	if w.side != nil {
		closeQuietly(context.Background(), w.side)
		c.setSide(nil)
	}
}

// appendProgress appends the encoded progress whose tables are those of
// prefix (see progress.prefix) and whose key is row's to b: what
// progress.encode returns. row is packed (see packedCol).
func appendProgress(b []byte, prefix string, row []byte, keyIdx []int) []byte {
	b = append(b, prefix...)
	for i, j := range keyIdx {
		if i > 0 {
			b = append(b, ',')
		}
		v, _ := packedCol(row, j)
		b = appendJSONText(b, v)
	}
	return append(b, "]}"...)
}
