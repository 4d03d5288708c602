package cdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// closeTimeout bounds the goodbye of a connection being closed.
const closeTimeout = 5 * time.Second

// errServerEnded is the failure of a connection the server ended its
// replication on (CopyDone). It is retried.
var errServerEnded = errors.New("cdc: the server ended the replication stream")

// relation is what a Relation message said about a table.
type relation struct {
	name  string   // schema.name
	names []string // column names, in order
	key   []bool   // whether each column is part of the replica identity's key
	oids  []uint32 // column type OIDs
	mods  []int32  // column type modifiers (atttypmod)
}

// conn is one replication connection. Recv and Close share mu: Close takes
// it to close the connection politely, or, when a Recv holds it, closes the
// socket under it first.
type conn struct {
	src *Source
	id  identity

	mu        sync.Mutex
	closeOnce sync.Once
	pg        *pgconn.PgConn
	side      atomic.Pointer[pgconn.PgConn] // snap.side, for Close to unblock a Recv reading it

	rels map[uint32]*relation
	from Cursor // the cursor Open started after (the loaded one when further)
	skip Cursor // changes at or before it were handled before this Open
	last Cursor // the position of the last event delivered, or skip

	inTx   bool          // between a Begin and its Commit
	txLSN  pglogrepl.LSN // the transaction's commit LSN
	txTime time.Time     // the transaction's commit time
	xid    uint32
	idx    int // index of the transaction's last change seen

	// ahead is a change read but not delivered yet: it is delivered when
	// the next message shows whether it ends its transaction.
	ahead   Event
	isAhead bool

	snap snapWork // the snapshot and backfills under way

	trunc     []uint32      // relations of a Truncate still to deliver
	walEnd    pglogrepl.LSN // the furthest position the server reported
	idleAt    pglogrepl.LSN // the furthest position a keepalive reported with no transaction in flight
	progress  time.Time     // when the last Progress event was made (or the connection opened)
	statusBuf []byte

	// A save waits to be confirmed (set by Source.hold, cleared by
	// sendStatus), and when the last status update was sent (unix ns).
	confirm  atomic.Bool
	statusAt atomic.Int64
	deadline time.Time // the read deadline sendStatus or confirmDue set last

	// The context of the Recv calls, watched once for all of them (see
	// watchCtx), not per message as pgconn's ReceiveMessage(ctx) would.
	watched  <-chan struct{} // its Done; nil: none watched
	unwatch  func() bool
	fired    chan struct{} // closed once its end made reads time out
	ctxEnded atomic.Bool   // the watched context ended: reads time out at once
}

func newConn(s *Source, pg *pgconn.PgConn, id identity, after Cursor) (*conn, error) {
	prog, err := decodeProgress(after.Snapshot)
	if err != nil {
		return nil, err
	}
	return &conn{
		src:  s,
		id:   id,
		pg:   pg,
		from: after,
		rels: make(map[uint32]*relation),
		skip: Cursor{LSN: after.LSN, Index: after.Index, Row: after.Row},
		last: Cursor{LSN: after.LSN, Index: after.Index, Row: after.Row},
		snap: snapWork{prog: prog, text: after.Snapshot, initial: s.snapshot && after.fresh()},

		progress: time.Now(),
	}, nil
}

// quietSlack is how far the server's position must be beyond the last
// event for a Progress event: more than the WAL a Store's own save of the
// previous position writes (a row, its commit, a full-page image), so that
// saving a Progress event never makes the next one.
const quietSlack = 64 << 10

// idle returns a Progress event at the position the server last reported
// with no transaction in flight, when one is due: that position lies more
// than quietSlack beyond the last event, and no Progress event was made
// within the status interval. Progress only frees the WAL of writes the
// publication does not publish: at most one per interval is enough.
func (c *conn) idle() (Event, bool) {
	// Nor while a chunk waits for its watermark: its rows go at it.
	if c.inTx || c.snap.chunk != nil || c.idleAt <= c.last.LSN+quietSlack || time.Since(c.progress) < c.src.interval {
		return Event{}, false
	}
	c.progress = time.Now()
	c.last = Cursor{LSN: c.idleAt, Index: -1}
	return Event{Op: Progress, LSN: c.idleAt, Index: -1, Cursor: c.cursor(c.last)}, true
}

// Recv returns the next change, or a Progress event when the server
// reported a position past the last event with no transaction in flight.
// It answers the server's keepalives and sends a standby status update at
// every status interval while it waits.
func (c *conn) Recv(ctx context.Context) (Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.snap.chunk != nil && c.snap.chunk.reached {
			if ev, ok := c.chunkRow(); ok {
				return ev, nil
			}
			continue
		}
		if c.snap.export {
			ev, ok, err := c.exportRow(ctx)
			if err != nil || ok {
				return ev, err
			}
			continue
		}
		if !c.inTx && !c.isAhead && len(c.trunc) == 0 && c.snap.chunk == nil {
			if err := c.idleWork(ctx); err != nil {
				return Event{}, err
			}
			if ev, ok := c.snapshotProgress(); ok {
				return ev, nil
			}
		}
		if len(c.trunc) > 0 {
			ev, ok, err := c.truncated()
			if err != nil || ok {
				return ev, err
			}
			continue
		}
		if c.confirm.Load() {
			if err := c.confirmDue(); err != nil {
				return Event{}, err
			}
		}
		c.watchCtx(ctx)
		msg, err := c.pg.ReceiveMessage(context.Background()) // ctx is watched by watchCtx
		if err != nil {
			if ctx.Err() != nil {
				return Event{}, ctx.Err()
			}
			if pgconn.Timeout(err) { // the status deadline: only the read timed out
				if err := c.sendStatus(); err != nil {
					return Event{}, err
				}
				if ev, ok := c.idle(); ok {
					return ev, nil
				}
				continue
			}
			return Event{}, classify(fmt.Errorf("cdc: replication of slot %q: %w", c.src.slot, err))
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			ev, ok, err := c.handle(m.Data)
			if err != nil || ok {
				return ev, err
			}
		case *pgproto3.ErrorResponse:
			return Event{}, classify(fmt.Errorf("cdc: replication of slot %q: %w", c.src.slot, pgconn.ErrorResponseToPgError(m)))
		case *pgproto3.CopyDone:
			return Event{}, errServerEnded
		}
	}
}

// handle decodes one CopyData message of the replication stream. ok is true
// when it made an event to deliver.
func (c *conn) handle(data []byte) (ev Event, ok bool, err error) {
	if len(data) == 0 {
		return Event{}, false, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return Event{}, false, fmt.Errorf("cdc: replication of slot %q: %w", c.src.slot, err)
		}
		c.walEnd = max(c.walEnd, k.ServerWALEnd)
		if k.ReplyRequested {
			if err := c.sendStatus(); err != nil {
				return Event{}, false, err
			}
		}
		// Everything committed before the keepalive's position was sent
		// before it: with no transaction in flight, the stream is there.
		if !c.inTx {
			c.idleAt = max(c.idleAt, k.ServerWALEnd)
		}
		ev, ok := c.idle()
		return ev, ok, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return Event{}, false, fmt.Errorf("cdc: replication of slot %q: %w", c.src.slot, err)
		}
		c.walEnd = max(c.walEnd, x.WALStart)
		if c.snap.chunk != nil && !c.snap.chunk.reached { // for Health: how far the watermark is
			c.src.waitRead.Store(uint64(x.WALStart))
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			return Event{}, false, fmt.Errorf("cdc: replication of slot %q at %v: %w", c.src.slot, x.WALStart, err)
		}
		return c.message(m)
	}
	return Event{}, false, nil
}

// message handles one pgoutput message.
func (c *conn) message(m pglogrepl.Message) (Event, bool, error) {
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		c.rels[m.RelationID] = newRelation(m)
	case *pglogrepl.BeginMessage:
		if c.inTx {
			return Event{}, false, c.protocolError("a Begin inside transaction %v", c.txLSN)
		}
		c.inTx, c.txLSN, c.txTime, c.xid, c.idx = true, m.FinalLSN, m.CommitTime, m.Xid, -1
		c.src.noteBegin(m.FinalLSN, m.CommitTime)
	case *pglogrepl.CommitMessage:
		if !c.inTx || m.CommitLSN != c.txLSN {
			return Event{}, false, c.protocolError("a Commit at %v outside transaction %v", m.CommitLSN, c.txLSN)
		}
		c.inTx = false
		c.snap.noteCommit(c.xid)
		if c.isAhead { // the transaction's last change
			c.isAhead = false
			ev := c.ahead
			ev.TxEnd = true
			c.ahead = Event{}
			return ev, true, nil
		}
	case *pglogrepl.LogicalDecodingMessage:
		return c.logicalMessage(m)
	case *pglogrepl.InsertMessage:
		return c.change(Insert, m.RelationID, nil, m.Tuple, 0)
	case *pglogrepl.UpdateMessage:
		return c.change(Update, m.RelationID, m.OldTuple, m.NewTuple, m.OldTupleType)
	case *pglogrepl.DeleteMessage:
		return c.change(Delete, m.RelationID, m.OldTuple, nil, m.OldTupleType)
	case *pglogrepl.TruncateMessage:
		c.trunc = append(c.trunc[:0], m.RelationIDs...)
		return c.truncated()
	}
	return Event{}, false, nil
}

// truncated delivers the next relation of a Truncate.
func (c *conn) truncated() (Event, bool, error) {
	id := c.trunc[0]
	c.trunc = c.trunc[1:]
	return c.change(Truncate, id, nil, nil, 0)
}

// change numbers a change within its transaction and makes its event,
// unless the cursor the connection was opened after covers it.
// oldType is 'K' when old holds the replica identity's key only (its
// other columns are not sent), 'O' when it is the whole old row.
func (c *conn) change(op Op, rel uint32, old, new *pglogrepl.TupleData, oldType uint8) (Event, bool, error) {
	if !c.inTx {
		return Event{}, false, c.protocolError("a %v outside a transaction", op)
	}
	c.idx++
	pos := Cursor{LSN: c.txLSN, Index: c.idx}
	if Compare(pos, c.skip) <= 0 {
		return Event{}, false, nil // handled before this Open
	}
	r := c.rels[rel]
	if r == nil {
		return Event{}, false, c.protocolError("a %v of relation %d, which no Relation message described", op, rel)
	}
	c.observe(op, r, old, new)
	c.last = pos
	ev := Event{Op: op, Relation: r.name, XID: c.xid, LSN: c.txLSN, Index: c.idx, CommitTime: c.txTime, Cursor: c.cursor(pos)}
	if old != nil {
		ev.Old = Tuple{keyOnly: oldType == 'K', cols: old.Columns, rel: r}
	}
	if new != nil {
		ev.New = Tuple{cols: new.Columns, rel: r}
		if old != nil && oldType != 'K' {
			fillUnchanged(new.Columns, old.Columns)
		}
	}
	return c.readAhead(ev)
}

// readAhead delivers the change read before ev, if any, and keeps ev until
// the next message tells whether it ends its transaction. A transaction's
// Commit follows its last change in the stream, so no event waits for
// anything but the bytes already on their way.
func (c *conn) readAhead(ev Event) (Event, bool, error) {
	prev, had := c.ahead, c.isAhead
	c.ahead, c.isAhead = ev, true
	return prev, had, nil
}

// cursor returns pos with the connection's identity.
func (c *conn) cursor(pos Cursor) Cursor {
	pos.System, pos.Timeline, pos.Slot = c.id.system, c.id.timeline, c.id.slot
	pos.Snapshot = c.snap.text
	c.snap.sent = c.snap.text
	return pos
}

func (c *conn) protocolError(format string, args ...any) error {
	return fmt.Errorf("cdc: replication of slot %q: unexpected pgoutput message: "+format, append([]any{c.src.slot}, args...)...)
}

// sendStatus sends a standby status update and sets the deadline of the
// next one. The flush position is the LSN of the last cursor the Store
// holds, when it was read from this server and slot; 0 (which the server
// ignores) otherwise.
func (c *conn) sendStatus() error {
	c.confirm.Store(false) // before reading what the Store holds: a save after it sets it again
	var flush pglogrepl.LSN
	if saved := c.src.held(); c.id.matches(saved) {
		flush = saved.LSN
	}
	now := time.Now()
	c.statusBuf = appendStatus(c.statusBuf[:0], c.walEnd, flush, now)
	if err := c.pg.Frontend().SendUnbufferedEncodedCopyData(c.statusBuf); err != nil {
		return fmt.Errorf("cdc: replication of slot %q: sending standby status: %w", c.src.slot, err)
	}
	c.src.statuses.Add(1)
	c.statusAt.Store(now.UnixNano())
	// The next read that would wait past the interval times out, and
	// Recv sends the next update; sooner when a save came meanwhile.
	next := now.Add(c.src.interval)
	if c.confirm.Load() {
		next = now.Add(c.src.confirmGap())
	}
	return c.setDeadline(next)
}

// setDeadline sets the read deadline of the replication connection.
func (c *conn) setDeadline(at time.Time) error {
	c.deadline = at
	if err := c.readDeadline(at); err != nil {
		return fmt.Errorf("cdc: replication of slot %q: %w", c.src.slot, err)
	}
	return nil
}

// readDeadline sets the socket's read deadline to at, or to the past once
// the watched context ended: whichever of this and the context's end comes
// last, a read then times out at once.
func (c *conn) readDeadline(at time.Time) error {
	err := c.pg.Conn().SetReadDeadline(at)
	if c.ctxEnded.Load() {
		err = c.pg.Conn().SetReadDeadline(time.Unix(1, 0))
	}
	return err
}

// watchCtx makes the reads of the replication connection time out once
// ctx ends, unless ctx is the context watched already. Recv then returns
// ctx's error. Called with mu held.
func (c *conn) watchCtx(ctx context.Context) {
	done := ctx.Done()
	if done == c.watched && c.unwatch != nil {
		return
	}
	c.unwatchCtx()
	if done == nil { // never ends
		return
	}
	fired := make(chan struct{})
	c.watched, c.fired = done, fired
	c.unwatch = context.AfterFunc(ctx, func() {
		defer close(fired)
		c.ctxEnded.Store(true)
		_ = c.pg.Conn().SetReadDeadline(time.Unix(1, 0))
	})
}

// unwatchCtx stops watching the context watchCtx watched, restoring the
// read deadline when its end had moved it. Called with mu held.
func (c *conn) unwatchCtx() {
	if c.unwatch != nil && !c.unwatch() {
		<-c.fired
		c.ctxEnded.Store(false)
		_ = c.pg.Conn().SetReadDeadline(c.deadline)
	}
	c.watched, c.unwatch, c.fired = nil, nil, nil
}

// confirmDue sends a status update for a save when confirmGap has passed
// since the last one, and otherwise makes sure the next read times out
// then (a save's own deadline may have been overwritten by sendStatus).
func (c *conn) confirmDue() error {
	at := time.Unix(0, c.statusAt.Load()).Add(c.src.confirmGap())
	switch {
	case !time.Now().Before(at):
		return c.sendStatus()
	case c.deadline.After(at):
		return c.setDeadline(at)
	}
	return nil
}

// confirmGap is the least time between two status updates sent because a
// cursor was saved: a save per event costs no status update per event.
func (s *Source) confirmGap() time.Duration { return min(confirmGap, s.interval) }

// confirmGap bounds how long a saved cursor waits before it is confirmed.
const confirmGap = 50 * time.Millisecond

// confirmSoon makes the connection confirm the cursor the Store now holds
// within confirmGap of its last status update: Recv sends one before its
// next read, or when the read it waits in times out. It is called by
// Source.hold, from any goroutine.
func (c *conn) confirmSoon() {
	c.confirm.Store(true)
	_ = c.readDeadline(time.Unix(0, c.statusAt.Load()).Add(c.src.confirmGap()))
}

// pgEpoch is PostgreSQL's epoch, 2000-01-01 UTC.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// appendStatus appends a CopyData message holding a standby status update
// to buf: written up to write, flushed and applied up to flush. With
// nothing to confirm (flush 0) every position is 0, which the server
// ignores: a write position alone would be taken as the flush position by
// helpers that fill in a missing one, and so confirmed.
func appendStatus(buf []byte, write, flush pglogrepl.LSN, now time.Time) []byte {
	if flush == 0 {
		write = 0
	}
	write = max(write, flush)
	buf = append(buf, 'd', 0, 0, 0, 4+1+8+8+8+8+1)
	buf = append(buf, pglogrepl.StandbyStatusUpdateByteID)
	buf = binary.BigEndian.AppendUint64(buf, uint64(write))
	buf = binary.BigEndian.AppendUint64(buf, uint64(flush))
	buf = binary.BigEndian.AppendUint64(buf, uint64(flush))
	buf = binary.BigEndian.AppendUint64(buf, uint64(now.Sub(pgEpoch).Microseconds()))
	return append(buf, 0) // no reply requested
}

// setSide makes pg (nil: none) the connection the snapshot and backfills
// read by SQL.
func (c *conn) setSide(pg *pgconn.PgConn) {
	c.snap.side = pg
	c.side.Store(pg)
}

// abandon closes the connection without a goodbye: its sockets first, so
// that Close waits on no server. A connection parked by Confirming's Load
// whose context ended is closed so: the goroutine closing it ends at once,
// not up to closeTimeout after the stream's Run returned.
func (c *conn) abandon() {
	_ = c.pg.Conn().Close()
	if side := c.side.Load(); side != nil {
		_ = side.Conn().Close()
	}
	_ = c.Close()
}

// Close ends the connection. It may be called more than once, and
// concurrently with Recv, which it unblocks.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.src.live.CompareAndSwap(c, nil)
		c.src.waiting.Store(nil)
		if !c.mu.TryLock() { // unblock the pending Recv, whichever connection it reads
			_ = c.pg.Conn().Close()
			if side := c.side.Load(); side != nil {
				_ = side.Conn().Close()
			}
			c.mu.Lock()
		}
		defer c.mu.Unlock()
		c.unwatchCtx()
		c.stopPrefetch()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = c.pg.Close(ctx)
		<-c.pg.CleanupDone()
		if c.snap.side != nil {
			_ = c.snap.side.Close(ctx)
		}
	})
	return nil
}
