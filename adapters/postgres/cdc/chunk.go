package cdc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/errclass"
)

// snapWork is a connection's snapshot and backfill state.
type snapWork struct {
	prog     progress
	text     string // prog encoded, as every cursor carries it
	sent     string // the text of the last cursor made
	initial  bool   // the publication's tables are still to be listed
	side     *pgconn.PgConn
	tabs     map[tableName]*table
	chunk    *chunk
	fetching chan chunkRead // the next chunk of the table, read while the chunk's rows go out; nil: none
	recent   [1024]uint32   // xids of the transactions the stream read last
	nrecent  int
	retryAt  time.Time
	retries  int

	// Reading the snapshot the slot exported (see useImport).
	export  bool
	at      pglogrepl.LSN // the slot's consistent point
	copying bool          // the table's COPY is under way
	reading *table        // the table being read
	eof     bool          // the table's last rows were read
	rows    []byte        // the rows read, packed (see packedCol), one after the other
	starts  []int         // where each of rows starts in rows, and where the last ends
	texts   string        // the progress of each of rows, encoded, one after the other
	ends    []int         // where each row's progress ends in texts
	next    int           // the next of rows to deliver
	row     int           // rows delivered
	status  time.Time     // the last status update sent while reading
	prefix  string        // prog.prefix() of the table being read
	batch   copyBatch     // the reading of rows
}

// noteCommit records that the stream read the commit of xid.
func (w *snapWork) noteCommit(xid uint32) {
	w.recent[w.nrecent%len(w.recent)] = xid
	w.nrecent++
}

// readAny reports whether the stream read lately the commit of any of xids.
func (c *conn) readAny(xids []uint32) bool {
	return slices.ContainsFunc(xids, c.snap.readRecently)
}

// readRecently reports whether the stream read the commit of xid lately.
func (w *snapWork) readRecently(xid uint32) bool {
	n := min(w.nrecent, len(w.recent))
	for i := range n {
		if w.recent[i] == xid {
			return true
		}
	}
	return false
}

// idleWork runs between transactions: it takes the backfills asked for
// and starts the next chunk when none is in flight.
func (c *conn) idleWork(ctx context.Context) error {
	w := &c.snap
	c.takeRequests()
	if w.fetching != nil {
		return c.takePrefetched(ctx)
	}
	if w.chunk != nil || (len(w.prog.Tables) == 0 && !w.initial) || time.Now().Before(w.retryAt) {
		return nil
	}
	if w.side == nil {
		pg, err := pgconn.ConnectConfig(ctx, c.src.queryConfig())
		if err != nil {
			return classify(fmt.Errorf("cdc: snapshot: connecting: %w", err))
		}
		c.setSide(pg)
	}
	if w.initial || w.prog.expand {
		ts, err := c.src.publishedTables(ctx, w.side)
		if err != nil {
			return err
		}
		if w.initial { // the publication's tables first, then the backfills asked for
			w.initial = false
			listed := len(ts)
			for _, t := range w.prog.Tables {
				if !slices.Contains(ts[:listed], t) {
					ts = append(ts, t)
				}
			}
			w.prog.Tables, w.prog.Listed = ts, listed
		}
		w.prog = w.prog.expanded(ts)
		w.text = w.prog.encode()
		if len(w.prog.Tables) == 0 {
			return nil
		}
	}
	return c.readChunk(ctx)
}

// takeRequests adds the backfills asked of the Source to the connection's
// progress.
func (c *conn) takeRequests() {
	s := c.src
	if s.pending.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.requests {
		r := &s.requests[i]
		if !c.snap.prog.has(r.table) {
			c.snap.prog.Tables = append(c.snap.prog.Tables, r.table)
			c.snap.text = c.snap.prog.encode()
		}
		if !r.taken {
			r.taken, r.since = true, c.last
		}
	}
}

// snapTable returns the description of table t for the first pass's
// reads, looked up once in the imported snapshot (whose catalog does not
// change while it reads t: see exportable); chunks describe their table
// each in their own snapshot. It returns an error matching errNoTable or
// errNotPublished when t is gone, a permanent one when it cannot be read
// by key.
func (c *conn) snapTable(ctx context.Context, t tableName) (*table, error) {
	w := &c.snap
	if tab := w.tabs[t]; tab != nil {
		return tab, nil
	}
	tab, err := c.src.describe(ctx, w.side, t)
	switch {
	case errors.Is(err, ErrInvalid):
		return nil, errclass.Permanent(fmt.Errorf("cdc: snapshot: %w", err))
	case err != nil:
		return nil, fmt.Errorf("cdc: snapshot: %w", err)
	}
	if w.tabs == nil {
		w.tabs = map[tableName]*table{}
	}
	w.tabs[t] = tab
	return tab, nil
}

// readChunk reads the next chunk of the first table of the progress at a
// snapshot S and emits its watermark, or moves on to the next table when
// the first has no more rows or is gone.
func (c *conn) readChunk(ctx context.Context) error {
	w := &c.snap
	return c.useChunk(c.fetchChunk(ctx, w.side, chunkAt{t: w.prog.Tables[0], after: w.prog.After, prefix: w.prog.prefix(), limit: min(c.src.chunkRows, firstChunkRows)}))
}

// chunkAt is where a chunk starts: its table, the key after which (none:
// from the first row), and the progress's prefix (see progress.prefix);
// and how many rows it reads at most.
type chunkAt struct {
	t      tableName
	after  []string
	prefix string
	limit  int
}

// firstChunkRows bounds the first chunk a connection reads, which nothing
// was read ahead of: a resumed snapshot's first rows come after a read of
// this many, and the next chunks, full, are read while rows go out.
const firstChunkRows = 1000

// chunkRead is the outcome of fetchChunk.
type chunkRead struct {
	t   tableName
	k   *chunk        // nil: refused (see selectChunk), or failed
	at  pglogrepl.LSN // the watermark's position, when known
	err error
}

// fetchChunk reads the chunk at a on the side connection pg and emits its
// watermark. It touches nothing of the connection but the chunk buffers:
// while a chunk's rows go out, it runs beside Recv (see prefetch).
func (c *conn) fetchChunk(ctx context.Context, pg *pgconn.PgConn, a chunkAt) chunkRead {
	t := a.t
	k, err := c.selectChunk(ctx, pg, a)
	if err != nil || k == nil || len(k.rows) == 0 {
		return chunkRead{t: t, k: k, err: err}
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	k.mark = c.src.slot + "/" + hex.EncodeToString(token)
	// Transactional, so that its commit flushes it and the stream gets it
	// at once.
	at, err := query(ctx, pg, "SELECT pg_logical_emit_message(true, $1, $2)::text", watermarkPrefix, k.mark)
	if err != nil {
		return chunkRead{t: t, err: fmt.Errorf("emitting the watermark: %w", err)}
	}
	r := chunkRead{t: t, k: k}
	if len(at) == 1 && len(at[0]) == 1 {
		r.at, _ = pglogrepl.ParseLSN(string(at[0][0]))
	}
	return r
}

// useChunk makes the chunk fetchChunk read the one in flight, or moves on
// to the next table when it had no rows or the table is gone, or sets
// when to read it again when it was refused.
func (c *conn) useChunk(r chunkRead) error {
	w := &c.snap
	var pe *pgconn.PgError
	switch err := r.err; {
	case errors.Is(err, errNoTable) || errors.Is(err, errNotPublished) || (errors.As(err, &pe) && pe.Code == "42P01"): // dropped, or no longer published
		c.nextTable()
		return nil
	case errors.Is(err, ErrInvalid):
		return errclass.Permanent(fmt.Errorf("cdc: snapshot: %w", err))
	case err != nil:
		return classify(fmt.Errorf("cdc: snapshot of %s: %w", r.t, err))
	}
	if r.k != nil && c.readAny(r.k.xip) {
		// A transaction S saw running committed, and the stream read it
		// before the chunk began: its changes were not observed.
		r.k = nil
	}
	if r.k == nil { // refused: read it again a moment later
		w.retries++
		w.retryAt = time.Now().Add(min(time.Duration(w.retries)*10*time.Millisecond, maxChunkRetry))
		return nil
	}
	w.retries = 0
	if len(r.k.rows) == 0 {
		c.nextTable()
		return nil
	}
	w.chunk = r.k
	if r.at != 0 {
		c.src.waiting.Store(&chunkWait{table: r.t.String(), mark: r.at})
		c.src.waitRead.Store(uint64(c.walEnd))
	}
	return nil
}

// prefetch starts reading the chunk after k, whose watermark the stream
// just reached, while k's rows go out: the stream reads nothing until
// they are out, so the next chunk's snapshot is the one it would take
// after them. Only a full chunk of the table being read, when no listing
// of tables is due, has a next chunk read ahead.
func (c *conn) prefetch(k *chunk) {
	w := &c.snap
	if !k.more || k.redo || w.initial || w.prog.expand || w.side == nil || w.fetching != nil || len(w.prog.Tables) == 0 {
		return
	}
	ch := make(chan chunkRead, 1)
	w.fetching = ch
	pg, a := w.side, chunkAt{t: w.prog.Tables[0], after: k.last, prefix: w.prog.prefix(), limit: c.src.chunkRows}
	go func() { ch <- c.fetchChunk(context.Background(), pg, a) }() // Close cuts the side connection to end it
}

// takePrefetched waits for the chunk prefetch reads and makes it the one in
// flight.
func (c *conn) takePrefetched(ctx context.Context) error {
	w := &c.snap
	select {
	case r := <-w.fetching:
		w.fetching = nil
		return c.useChunk(r)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopPrefetch ends a prefetch still under way, cutting the side
// connection it reads, and waits for its end. Called by Close.
func (c *conn) stopPrefetch() {
	w := &c.snap
	if w.fetching == nil {
		return
	}
	if side := c.side.Load(); side != nil {
		_ = side.Conn().Close()
	}
	<-w.fetching
	w.fetching = nil
}

// chunkWait is a snapshot chunk waiting for its watermark, for Health.
type chunkWait struct {
	table string
	mark  pglogrepl.LSN // the watermark's position
}

// selectChunk reads on pg the rows of the chunk at a at a snapshot S, and
// S, with the table's columns and types as S sees them: an ALTER between
// two chunks changes the next chunk's. It returns nil when S cannot be
// used: a transaction S does not see committed while the rows were read
// (useChunk refuses one the stream read before the chunk began).
func (c *conn) selectChunk(ctx context.Context, pg *pgconn.PgConn, a chunkAt) (k *chunk, err error) {
	t := a.t
	defer func() { // also when the LOCK failed: BEGIN succeeded
		if _, rerr := pg.Exec(ctx, "ROLLBACK").ReadAll(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	// The lock before the snapshot: a rewrite of the table (ALTER ... TYPE)
	// committed after S would leave S nothing to read.
	if _, err := pg.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; LOCK TABLE "+t.quoted()+" IN ACCESS SHARE MODE").ReadAll(); err != nil {
		return nil, err
	}
	tab, err := c.src.describe(ctx, pg, t) // the first query: S is taken here
	if err != nil {
		return nil, err
	}
	snap, err := query(ctx, pg, "SELECT pg_current_snapshot()::text")
	if err != nil {
		return nil, err
	}
	xmax, xip, err := parseSnapshot(string(snap[0][0]))
	if err != nil {
		return nil, err
	}
	if err := startCopy(pg, tab.copySelect(a.after, a.limit)); err != nil {
		return nil, err
	}
	b := &c.snap.batch
	arena, _, err := b.read(ctx, pg, len(tab.cols), a.limit+1) // LIMIT: to the COPY's end
	if err != nil {
		return nil, err
	}
	committed, err := query(ctx, pg, "SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) x WHERE pg_xact_status(x) = 'committed' LIMIT 1")
	if err != nil {
		return nil, err
	}
	if len(committed) > 0 {
		return nil, nil
	}
	n := len(b.starts) - 1
	k = &chunk{tab: tab, xmax: xmax, xip: xip, more: n == a.limit, rows: make([][]byte, n)}
	// Every row's progress in one string, as the export's (see fetch).
	prefix, texts := a.prefix, b.texts[:0]
	k.ends = append(make([]int, 0, n+1), 0)
	for r := range n {
		row := arena[b.starts[r]:b.starts[r+1]:b.starts[r+1]]
		k.rows[r] = row
		texts = appendProgress(texts, prefix, row, tab.keyIdx)
		k.ends = append(k.ends, len(texts))
	}
	k.texts, b.texts = string(texts), texts
	if n > 0 {
		for _, j := range tab.keyIdx {
			v, _ := packedCol(k.rows[n-1], j)
			k.last = append(k.last, string(v))
		}
	}
	return k, nil
}

// keyIndex returns the positions of the key columns among the columns.
func (t *table) keyIndex() []int {
	idx := make([]int, len(t.keys))
	for i, k := range t.keys {
		for j, n := range t.cols {
			if n == k {
				idx[i] = j
			}
		}
	}
	return idx
}

// parseSnapshot parses pg_snapshot's text form xmin:xmax:xip,... into the
// 32-bit xids pgoutput reports.
func parseSnapshot(s string) (xmax uint32, xip []uint32, err error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, nil, fmt.Errorf("cdc: snapshot %q: not xmin:xmax:xip", s)
	}
	x, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("cdc: snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, p := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(p, 10, 64)
			if err != nil {
				return 0, nil, fmt.Errorf("cdc: snapshot %q: %w", s, err)
			}
			xip = append(xip, uint32(v))
		}
	}
	return uint32(x), xip, nil
}

// nextTable records the first table of the progress as read.
func (c *conn) nextTable() {
	w := &c.snap
	delete(w.tabs, w.prog.Tables[0])
	w.prog.Tables = w.prog.Tables[1:]
	w.prog.After = nil
	w.prog.Listed = max(w.prog.Listed-1, 0)
	w.text = w.prog.encode()
	if len(w.prog.Tables) == 0 && w.side != nil { // done: until the next backfill
		closeQuietly(context.Background(), w.side)
		c.setSide(nil)
	}
}

// observe drops the rows of the chunk in flight that a change the stream
// delivers, by a transaction the chunk's snapshot does not see, is newer
// than.
func (c *conn) observe(op Op, r *relation, old, new *pglogrepl.TupleData) {
	k := c.snap.chunk
	if k == nil || k.reached || r.name != k.tab.name.String() || k.sees(c.xid) {
		return
	}
	if op == Truncate {
		clear(k.keyAt)
		clear(k.rows)
		return
	}
	found := false
	for _, t := range []*pglogrepl.TupleData{old, new} {
		if t == nil {
			continue
		}
		kv := make([][]byte, 0, len(k.tab.keys))
		for _, name := range k.tab.keys {
			i := indexOf(r.names, name)
			if i < 0 || i >= len(t.Columns) || t.Columns[i].DataType != pglogrepl.TupleDataTypeText {
				kv = nil
				break
			}
			kv = append(kv, t.Columns[i].Data)
		}
		if kv == nil {
			continue
		}
		found = true
		if k.keyAt == nil { // the first change the chunk must look its rows up for
			k.index()
		}
		if i, ok := k.keyAt[keyOf(kv)]; ok {
			k.rows[i] = nil
		}
	}
	if !found { // the key was not sent (a TOASTed key left unchanged): read the chunk again
		clear(k.rows)
		k.redo = true
	}
}

// index maps the key of each of the chunk's rows to the row.
func (k *chunk) index() {
	k.keyAt = make(map[string]int, len(k.rows))
	kv := make([][]byte, len(k.tab.keyIdx))
	for r, row := range k.rows {
		if row == nil {
			continue
		}
		for i, j := range k.tab.keyIdx {
			kv[i], _ = packedCol(row, j)
		}
		k.keyAt[keyOf(kv)] = r
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// watermark notes a watermark message read at pos: the chunk whose it is
// has every transaction its snapshot sees delivered before it.
func (c *conn) watermark(content []byte, pos Cursor) {
	if k := c.snap.chunk; k != nil && !k.reached && string(content) == k.mark {
		k.reached, k.at = true, pos
		c.src.waiting.Store(nil)
		c.prefetch(k)
	}
}

// chunkRow returns the next row of a chunk whose watermark the stream
// reached; ok is false when the chunk is done (and the progress moved past
// it).
func (c *conn) chunkRow() (ev Event, ok bool) {
	w := &c.snap
	k := w.chunk
	for k.next < len(k.rows) {
		row := k.rows[k.next]
		k.next++
		if row == nil {
			continue
		}
		w.text = k.texts[k.ends[k.next-1]:k.ends[k.next]]
		pos := Cursor{LSN: k.at.LSN, Index: k.at.Index, Row: k.next}
		c.last = pos
		last := true
		for _, r := range k.rows[k.next:] {
			if r != nil {
				last = false
				break
			}
		}
		return Event{Op: Snapshot, Relation: k.tab.rel.name, New: Tuple{rel: k.tab.rel, packed: row},
			LSN: k.at.LSN, Index: k.at.Index, TxEnd: last, Cursor: c.cursor(pos)}, true
	}
	w.chunk = nil
	if k.redo {
		return Event{}, false
	}
	w.prog.After = k.last
	if !k.more {
		c.nextTable()
		return Event{}, false
	}
	w.text = w.prog.encode()
	return Event{}, false
}

// snapshotProgress returns a Progress event when the progress moved since
// the last cursor made (a chunk ended with rows dropped, a table was done
// or gone), so that the Store learns it without waiting for a change. Its
// position is just after the last event's.
func (c *conn) snapshotProgress() (Event, bool) {
	if c.snap.text == c.snap.sent || c.last.LSN == 0 {
		return Event{}, false
	}
	pos := Cursor{LSN: c.last.LSN, Index: c.last.Index, Row: c.last.Row + 1}
	c.last = pos
	return Event{Op: Progress, LSN: pos.LSN, Index: pos.Index, Cursor: c.cursor(pos)}, true
}
