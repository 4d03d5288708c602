package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgerr"
	"github.com/resumable-go/resumable/adapters/postgres/internal/pgsql"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// Source is a [stream.Source] over an outbox table: the rows writers
// insert in the transactions of their changes, relayed in the order of
// those transactions, none ever skipped. Make one with [NewSource].
//
// Each row carries the id of the transaction that inserted it (a column
// xid of type xid8, DEFAULT pg_current_xact_id()) beside its sequence (a
// column id, bigserial). A connection reads only the rows of transactions
// older than every transaction still running
// (pg_snapshot_xmin(pg_current_snapshot())), in (xid, id) order: every
// transaction that could still add a row has a larger xid than any row
// read, so no row ever appears behind the cursor. A relay polling
// id > last skips rows: ids are taken at insert, transactions commit in
// another order. The price: a transaction that stays open, anywhere in the
// cluster, holds the relay back until it ends ([Source.Hold] reports it).
// See docs/outbox.md.
//
// A Source serves one stream at a time; each connection has a database
// connection of its own (configured as the pool's, its AfterConnect run),
// which LISTENs for the writers' notifications and polls at
// [WithPollInterval] without them.
type Source[T any] struct {
	pool  *pgxpool.Pool
	table []string
	name  string // the table as given, for messages
	scan  pgx.RowToFunc[T]
	set   settings

	mu        sync.Mutex
	hold      Hold
	confirmed Cursor // the cursor a Deleting store holds
	deleting  bool
}

var _ stream.Source[Event[int], Cursor] = (*Source[int])(nil)

// Cursor is a position in an outbox: after the row Seq of the transaction
// Tx, on the server System. The zero Cursor is before every row. [Compare]
// orders cursors; cursor.JSON stores them.
type Cursor struct {
	// Tx is the xid8 of the transaction that inserted the row.
	Tx uint64 `json:"tx"`
	// Seq is the row's id.
	Seq int64 `json:"seq"`
	// System is the server's system identifier; empty until a row was read,
	// or when the role may not read it (pg_control_system).
	System string `json:"system,omitempty"`
}

// Compare orders cursors by position, as cmp.Compare does: by Tx, then by
// Seq; System is not compared. It is the order for stream.WithCursorOrder.
func Compare(a, b Cursor) int {
	if r := cmp.Compare(a.Tx, b.Tx); r != 0 {
		return r
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// Compare is [Compare](c, d).
//
// Deprecated: use the function [Compare]; the method stays for
// postgres.OutboxCursor.Compare, which is this method.
func (c Cursor) Compare(d Cursor) int { return Compare(c, d) }

// String formats c as "tx 1234 id 56".
func (c Cursor) String() string {
	return "tx " + strconv.FormatUint(c.Tx, 10) + " id " + strconv.FormatInt(c.Seq, 10)
}

// Event is one row of an outbox: its position and the row as the Source's
// scan function made it.
type Event[T any] struct {
	Cursor Cursor
	Row    T
}

// Extract is the [cursor.Extractor] of a [Source]'s events, for
// stream.New and postgres.Transactional.
func Extract[T any](ev Event[T]) (Cursor, error) { return ev.Cursor, nil }

// Hold says what holds a [Source] back: committed rows wait behind the
// transaction Tx, still running since before they committed. The zero
// Hold means nothing does.
type Hold struct {
	// Since is when the relay first found committed rows it may not read yet.
	Since time.Time
	// Tx is the oldest running transaction (the snapshot's xmin).
	Tx uint64
	// PID is the process id of Tx's backend (pg_stat_activity.pid); 0 when
	// none is visible to the role: a prepared transaction, another user's
	// session without pg_read_all_stats.
	PID int
}

// Option configures [NewSource].
type Option interface {
	apply(*settings)
}

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

// settings are what the Options set.
type settings struct {
	columns string // WithCreate's
	create  bool
	channel string // "": no LISTEN
	poll    time.Duration
	batch   int
	errs    []error
}

// Defaults of the Options and of NewResumer.
const (
	defaultPoll       = time.Second
	defaultBatch      = 500
	defaultCheckpoint = 100 * time.Millisecond
)

// WithCreate makes a [Source] create its table when it is missing, with
// the columns id bigserial PRIMARY KEY and xid xid8 NOT NULL DEFAULT
// pg_current_xact_id(), then columns (SQL pasted into CREATE TABLE, e.g.
// "payload text NOT NULL"), an index on (xid, id), and (unless
// WithNotify("")) a trigger resumable_outbox_notify, with a function of
// that name in the table's schema, that notifies the channel of
// [WithNotify] after each INSERT statement. A writer then only inserts its
// columns. A transaction that notified cannot be PREPAREd: on a server
// that admits prepared transactions (max_prepared_transactions > 0) the
// trigger is left out, and the Source polls unless the writers notify.
// Without WithCreate a missing table is an error; so is a creation the
// role may not make.
func WithCreate(columns string) Option {
	return optionFunc(func(s *settings) { s.columns, s.create = columns, true })
}

// WithNotify sets the channel a [Source] LISTENs on to learn that rows
// were committed: the channel the trigger of [WithCreate] notifies, or one
// the writers NOTIFY themselves. Default: the table's name (without its
// schema). "" turns LISTEN off: the Source only polls. A channel that is
// not a name (a letter or underscore, then up to 62 letters, digits or
// underscores) makes NewSource fail.
func WithNotify(channel string) Option {
	return optionFunc(func(s *settings) {
		if channel != "" && !pgsql.Identifier.MatchString(channel) {
			s.errs = append(s.errs, invalid("WithNotify", "channel", channel, "not a name"))
			return
		}
		s.channel = channel
	})
}

// WithPollInterval sets how long a [Source] connection waits for a
// notification before it reads the table again anyway. While committed
// rows are held back by an older transaction ([Hold]) it reads again
// sooner: after 10ms, doubling up to 100ms or d. Default 1s; a d that is
// not positive makes NewSource fail.
func WithPollInterval(d time.Duration) Option {
	return optionFunc(func(s *settings) {
		if d <= 0 {
			s.errs = append(s.errs, invalid("WithPollInterval", "d", d, "must be positive"))
			return
		}
		s.poll = d
	})
}

// WithBatchSize sets how many rows a [Source] reads in one query. Default
// 500; n < 1 makes NewSource fail.
func WithBatchSize(n int) Option {
	return optionFunc(func(s *settings) {
		if n < 1 {
			s.errs = append(s.errs, invalid("WithBatchSize", "n", n, "must be at least 1"))
			return
		}
		s.batch = n
	})
}

// NewSource returns a [Source] over table (a name or schema.name, each
// part a letter or underscore followed by up to 62 letters, digits or
// underscores; quoted, so case is kept), whose rows scan makes into T from
// the table's columns other than xid (pgx.RowToStructByName[T], for
// instance). It makes no round trip: the table is checked (or created,
// [WithCreate]) by each Open. Every argument and option is checked at
// once: the error joins one error per bad one, each matching
// stream.ErrInvalidOption (and postgres.ErrInvalid) and naming it.
func NewSource[T any](pool *pgxpool.Pool, table string, scan pgx.RowToFunc[T], opts ...Option) (*Source[T], error) {
	parts := pgsql.SplitTable(table)
	set := settings{poll: defaultPoll, batch: defaultBatch}
	if parts != nil {
		set.channel = parts[len(parts)-1]
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&set)
		}
	}
	var errs []error
	if pool == nil {
		errs = append(errs, invalid("NewSource", "pool", nil, "must not be nil"))
	}
	if parts == nil {
		errs = append(errs, invalid("NewSource", "table", table, "not a name or schema.name"))
	}
	if scan == nil {
		errs = append(errs, invalid("NewSource", "scan", nil, "must not be nil"))
	}
	if errs = append(errs, set.errs...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Source[T]{pool: pool, table: parts, name: table, scan: scan, set: set}, nil
}

// NewResumer returns a [stream.Resumer] over src with its cursor in store,
// wired with the defaults an outbox needs: [Extract] as the extractor,
// [Compare] as the cursor order, and saves at most every 100ms
// (stream.WithCheckpointInterval; a save per row costs an fsync or a
// commit each, 73 times slower with a file). opts come after these and
// override them. Give it src.Deleting(store) to have the rows deleted up
// to the saved cursor, and the store a postgres.Transactional handler
// writes to for exactly-once effects. A nil src or store makes it fail
// with an error matching stream.ErrInvalidOption.
func NewResumer[T any](src *Source[T], store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event[T], Cursor], error) {
	var errs []error
	if src == nil {
		errs = append(errs, invalid("NewResumer", "src", nil, "must not be nil"))
	}
	if store == nil {
		errs = append(errs, invalid("NewResumer", "store", nil, "must not be nil"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	base := []stream.Option{stream.WithCursorOrder(Compare), stream.WithCheckpointInterval(defaultCheckpoint)}
	return stream.New(src, Extract[T], store, append(base, opts...)...)
}

// RecvRespectsContext reports true: a Source connection's Recv ends when
// its ctx ends (see stream.Source).
func (o *Source[T]) RecvRespectsContext() bool { return true }

// Hold reports what held the relay back at its last read; the zero
// Hold when nothing did. It may be called at any time, from any
// goroutine (a metrics scrape, a ticker that logs).
func (o *Source[T]) Hold() Hold {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hold
}

// setHold records what the last read found: committed rows held behind the
// running transaction xmin, or nothing held. It returns whether xmin is a
// holder not yet looked up.
func (o *Source[T]) setHold(held bool, xmin uint64, now time.Time) (lookUp bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !held {
		o.hold = Hold{}
		return false
	}
	if o.hold.Since.IsZero() {
		o.hold.Since = now
	}
	if o.hold.Tx == xmin {
		return false
	}
	o.hold.Tx, o.hold.PID = xmin, 0
	return true
}

// setHolder records the backend of the holder xmin, if it still holds.
func (o *Source[T]) setHolder(xmin uint64, pid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hold.Tx == xmin {
		o.hold.PID = pid
	}
}

// Deleting returns st wrapped so that the Source deletes the rows up to
// the cursor st holds, never beyond: after each Load and Save that
// succeeded, the next read of a connection first deletes the rows at or
// before that cursor. Give the wrapped Store to the Resumer (and the
// unwrapped postgres.Store to postgres.Transactional, if you use it). Without Deleting
// nothing is deleted: a retention job of your own may delete the rows at or
// before the stored cursor (docs/outbox.md).
func (o *Source[T]) Deleting(st cursor.Store[Cursor]) cursor.Store[Cursor] {
	return &deletingStore[T]{o: o, st: st}
}

// deletingStore is the Store Deleting returns.
type deletingStore[T any] struct {
	o  *Source[T]
	st cursor.Store[Cursor]
}

func (d *deletingStore[T]) Load(ctx context.Context) (Cursor, error) {
	c, err := d.st.Load(ctx)
	if err == nil {
		d.o.confirm(c)
	}
	return c, err
}

func (d *deletingStore[T]) Save(ctx context.Context, c Cursor) error {
	err := d.st.Save(ctx, c)
	if err == nil {
		d.o.confirm(c)
	}
	return err
}

// CommitsInHandler passes on the wrapped Store's answer (see
// [Store.CommitsInHandler]).
func (d *deletingStore[T]) CommitsInHandler() bool {
	h, ok := d.st.(interface{ CommitsInHandler() bool })
	return ok && h.CommitsInHandler()
}

// confirm records c as held by the Store: rows up to it may be deleted.
func (o *Source[T]) confirm(c Cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deleting = true
	if Compare(c, o.confirmed) > 0 || c.System != o.confirmed.System {
		o.confirmed = c
	}
}

// toDelete returns the cursor up to which rows may be deleted, if any.
func (o *Source[T]) toDelete() (Cursor, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.confirmed, o.deleting
}

// queries holds the statements of a Source, made by Open once the
// table's columns are known.
type queries struct {
	page  string // the rows after a cursor, of transactions older than any running
	state string // the snapshot's xmin and xmax, and the largest xid of a visible row
	del   string // the rows up to a cursor
}

// The statements that do not depend on the table's columns.
const (
	columnsSQL = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), coalesce(pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`
	systemSQL  = `SELECT system_identifier::text FROM pg_control_system()`
	holderSQL  = `SELECT coalesce((SELECT pid FROM pg_stat_activity WHERE backend_xid = $1::text::xid LIMIT 1), 0)`
	xidDefault = "pg_current_xact_id()"
)

// statements returns the statements for the table whose columns other
// than xid are cols. The page's bound is materialized: computed once, a
// parameter of the index scan on (xid, id).
func (o *Source[T]) statements(cols []string) queries {
	t := pgx.Identifier(o.table).Sanitize()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	return queries{
		page: `WITH s AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
SELECT xid` + prefixComma(quoted) + ` FROM ` + t + `
WHERE (xid, id) > ($1::bigint::text::xid8, $2::bigint) AND xid < (SELECT xmin FROM s)
ORDER BY xid, id LIMIT $3`,
		state: `WITH s AS MATERIALIZED (SELECT pg_snapshot_xmin(x) AS xmin, pg_snapshot_xmax(x) AS xmax FROM pg_current_snapshot() x)
SELECT xmin::text::bigint, xmax::text::bigint, (SELECT max(xid) FROM ` + t + `)::text::bigint
FROM s`,
		del: `DELETE FROM ` + t + ` WHERE (xid, id) <= ($1::bigint::text::xid8, $2::bigint)`,
	}
}

func prefixComma(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

// createSQL returns the statements that create the table, its index and,
// with trigger, the notifying function and trigger.
func (o *Source[T]) createSQL(trigger bool) []string {
	t := pgx.Identifier(o.table).Sanitize()
	cols := "id bigserial PRIMARY KEY, xid xid8 NOT NULL DEFAULT " + xidDefault
	if strings.TrimSpace(o.set.columns) != "" {
		cols += ", " + o.set.columns
	}
	return append([]string{
		"SELECT pg_advisory_xact_lock(hashtext(" + quoteLiteral(t) + "))",
		"CREATE TABLE IF NOT EXISTS " + t + " (" + cols + ")",
	}, o.companionSQL(trigger)...)
}

// companionSQL returns the statements that make the table's index on
// (xid, id) and, with trigger, the notifying function and trigger.
func (o *Source[T]) companionSQL(trigger bool) []string {
	t := pgx.Identifier(o.table).Sanitize()
	last := o.table[len(o.table)-1]
	fn := pgx.Identifier{"resumable_outbox_notify"}
	if len(o.table) == 2 {
		fn = pgx.Identifier{o.table[0], "resumable_outbox_notify"}
	}
	sql := []string{"CREATE INDEX IF NOT EXISTS " + pgx.Identifier{truncate(last+"_xid_id", 63)}.Sanitize() + " ON " + t + " (xid, id)"}
	if trigger {
		sql = append(sql,
			"CREATE OR REPLACE FUNCTION "+fn.Sanitize()+"() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_notify(TG_ARGV[0], ''); RETURN NULL; END$$",
			"DROP TRIGGER IF EXISTS resumable_outbox_notify ON "+t,
			"CREATE TRIGGER resumable_outbox_notify AFTER INSERT ON "+t+" FOR EACH STATEMENT EXECUTE FUNCTION "+fn.Sanitize()+"("+quoteLiteral(o.set.channel)+")",
		)
	}
	return sql
}

// migrationSQL returns the script that gives an existing table the xid
// column and what WithCreate adds beside it: the index and (with a
// channel) the trigger, which writers that PREPARE must leave out.
func (o *Source[T]) migrationSQL() string {
	sql := append([]string{"ALTER TABLE " + pgx.Identifier(o.table).Sanitize() + " ADD COLUMN xid xid8 NOT NULL DEFAULT " + xidDefault},
		o.companionSQL(o.set.channel != "")...)
	return strings.Join(sql, ";\n") + ";"
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Open returns a connection that delivers the rows after cursor after, in
// (xid, id) order, waiting for more when it has delivered all: it never
// ends by itself. It connects, checks the table (creating it with
// [WithCreate]) and LISTENs. A table that does not have the columns the
// Source needs is an error marked [errclass.Permanent] that says what to
// change. A cursor from another server (its System is not this server's
// system identifier, or its Tx was never assigned here: a restored or
// recreated database) is an error matching [stream.ErrSourceChanged]. A
// table holding rows of transactions the server has not assigned yet (a
// dump of another cluster) is a permanent error saying how to renumber
// them.
func (o *Source[T]) Open(ctx context.Context, after Cursor) (stream.Conn[Event[T]], error) {
	c := &conn[T]{src: o, after: after, batch: make([]Event[T], 0, o.set.batch)}
	pool := o.pool.Config()
	cfg := pool.ConnConfig.Copy()
	cfg.OnNotification = c.notified
	pg, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("outbox: table %s: connecting: %w", o.name, err)
	}
	// xid8 in binary, as int8 is: its 8 bytes are the id (xid8send).
	pg.TypeMap().RegisterType(&pgtype.Type{Name: "xid8", OID: pgtype.XID8OID, Codec: pgtype.Int8Codec{}})
	if pool.AfterConnect != nil {
		if err := pool.AfterConnect(ctx, pg); err != nil {
			pgsql.CloseConn(pg)
			return nil, fmt.Errorf("outbox: table %s: the pool's AfterConnect: %w", o.name, err)
		}
	}
	c.pg = pg
	if err := c.setUp(ctx); err != nil {
		pgsql.CloseConn(pg)
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// setUp checks the table and the cursor's identity and LISTENs.
func (c *conn[T]) setUp(ctx context.Context) error {
	o := c.src
	cols, err := o.columns(ctx, c.pg)
	if err != nil {
		return err
	}
	c.sql = o.statements(cols)
	c.idAt = ownColumns + slices.Index(cols, "id")
	c.system, err = system(ctx, c.pg)
	if err != nil {
		return fmt.Errorf("outbox: table %s: reading the system identifier: %w", o.name, err)
	}
	if _, _, _, err := c.state(ctx); err != nil {
		return err
	}
	if o.set.channel != "" {
		if _, err := c.pg.Exec(ctx, "LISTEN "+pgx.Identifier{o.set.channel}.Sanitize()); err != nil {
			return fmt.Errorf("outbox: table %s: LISTEN %s: %w", o.name, o.set.channel, err)
		}
	}
	return nil
}

// identity reports an error matching stream.ErrSourceChanged when cursor
// after cannot come from this server, whose next transaction id is next.
func (c *conn[T]) identity(after Cursor, next uint64) error {
	switch {
	case after.System != "" && c.system != "" && after.System != c.system:
		return fmt.Errorf("outbox: table %s: system identifier: was %s, now %s (cursor %v): %w", c.src.name, after.System, c.system, after, stream.ErrSourceChanged)
	case after.Tx >= next && after.Tx != 0:
		return fmt.Errorf("outbox: table %s: transaction id: the cursor's %d was never assigned, the next is %d (cursor %v): %w", c.src.name, after.Tx, next, after, stream.ErrSourceChanged)
	}
	return nil
}

// system returns the server's system identifier, or "" when the role may
// not read it.
func system(ctx context.Context, pg *pgx.Conn) (string, error) {
	var id string
	err := pg.QueryRow(ctx, systemSQL).Scan(&id)
	if pgsql.IsCode(err, "42501") { // insufficient_privilege
		return "", nil
	}
	return id, err
}

// columns checks the table, creating it when missing and allowed, and
// returns its columns other than xid.
func (o *Source[T]) columns(ctx context.Context, pg *pgx.Conn) ([]string, error) {
	t := pgx.Identifier(o.table).Sanitize()
	var exists bool
	if err := pg.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&exists); err != nil {
		return nil, fmt.Errorf("outbox: table %s: looking it up: %w", o.name, err)
	}
	if !exists {
		if !o.set.create {
			return nil, errclass.Permanent(fmt.Errorf("outbox: table %s does not exist (WithCreate creates it)", o.name))
		}
		if err := o.createTable(ctx, pg); err != nil {
			return nil, err
		}
	}
	rows, err := pg.Query(ctx, columnsSQL, t)
	if err != nil {
		return nil, fmt.Errorf("outbox: table %s: reading its columns: %w", o.name, err)
	}
	var cols []string
	var xidType, xidDef, idType string
	for rows.Next() {
		var name, typ, def string
		if err := rows.Scan(&name, &typ, &def); err != nil {
			rows.Close()
			return nil, fmt.Errorf("outbox: table %s: reading its columns: %w", o.name, err)
		}
		switch name {
		case "xid":
			xidType, xidDef = typ, def
			continue
		case "id":
			idType = typ
		}
		cols = append(cols, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: table %s: reading its columns: %w", o.name, err)
	}
	switch {
	case xidType == "":
		return nil, errclass.Permanent(fmt.Errorf("outbox: table %s has no column xid; add it, its index and the trigger with:\n%s", o.name, o.migrationSQL()))
	case xidType != "xid8" || xidDef != xidDefault:
		return nil, errclass.Permanent(fmt.Errorf("outbox: table %s: column xid is %q DEFAULT %q, want xid8 NOT NULL DEFAULT %s (ALTER TABLE %s ADD COLUMN xid xid8 NOT NULL DEFAULT %s, and an index on (xid, id))",
			o.name, xidType, xidDef, xidDefault, t, xidDefault))
	case idType != "bigint" && idType != "integer":
		return nil, errclass.Permanent(fmt.Errorf("outbox: table %s: column id is %q, want bigint (bigserial)", o.name, idType))
	}
	return cols, nil
}

// createTable runs createSQL in one transaction: with the trigger when a
// channel is set and the server admits no prepared transaction (a
// transaction that notified cannot be PREPAREd).
func (o *Source[T]) createTable(ctx context.Context, pg *pgx.Conn) error {
	err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
		var prepared int
		if err := tx.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&prepared); err != nil {
			return err
		}
		for _, q := range o.createSQL(o.set.channel != "" && prepared == 0) {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if pgsql.IsCode(err, "42501") {
		return errclass.Permanent(fmt.Errorf("outbox: table %s does not exist and creating it was refused: %w", o.name, err))
	}
	if err != nil {
		return fmt.Errorf("outbox: table %s: creating it: %w", o.name, err)
	}
	return nil
}

// invalid returns the error of a bad argument arg of where, given value:
// it matches stream.ErrInvalidOption and postgres.ErrInvalid.
func invalid(where, arg string, value any, why string) error {
	return &badarg.Error{Where: "outbox: " + where, Arg: arg, Value: value, Why: why, Mark: pgerr.ErrInvalid}
}
