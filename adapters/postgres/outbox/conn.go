package outbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgsql"
	"github.com/resumable-go/resumable/errclass"
)

// errClosed is what Recv returns once Close was called.
var errClosed = errors.New("outbox: connection closed")

// While committed rows are held back, a connection reads again after
// minHeldWait, doubling up to maxHeldWait (or the poll interval if
// shorter): the holder may end without notifying anyone (a rollback, a
// transaction that wrote elsewhere). A read is one index probe; ten a
// second during a long hold cost the server nothing noticeable.
const (
	minHeldWait = 10 * time.Millisecond
	maxHeldWait = 100 * time.Millisecond
)

// conn is one connection of a Source: a database connection of its
// own, the page read last, and the position after it.
type conn[T any] struct {
	src    *Source[T]
	sql    queries
	system string

	ctx    context.Context // ended by Close
	cancel context.CancelFunc

	mu    sync.Mutex // held by Recv while it uses pg, and by Close
	pg    *pgx.Conn  // nil once closed
	woken bool       // a notification arrived since the last read; set on Recv's goroutine, by pg

	batch   []Event[T]    // the page read last
	next    int           // the next of batch to deliver
	after   Cursor        // the last row read
	held    time.Duration // the wait while rows are held back; 0 when not
	deleted Cursor        // rows up to here were deleted by this connection
	row     userRow       // what scan is given
	idAt    int           // the column of id in the page's rows
}

// notified is pg's OnNotification: it runs inside a pg call on Recv's
// goroutine.
func (c *conn[T]) notified(*pgconn.PgConn, *pgconn.Notification) { c.woken = true }

// Recv returns the next row, reading the table when the page read last is
// delivered, and waiting for a notification (or the poll interval) when
// there is nothing to read.
func (c *conn[T]) Recv(ctx context.Context) (Event[T], error) {
	var zero Event[T]
	if c.next < len(c.batch) {
		ev := c.batch[c.next]
		c.batch[c.next] = zero
		c.next++
		return ev, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pg == nil {
		return zero, errClosed
	}
	ctx, stop := c.merge(ctx)
	defer stop()
	for {
		wait, err := c.read(ctx)
		if err != nil {
			return zero, c.ended(ctx, err)
		}
		if len(c.batch) > 0 {
			c.next = 1
			ev := c.batch[0]
			c.batch[0] = zero
			return ev, nil
		}
		if err := c.wait(ctx, wait); err != nil {
			return zero, c.ended(ctx, err)
		}
	}
}

// merge returns a context that ends with ctx or with Close.
func (c *conn[T]) merge(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// ended returns the error Recv returns for err: the caller's context's
// end, Close, or err itself.
func (c *conn[T]) ended(ctx context.Context, err error) error {
	switch {
	case c.ctx.Err() != nil:
		return errClosed
	case ctx.Err() != nil:
		return fmt.Errorf("outbox: table %s: %w", c.src.name, context.Cause(ctx))
	}
	return err
}

// read deletes what a Deleting store allows, then reads a page into batch
// and returns how long to wait for a notification when it is empty. A page
// that is not full is followed by a look at the snapshot: whether rows are
// held back, and whether the cursor still belongs to this server.
func (c *conn[T]) read(ctx context.Context) (time.Duration, error) {
	if err := c.delete(ctx); err != nil {
		return 0, err
	}
	c.woken = false
	if err := c.page(ctx); err != nil {
		c.batch, c.next = c.batch[:0], 0
		return 0, err
	}
	if len(c.batch) > 0 {
		c.after = c.batch[len(c.batch)-1].Cursor
		if len(c.batch) == cap(c.batch) {
			return 0, nil
		}
	}
	held, xmin, fresh, err := c.state(ctx)
	if err != nil {
		if len(c.batch) > 0 {
			return 0, nil // the rows first; the next read looks again
		}
		return 0, err
	}
	c.recordHold(ctx, held, xmin)
	if fresh && len(c.batch) == 0 {
		// A hold ended between the page and this look (a rollback, which
		// notifies nobody): rows the page could not see are visible now.
		return 0, nil
	}
	return c.nextWait(held), nil
}

// page reads the rows after c.after into batch.
func (c *conn[T]) page(ctx context.Context) error {
	c.batch, c.next = c.batch[:0], 0
	rows, err := c.pg.Query(ctx, c.sql.page, int64(c.after.Tx), c.after.Seq, cap(c.batch))
	if err != nil {
		return fmt.Errorf("outbox: table %s: reading after %v: %w", c.src.name, c.after, err)
	}
	defer rows.Close()
	c.row.rows = rows
	defer func() { c.row.rows = nil }()
	if c.row.dest == nil {
		c.row.dest = make([]any, ownColumns, 2*ownColumns)
	}
	for rows.Next() {
		raw, fds := rows.RawValues(), rows.FieldDescriptions()
		ev := Event[T]{Cursor: Cursor{Tx: uint64(rawInt(fds[0], raw[0])), Seq: rawInt(fds[c.idAt], raw[c.idAt]), System: c.system}}
		if ev.Row, err = c.src.scan(&c.row); err != nil {
			return fmt.Errorf("outbox: table %s: scanning the row at %v: %w", c.src.name, ev.Cursor, err)
		}
		c.batch = append(c.batch, ev)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("outbox: table %s: reading after %v: %w", c.src.name, c.after, err)
	}
	return nil
}

// state reads the snapshot: whether committed rows wait behind the running
// transaction xmin, and whether a row after the cursor became readable
// since the page was read (fresh). It checks that c.after belongs to this
// server, and that no row carries a transaction id the server has not
// assigned yet.
func (c *conn[T]) state(ctx context.Context) (held bool, xmin uint64, fresh bool, err error) {
	var lo, next int64
	var top *int64 // the largest xid of a visible row; nil: no row
	if err := c.pg.QueryRow(ctx, c.sql.state).Scan(&lo, &next, &top); err != nil {
		return false, 0, false, fmt.Errorf("outbox: table %s: reading the snapshot: %w", c.src.name, err)
	}
	if err := c.identity(c.after, uint64(next)); err != nil {
		return false, 0, false, err
	}
	if top != nil && *top >= next {
		// A visible row of a transaction not yet begun: the rows came from
		// another cluster (a dump restored into a new one keeps the old
		// ids). They would wait forever, and the rows written here after
		// them would come first.
		return false, 0, false, errclass.Permanent(fmt.Errorf("outbox: table %s has rows of transaction %d, but this server's next transaction is %d: rows copied from another cluster keep its transaction ids; give them new ones (UPDATE %s SET xid = pg_current_xact_id(), in one transaction) before relaying",
			c.src.name, *top, next, pgx.Identifier(c.src.table).Sanitize()))
	}
	fresh = top != nil && *top < lo && uint64(*top) > c.after.Tx
	return top != nil && *top >= lo, uint64(lo), fresh, nil
}

// nextWait returns how long to wait for a notification: the poll
// interval, or while rows are held back a wait that starts at minHeldWait
// and doubles up to maxHeldWait.
func (c *conn[T]) nextWait(held bool) time.Duration {
	poll := c.src.set.poll
	if !held {
		c.held = 0
		return poll
	}
	c.held = min(max(2*c.held, minHeldWait), maxHeldWait, poll)
	return c.held
}

// recordHold tells the Source what the read found, and looks up the
// backend of a new holder.
func (c *conn[T]) recordHold(ctx context.Context, held bool, xmin uint64) {
	if !c.src.setHold(held, xmin, time.Now()) {
		return
	}
	var pid int32
	// The PID only helps an operator: a failed look-up leaves it 0, and a
	// broken connection shows at the next read.
	if err := c.pg.QueryRow(ctx, holderSQL, strconv.FormatUint(xmin&0xffffffff, 10)).Scan(&pid); err == nil {
		c.src.setHolder(xmin, int(pid))
	}
}

// delete deletes the rows up to the cursor a Deleting store holds, once
// per cursor, when it belongs to this server.
func (c *conn[T]) delete(ctx context.Context) error {
	upTo, ok := c.src.toDelete()
	if !ok || Compare(upTo, c.deleted) <= 0 || (upTo.System != "" && upTo.System != c.system) {
		return nil
	}
	if _, err := c.pg.Exec(ctx, c.sql.del, int64(upTo.Tx), upTo.Seq); err != nil {
		return fmt.Errorf("outbox: table %s: deleting the rows up to %v: %w", c.src.name, upTo, err)
	}
	c.deleted = upTo
	return nil
}

// wait waits up to d for a notification (without LISTEN, d).
func (c *conn[T]) wait(ctx context.Context, d time.Duration) error {
	if c.woken {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if c.src.set.channel == "" {
		<-wctx.Done()
	} else if err := c.pg.PgConn().WaitForNotification(wctx); err != nil && (ctx.Err() != nil || wctx.Err() == nil) {
		return fmt.Errorf("outbox: table %s: waiting for a notification: %w", c.src.name, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// Close ends a pending Recv and closes the database connection. It may be
// called more than once.
func (c *conn[T]) Close() error {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pg != nil {
		pgsql.CloseConn(c.pg)
		c.pg = nil
	}
	return nil
}

// userRow is a row of the page statement as the scan function sees it:
// the table's columns other than xid, without the one the Source reads
// first (xid).
type userRow struct {
	rows pgx.Rows
	dest []any // Scan's destinations, the first ownColumns nil: kept between rows
}

const ownColumns = 1 // xid

func (r *userRow) FieldDescriptions() []pgconn.FieldDescription {
	return r.rows.FieldDescriptions()[ownColumns:]
}

func (r *userRow) Scan(dest ...any) error {
	r.dest = append(r.dest[:ownColumns], dest...)
	err := r.rows.Scan(r.dest...)
	clear(r.dest[ownColumns:])
	return err
}

func (r *userRow) Values() ([]any, error) {
	v, err := r.rows.Values()
	if err != nil {
		return nil, err
	}
	return v[ownColumns:], nil
}

func (r *userRow) RawValues() [][]byte { return r.rows.RawValues()[ownColumns:] }

// rawInt decodes an integer value (int8, int4, or xid8 read as int8) as
// pgx received it, binary or text.
func rawInt(fd pgconn.FieldDescription, b []byte) int64 {
	if fd.Format == pgx.BinaryFormatCode {
		switch len(b) {
		case 8:
			return int64(binary.BigEndian.Uint64(b))
		case 4:
			return int64(int32(binary.BigEndian.Uint32(b)))
		}
	}
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}
