package cdc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/internal/wait"
	"github.com/resumable-go/resumable/stream"
)

// defaultStatusInterval is how often a connection tells the server its
// positions when nothing else made it do so.
const defaultStatusInterval = 10 * time.Second

// Source is a [stream.Source] of the changes a publication publishes, read
// through a logical replication slot with the pgoutput plugin (protocol
// version 1). Make one with [NewSource]; it serves one stream (one slot, one
// cursor) at a time, and starts no goroutine of its own (pgconn's, when a
// connection breaks, ends before the connection's Close returns).
//
// What the server is told: a connection confirms to the server (as the
// flush position of its standby status updates, which becomes the slot's
// confirmed_flush_lsn) only the LSN of a cursor the stream's Store holds,
// as learned through the Store [Source.Confirming] wraps. The server keeps
// sending a transaction whose commit LSN is at or after the confirmed
// position, so a stream stopped inside a transaction gets it again and
// skips the changes its cursor covers. Without a wrapped Store nothing is
// confirmed, and the server keeps all WAL since the slot's creation.
type Source struct {
	cfg       *pgconn.Config
	repl      *pgconn.Config // cfg for the replication connections: read through coalescingConn
	slot      string
	pub       string
	interval  time.Duration
	messages  bool     // WithMessages was given
	prefixes  []string // the prefixes of the messages to deliver; none: all
	snapshot  bool     // WithSnapshot was given
	chunkRows int      // rows per snapshot chunk
	failover  bool     // WithFailover was given

	pending  atomic.Int32 // len(requests)
	requests []request    // backfills asked for, guarded by mu

	mu    sync.Mutex           // guards saved, store and requests
	saved Cursor               // the last cursor the Store loaded or saved; zero: none
	store cursor.Store[Cursor] // the Store Confirming wrapped, loaded by Open; nil: none

	tracking    atomic.Bool  // a Store was wrapped: note transactions for the commit lag
	marks       []commitMark // transactions read and not covered by a saved cursor, guarded by mu
	committedAt time.Time    // the commit time of the last saved cursor, guarded by mu

	standby bool // an Open found the slot active and said so: the next waits quietly; only Open uses it
	opened  bool // an Open of this Source started replication: a missing slot is then never created; only Open uses it

	statuses atomic.Int64         // status updates sent, for tests
	live     atomic.Pointer[conn] // the connection streaming now, told of each save; nil: none

	parked    *conn       // the connection Confirming's Load opened, for the next Open; guarded by mu
	unparkCtx func() bool // stops closing parked when Load's ctx ends; guarded by mu

	waiting  atomic.Pointer[chunkWait] // the snapshot chunk waiting for its watermark; nil: none
	waitRead atomic.Uint64             // the position of the last message read while it waits

	optErrs []error // the options' bad arguments, reported by NewSource
}

var _ stream.Source[Event, Cursor] = (*Source)(nil)

// SourceOption configures a [Source]. Options are made by the With
// functions of this package that return it; a nil SourceOption is ignored.
type SourceOption interface {
	applySource(*Source)
}

type sourceOption func(*Source)

func (f sourceOption) applySource(s *Source) { f(s) }

// WithStatusInterval sets how often a connection sends the server a
// standby status update (its positions) when nothing else made it do so.
// A saved cursor is confirmed sooner: within 50ms of the last update.
// The server's wal_sender_timeout (60s by default) must be longer.
// Default 10s; 0 keeps the default, and a negative d makes NewSource fail.
func WithStatusInterval(d time.Duration) SourceOption {
	return sourceOption(func(s *Source) {
		switch {
		case d < 0:
			s.optErrs = append(s.optErrs, invalid("cdc: WithStatusInterval", "d", d, "must not be negative"))
		case d > 0:
			s.interval = d
		}
	})
}

// invalid is the error of a bad argument: a badarg.Error that matches
// ErrInvalid too.
func invalid(where, arg string, value any, why string) error {
	return &badarg.Error{Where: where, Arg: arg, Value: value, Why: why, Mark: ErrInvalid}
}

// hosts returns the number of distinct servers cfg names.
func hosts(cfg *pgconn.Config) int {
	seen := map[string]bool{cfg.Host + ":" + strconv.Itoa(int(cfg.Port)): true}
	for _, fb := range cfg.Fallbacks {
		seen[fb.Host+":"+strconv.Itoa(int(fb.Port))] = true
	}
	return len(seen)
}

// hidden stands for a DSN in a message: it may hold a password.
type hidden int

func (h hidden) String() string { return fmt.Sprintf("(%d bytes, not shown)", int(h)) }

// slotName is what PostgreSQL accepts as a replication slot's name.
var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// pubName is what NewSource accepts as a publication's name: an unquoted
// identifier.
var pubName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// NewSource returns a Source that reads publication through the logical
// replication slot slot of the database dsn names (a URL or key=value
// string, as pgconn.ParseConfig takes; the replication=database parameter
// is added). The role needs the REPLICATION attribute (or to be a
// superuser), and the server wal_level=logical.
//
// It returns an error matching [ErrInvalid] and stream.ErrInvalidOption,
// naming each bad argument (errors.Join of all), for a dsn that does not
// parse or, with [WithFailover], names several hosts without
// target_session_attrs=read-write (or primary), a slot name that is not 1–63 characters of a–z, 0–9 and _, a
// publication name that is not an unquoted identifier, or a bad option.
func NewSource(dsn, slot, publication string, opts ...SourceOption) (*Source, error) {
	const where = "cdc: NewSource"
	var errs []error
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		errs = append(errs, invalid(where, "dsn", hidden(len(dsn)), "does not parse: "+err.Error()))
	} else {
		cfg.RuntimeParams["replication"] = "database"
	}
	if !slotName.MatchString(slot) {
		errs = append(errs, invalid(where, "slot", slot, "must be 1 to 63 characters of a-z, 0-9 and _"))
	}
	if !pubName.MatchString(publication) {
		errs = append(errs, invalid(where, "publication", publication, "must be an unquoted identifier"))
	}
	s := &Source{cfg: cfg, slot: slot, pub: publication, interval: defaultStatusInterval, chunkRows: defaultChunkRows}
	if cfg != nil {
		s.repl = replicationConfig(cfg)
	}
	for _, o := range opts {
		if o != nil {
			o.applySource(s)
		}
	}
	if s.failover && cfg != nil && hosts(cfg) > 1 && cfg.ValidateConnect == nil {
		errs = append(errs, invalid(where, "dsn", hidden(len(dsn)), "names several hosts without target_session_attrs=read-write (or primary), with WithFailover: a standby could be chosen"))
	}
	if err := errors.Join(append(errs, s.optErrs...)...); err != nil {
		return nil, err
	}
	return s, nil
}

// NewResumer returns a [stream.Resumer] over src with its cursor in store:
// [Extract], src.Confirming(store) as the Store, and [Compare] as the
// cursor order. opts come after these.
func NewResumer(src *Source, store cursor.Store[Cursor], opts ...stream.Option) (*stream.Resumer[Event, Cursor], error) {
	var errs []error
	if src == nil {
		errs = append(errs, invalid("cdc: NewResumer", "src", src, "must not be nil"))
	}
	if store == nil {
		errs = append(errs, invalid("cdc: NewResumer", "store", store, "must not be nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	base := []stream.Option{stream.WithCursorOrder(Compare)}
	return stream.New(src, Extract, src.Confirming(store), append(base, opts...)...)
}

// Confirming returns a Store that saves through st and tells s each
// cursor st holds: the cursor [Source.Open] loaded, and every cursor saved
// without an error. The connections of s confirm to the server the LSN of
// the last such cursor, and nothing else. It is safe for concurrent use if
// st is.
//
// Its Load takes the slot as Open does (the first call that finds it held
// by another process fails saying so, the next waits as a standby), loads
// st once it holds the slot, and keeps that connection for the next Open,
// which starts after the cursor Load returned: the stream logs the cursor
// it resumes from. The connection is closed if ctx ends first. Any other
// failure to open is left to Open, which meets it again (so that a stream
// resyncs after [stream.ErrSourceChanged]). Only the
// process holding the slot loads st (a Load of a postgres.Store takes the
// stream over), so a standby waiting for the slot never disturbs the
// active process; Open loads st again whenever it takes the slot anew, and
// starts after the cursor it loaded or the one it was given, whichever is
// further.
func (s *Source) Confirming(st cursor.Store[Cursor]) cursor.Store[Cursor] {
	s.mu.Lock()
	s.store = st
	s.mu.Unlock()
	s.tracking.Store(st != nil)
	return &confirming{src: s, st: st}
}

type confirming struct {
	src *Source
	st  cursor.Store[Cursor]
}

// CommitsInHandler forwards st's answer (a postgres.Store used by
// postgres.Transactional says true), so that a stream refuses to run such a
// Store's handler concurrently through the wrapper too.
func (c *confirming) CommitsInHandler() bool {
	hc, ok := c.st.(interface{ CommitsInHandler() bool })
	return ok && hc.CommitsInHandler()
}

func (c *confirming) Load(ctx context.Context) (Cursor, error) {
	if err := ctx.Err(); err != nil {
		return Cursor{}, err
	}
	if c.st == nil {
		return c.src.held(), nil
	}
	return c.src.take(ctx)
}

// take opens a connection as Open does, after the cursor the Store was
// last known to hold (Open loads it once it holds the slot), and parks it
// for the next Open. It returns the cursor the connection starts after.
func (s *Source) take(ctx context.Context) (Cursor, error) {
	sc, err := s.Open(ctx, s.held())
	var busy *slotBusy
	switch {
	case ctx.Err() != nil || errors.As(err, &busy):
		return Cursor{}, err // busy: the stream says so, and the next Load waits
	case err != nil:
		// Open meets it again, where the stream classifies it (a resync
		// may follow); Load itself is not the Store failing.
		return s.held(), nil
	}
	c := sc.(*conn)
	s.mu.Lock()
	s.parked = c
	s.unparkCtx = context.AfterFunc(ctx, func() {
		if c := s.unpark(); c != nil {
			c.abandon()
		}
	})
	s.mu.Unlock()
	return c.from, nil
}

// unpark returns the parked connection, or nil, and parks nothing more.
func (s *Source) unpark() *conn {
	s.mu.Lock()
	c, stop := s.parked, s.unparkCtx
	s.parked, s.unparkCtx = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	return c
}

func (c *confirming) Save(ctx context.Context, cur Cursor) error {
	err := c.st.Save(ctx, cur)
	if err == nil {
		c.src.hold(cur)
	}
	return err
}

// hold records c as the cursor the Store holds.
func (s *Source) hold(c Cursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saved = c
	s.noteSaved(c)
	if live := s.live.Load(); live != nil {
		live.confirmSoon()
	}
	if s.pending.Load() == 0 {
		return
	}
	// A backfill asked for is in the cursors from the first taken after it.
	s.requests = slices.DeleteFunc(s.requests, func(r request) bool { return r.taken && Compare(c, r.since) > 0 })
	s.pending.Store(int32(len(s.requests)))
}

// attached returns the Store Confirming wrapped, or nil.
func (s *Source) attached() cursor.Store[Cursor] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store
}

// held returns the cursor the Store holds (zero for none).
func (s *Source) held() Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved
}

// RecvRespectsContext tells a [stream.Resumer] that Recv returns as soon as
// its ctx ends (the optional method documented on [stream.Source]).
func (s *Source) RecvRespectsContext() bool { return true }

// Open connects, takes the slot, checks that the server and the slot are
// those the cursor was read from, and starts replication so that the
// connection delivers the changes strictly after the cursor: after, or the
// cursor Open loads from the Store [Source.Confirming] wrapped once it
// holds the slot, whichever is further.
//
// A slot another connection holds (a hot standby's active relay) is waited
// for: the first Open that finds it active fails with an error saying so
// (retried by the stream, which logs it), and the next one waits, polling
// with a growing delay up to the status interval, until it takes the slot
// or ctx ends. Nothing is loaded or written while it waits. A slot the
// server invalidated (wal_status lost, or an invalidation reason) is never
// waited on: Open fails with an error matching [stream.ErrSourceChanged]
// naming the reason, whatever the cursor.
//
// With a zero cursor (a stream that handled nothing), a missing slot is
// created (never a temporary one), and the stream starts where the slot
// stands. Otherwise Open fails with an error matching
// [stream.ErrSourceChanged], which names what changed (was → now), when the
// server's system identifier is not the cursor's, when its timeline is not
// the cursor's nor one that branched from it after the cursor (a promoted
// standby that had the cursor's changes: see [WithFailover]), when the
// slot is missing (it is never created then, nor once this Source streamed
// it), when the slot's confirmed_flush_lsn lies beyond the
// cursor (the slot was recreated, or moved by another consumer): changes
// between them are gone, or when the cursor is inside a resync's replay. A
// slot that is not a permanent pgoutput slot of the database, and errors
// of privileges or of missing objects, are [errclass.Permanent].
func (s *Source) Open(ctx context.Context, after Cursor) (stream.Conn[Event], error) {
	if err := after.validate(); err != nil {
		return nil, errclass.Permanent(err)
	}
	if c := s.unpark(); c != nil {
		if c.from == after { // the connection Load took the slot with
			return c, nil
		}
		_ = c.Close()
	}
	var seq backoff.Sequence
	for {
		c, err := s.open(ctx, after)
		var busy *slotBusy
		if !errors.As(err, &busy) {
			if err == nil {
				s.standby, s.opened = false, true
			}
			return c, err
		}
		if !s.standby { // said once; the stream logs it
			s.standby = true
			return nil, err
		}
		if seq == nil {
			seq = standbyPoll(s.interval).NewSequence()
		}
		d, _ := seq.Next()
		if err := wait.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// standbyPoll is how often a standby looks at the slot: from 100ms,
// doubling, up to the status interval.
func standbyPoll(interval time.Duration) backoff.Policy {
	return backoff.Exponential(backoff.WithInitialInterval(min(100*time.Millisecond, interval)), backoff.WithMaxInterval(interval))
}

// slotBusy is the failure of an Open that found the slot held by another
// connection. It is retried.
type slotBusy struct {
	slot string
	pid  string // the server process holding the slot; "?": unknown; empty: the slot is being created
	err  error  // the server's refusal, when START_REPLICATION met it
}

func (e *slotBusy) Error() string {
	msg := fmt.Sprintf("cdc: slot %q is active (held by server process %s): waiting as a standby until it is free", e.slot, e.pid)
	if e.pid == "" {
		msg = fmt.Sprintf("cdc: slot %q is being created by another consumer: waiting as a standby until it is free", e.slot)
	}
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *slotBusy) Unwrap() error { return e.err }

// open is one attempt of Open.
func (s *Source) open(ctx context.Context, after Cursor) (*conn, error) {
	side := s.dialSide(ctx)
	defer side.close(ctx) // unless the connection took it
	pg, err := pgconn.ConnectConfig(ctx, s.repl)
	if err != nil {
		return nil, classify(fmt.Errorf("cdc: connecting for replication: %w", err))
	}
	c, err := s.start(ctx, pg, after, side)
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = pg.Close(cctx)
		var busy *slotBusy
		if errors.As(err, &busy) {
			return nil, err
		}
		return nil, classify(err)
	}
	return c, nil
}

// start identifies the server, takes the slot, loads the Store, checks the
// slot against the cursor and starts replication on pg. A snapshot or
// backfill under way reads through side's connection.
func (s *Source) start(ctx context.Context, pg *pgconn.PgConn, after Cursor, side *sideDial) (*conn, error) {
	sys, err := pglogrepl.IdentifySystem(ctx, pg)
	if err != nil {
		return nil, fmt.Errorf("cdc: IDENTIFY_SYSTEM: %w", err)
	}
	if err := s.checkVersion(pg); err != nil {
		return nil, err
	}
	id := identity{system: sys.SystemID, timeline: sys.Timeline, slot: s.slot}
	// Read now: once replication starts, pg takes no other command.
	if id.history, err = timelineHistory(ctx, pg, sys.Timeline); err != nil {
		return nil, err
	}
	var imp *imported // the slot's snapshot, when WithSnapshot created it
	st, found, err := s.slotState(ctx, pg)
	if err != nil {
		return nil, err
	}
	if found {
		if err := st.usable(s.slot, sys.DBName); err != nil {
			return nil, err
		}
		// Before waiting on it as a standby: a slot the server can no
		// longer serve is never waited on.
		if err := st.valid(s.slot, after); err != nil {
			return nil, err
		}
		if st.activePID != "" {
			return nil, &slotBusy{slot: s.slot, pid: st.activePID}
		}
		if s.failover && !st.failover {
			if err := s.alterFailover(ctx, pg); err != nil {
				return nil, err
			}
		}
		// Taking the slot: from here on no other consumer moves it.
		if err := s.startReplication(ctx, pg, after.LSN); err != nil {
			return nil, err
		}
	} else if err := s.lockCreation(ctx, pg); err != nil {
		return nil, err
	}
	if after, err = s.reload(ctx, after); err != nil {
		return nil, err
	}
	if err := id.check(after); err != nil {
		return nil, err
	}
	if after.Index == replayIndex {
		return nil, fmt.Errorf("cdc: cursor %v is inside a resync's replay, which did not finish: %w", after, stream.ErrSourceChanged)
	}
	switch {
	case !found && after.fresh() && s.opened:
		// The Store holds nothing yet, but this Source streamed the slot:
		// creating it again would skip what happened in between.
		return nil, fmt.Errorf("cdc: slot %q: was there when this Source last opened it, now missing (system %s, timeline %d): %w", s.slot, id.system, id.timeline, stream.ErrSourceChanged)
	case !found && after.fresh():
		if imp, err = s.createSlotImporting(ctx, pg, side); err != nil {
			return nil, err
		}
		defer imp.close(ctx)
		if err := s.startReplication(ctx, pg, after.LSN); err != nil {
			return nil, err
		}
	case !found:
		return nil, fmt.Errorf("cdc: slot %q: was there at cursor %v, now missing (system %s, timeline %d): %w", s.slot, after, id.system, id.timeline, stream.ErrSourceChanged)
	default:
		if err := st.check(s.slot, after); err != nil {
			return nil, err
		}
	}
	c, err := newConn(s, pg, id, after)
	if err != nil {
		return nil, errclass.Permanent(err)
	}
	if imp != nil {
		c.useImport(imp)
	}
	if c.snap.side == nil && (c.snap.initial || len(c.snap.prog.Tables) > 0 || s.pending.Load() > 0) {
		c.setSide(side.take()) // nil: the first chunk connects
	}
	if err := c.sendStatus(); err != nil {
		return nil, err
	}
	s.live.Store(c)
	return c, nil
}

// lockCreation takes, for the life of pg, the advisory lock that makes one
// consumer at a time load the Store and create a missing slot: two
// replicas started together on a new slot do not fence each other. A lock
// another connection holds is a slotBusy.
func (s *Source) lockCreation(ctx context.Context, pg *pgconn.PgConn) error {
	// The slot's name was checked by NewSource: it needs no quoting.
	res, err := pg.Exec(ctx, "SELECT pg_try_advisory_lock(hashtext('resumable-cdc:"+s.slot+"'))").ReadAll()
	if err != nil {
		return fmt.Errorf("cdc: locking the creation of slot %q: %w", s.slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "t" {
		return &slotBusy{slot: s.slot}
	}
	return nil
}

// startReplication starts streaming the slot on pg; a slot another
// connection took first is a slotBusy.
func (s *Source) startReplication(ctx context.Context, pg *pgconn.PgConn, at pglogrepl.LSN) error {
	args := []string{"proto_version '1'", "publication_names '" + s.pub + "'"}
	switch version := pg.ParameterStatus("server_version"); {
	case serverMessages(version):
		// Always, so that a transaction's changes are numbered the same
		// whatever WithMessages asks for.
		args = append(args, "messages 'true'")
	case s.messages:
		return errclass.Permanent(fmt.Errorf("cdc: WithMessages: server version %s: pgoutput sends logical decoding messages from PostgreSQL 14", version))
	}
	err := pglogrepl.StartReplication(ctx, pg, s.slot, at, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if isCode(err, "55006") { // object_in_use: "replication slot ... is active for PID n"
		return &slotBusy{slot: s.slot, pid: "?", err: err}
	}
	if err != nil {
		return fmt.Errorf("cdc: START_REPLICATION of slot %q at %v: %w", s.slot, at, err)
	}
	return nil
}

// reload loads the Store Confirming wrapped, now that the slot is this
// connection's, and returns the further of after and the loaded cursor.
// Without a Store, it returns after.
func (s *Source) reload(ctx context.Context, after Cursor) (Cursor, error) {
	st := s.attached()
	if st == nil {
		return after, nil
	}
	loaded, err := st.Load(ctx)
	if err != nil {
		return Cursor{}, fmt.Errorf("cdc: loading the cursor from the Store: %w", err)
	}
	s.hold(loaded)
	if Compare(loaded, after) >= 0 || after.fresh() {
		return loaded, nil
	}
	return after, nil
}

// identity is the server and slot a connection reads from.
type identity struct {
	system   string
	timeline int32
	slot     string
	history  history // the timeline's ancestors (TIMELINE_HISTORY); nil on timeline 1
}

// check reports an error matching stream.ErrSourceChanged when after was
// read from another server or slot, or on a timeline that the server's
// history left before the cursor (a promoted standby that had not received
// what the cursor covers). A cursor without an identity is taken as this
// one's.
func (id identity) check(after Cursor) error {
	switch {
	case after.System != "" && after.System != id.system:
		return fmt.Errorf("cdc: system identifier: was %s, now %s (cursor %v): %w", after.System, id.system, after, stream.ErrSourceChanged)
	case after.Timeline != 0 && after.Timeline != id.timeline:
		return id.checkTimeline(after)
	case after.Slot != "" && after.Slot != id.slot:
		return fmt.Errorf("cdc: slot: was %q, now %q (cursor %v): %w", after.Slot, id.slot, after, stream.ErrSourceChanged)
	}
	return nil
}

// matches reports whether c may be confirmed on a connection with this
// identity: it was read from it, or carries no identity.
func (id identity) matches(c Cursor) bool {
	_, kept := id.history.covers(c)
	return (c.System == "" || c.System == id.system) &&
		(c.Timeline == 0 || c.Timeline == id.timeline || kept) &&
		(c.Slot == "" || c.Slot == id.slot)
}

// slotState is a row of pg_replication_slots.
type slotState struct {
	plugin, kind, database string
	walStatus              string // reserved, extended, unreserved or lost
	invalidation           string // invalidation_reason (PostgreSQL 17); empty: none, or an older server
	conflicting            bool   // invalidated by a conflict with recovery (PostgreSQL 16)
	activePID              string // the server process holding the slot; empty: none
	temporary              bool
	failover               bool // a failover slot (PostgreSQL 17)
	confirmed              pglogrepl.LSN
}

// slotState reads the slot's row of pg_replication_slots; found is false
// when there is none.
func (s *Source) slotState(ctx context.Context, pg *pgconn.PgConn) (st slotState, found bool, err error) {
	// The slot's name was checked by NewSource: it needs no quoting.
	// conflicting (16) and invalidation_reason (17) are read through
	// to_jsonb: absent on older servers, they read as empty.
	q := "SELECT coalesce(plugin, ''), slot_type, coalesce(database, ''), temporary, coalesce(confirmed_flush_lsn, '0/0'), coalesce(wal_status, ''), coalesce(active_pid::text, ''), " +
		"coalesce(to_jsonb(s)->>'invalidation_reason', ''), coalesce(to_jsonb(s)->>'conflicting', ''), coalesce(to_jsonb(s)->>'failover', '') FROM pg_replication_slots s WHERE slot_name = '" + s.slot + "'"
	res, err := pg.Exec(ctx, q).ReadAll()
	if err != nil {
		return st, false, fmt.Errorf("cdc: reading slot %q: %w", s.slot, err)
	}
	if len(res) != 1 || len(res[0].Rows) == 0 {
		return st, false, nil
	}
	row := res[0].Rows[0]
	if len(row) != 10 {
		return st, false, fmt.Errorf("cdc: reading slot %q: %d columns", s.slot, len(row))
	}
	st = slotState{plugin: string(row[0]), kind: string(row[1]), database: string(row[2]), temporary: string(row[3]) == "t", walStatus: string(row[5]), activePID: string(row[6]),
		invalidation: string(row[7]), conflicting: string(row[8]) == "true", failover: string(row[9]) == "true"}
	if st.confirmed, err = pglogrepl.ParseLSN(string(row[4])); err != nil {
		return st, false, fmt.Errorf("cdc: reading slot %q: %w", s.slot, err)
	}
	return st, true, nil
}

// usable refuses a slot that cannot serve the stream.
func (st slotState) usable(slot, db string) error {
	if st.kind != "logical" || st.plugin != "pgoutput" || st.database != db || st.temporary {
		return errclass.Permanent(fmt.Errorf("cdc: slot %q is a %s slot of plugin %q on database %q (temporary %t); want a permanent logical slot of pgoutput on %q",
			slot, st.kind, st.plugin, st.database, st.temporary, db))
	}
	return nil
}

// valid refuses, with stream.ErrSourceChanged naming the reason, a slot
// the server invalidated: whatever the cursor (a fresh one included), the
// server refuses to stream it, and only recreating it (see [Resync]) helps.
func (st slotState) valid(slot string, after Cursor) error {
	var why string
	switch {
	case st.invalidation != "":
		why = "invalidation_reason " + st.invalidation
	case st.conflicting:
		why = "conflicting with recovery: rows it needed were removed"
	case st.walStatus == "lost":
		why = "wal_status lost: the server removed WAL it needed (max_slot_wal_keep_size)"
	default:
		return nil
	}
	if after.fresh() { // the Store is loaded only once the slot is taken
		return fmt.Errorf("cdc: slot %q: was usable, now invalidated (%s): %w", slot, why, stream.ErrSourceChanged)
	}
	return fmt.Errorf("cdc: slot %q: was usable at cursor %v, now invalidated (%s): %w", slot, after, why, stream.ErrSourceChanged)
}

// check refuses a slot whose confirmed position is beyond after.
func (st slotState) check(slot string, after Cursor) error {
	if !after.fresh() && st.confirmed > after.LSN {
		return fmt.Errorf("cdc: slot %q: confirmed_flush_lsn was at most %v (cursor %v), now %v: %w", slot, after.LSN, after, st.confirmed, stream.ErrSourceChanged)
	}
	return nil
}

// createSlot creates the stream's slot: permanent, pgoutput.
func (s *Source) createSlot(ctx context.Context, pg *pgconn.PgConn) error {
	if s.failover {
		_, _, err := s.createFailoverSlot(ctx, pg, "nothing")
		return err
	}
	_, err := pglogrepl.CreateReplicationSlot(ctx, pg, s.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil {
		return fmt.Errorf("cdc: creating slot %q: %w", s.slot, err)
	}
	return nil
}

// isCode reports whether err is a PostgreSQL error with SQLSTATE code.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// classify marks the errors that retrying cannot cure as permanent: a
// failed authentication or missing privilege (SQLSTATE classes 28 and
// 42, which also holds a publication that does not exist).
func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) == 5 && (pe.Code[:2] == "28" || pe.Code[:2] == "42") && pe.Code != "42710" {
		return errclass.Permanent(err)
	}
	return err
}
