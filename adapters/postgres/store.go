package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgsql"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
)

// Store is a [cursor.Store] that keeps one stream's cursor in one row of a
// table (the stream's name, the encoded cursor, a version), created on first
// use when absent. Make one with [NewStore]. It is safe for concurrent use;
// its Loads, Saves and [Transactional] transactions run one at a time.
//
// [Store.Load] takes the stream over (fences every other Store of it), and
// every write is a compare-and-set on the version the Store last loaded or
// wrote: a write that finds the row written by someone else writes
// nothing and returns an error matching [ErrCursorChanged], marked
// [errclass.Permanent]. A Save of the cursor the row already holds, as far
// as the Store knows, returns nil at once without a round trip: that is the
// Resumer's Save after a [Transactional] handler committed the cursor.
//
// A write whose outcome is unknown (the connection dropped while it
// committed) is remembered: when the next write finds the row changed and
// holding exactly that write, the write was the Store's own, and it goes
// on from it.
type Store[C any] struct {
	pool    *pgxpool.Pool
	name    string
	codec   cursor.Codec[C]
	initial C
	table   string // for messages, as given
	sql     statements
	iso     pgx.TxIsoLevel
	retry   backoff.Policy
	inTx    atomic.Bool // set by Transactional

	mu      sync.Mutex
	known   bool   // version and last were read or written
	version int64  // the row's version; 0: no row
	last    []byte // the row's cursor as last read or written
	pending []byte // what a write with an unknown outcome tried to write
	pendVer int64  // the version pending would have
}

var _ cursor.Store[int] = (*Store[int])(nil)

// querier is what a Store runs its statements through: the pool, or a
// transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type statements struct {
	create, load, fence, insert, update string
}

func newStatements(table []string) statements {
	t := pgx.Identifier(table).Sanitize()
	return statements{
		create: "CREATE TABLE IF NOT EXISTS " + t + " (stream text PRIMARY KEY, cursor bytea NOT NULL, " +
			"version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())",
		load: "SELECT cursor, version FROM " + t + " WHERE stream = $1",
		fence: "INSERT INTO " + t + " AS c (stream, cursor, version) VALUES ($1, $2, 1) " +
			"ON CONFLICT (stream) DO UPDATE SET version = c.version + 1, updated_at = now() RETURNING cursor, version",
		insert: "INSERT INTO " + t + " (stream, cursor, version) VALUES ($1, $2, 1) ON CONFLICT (stream) DO NOTHING",
		update: "UPDATE " + t + " SET cursor = $2, version = version + 1, updated_at = now() WHERE stream = $1 AND version = $3",
	}
}

// NewStore returns a Store that keeps the cursor of the stream name in a
// row of [DefaultTable] (or the table [WithTable] names) through pool.
// Load returns initial while the row does not exist; the table is created
// by the first Load or Save that finds it missing. NewStore makes no round
// trip. Every argument and option is checked at once: the error joins one
// error per bad one (a nil pool or codec, an empty name, a bad option),
// each matching [ErrInvalid] and stream.ErrInvalidOption and naming it.
func NewStore[C any](pool *pgxpool.Pool, name string, codec cursor.Codec[C], initial C, opts ...StoreOption) (*Store[C], error) {
	cfg := storeConfig{table: []string{DefaultTable}, retry: defaultTxRetry}
	for _, o := range opts {
		if o != nil {
			o.applyStore(&cfg)
		}
	}
	var errs []error
	if pool == nil {
		errs = append(errs, invalid("NewStore", "pool", nil, "must not be nil"))
	}
	if name == "" {
		errs = append(errs, invalid("NewStore", "name", name, "must not be empty"))
	}
	if codec == nil {
		errs = append(errs, invalid("NewStore", "codec", nil, "must not be nil"))
	}
	if errs = append(errs, cfg.errs...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Store[C]{
		pool: pool, name: name, codec: codec, initial: initial,
		table: strings.Join(cfg.table, "."), sql: newStatements(cfg.table),
		iso: cfg.iso, retry: cfg.retry,
	}, nil
}

// CommitsInHandler reports whether a [Transactional] handler was made over
// the Store: the cursor is then committed by the handler, in its own
// transaction, not by the stream. A stream that runs handlers concurrently
// (stream.WithConcurrency above 1) must refuse such a Store: transactions
// committed out of order would store a cursor beyond an unfinished event.
func (s *Store[C]) CommitsInHandler() bool { return s.inTx.Load() }

// Load reads the cursor (initial while the stream has none) and makes the
// Store the stream's only writer: it bumps the row's version under the
// row's lock (writing initial's encoding when there is no row), so a
// transaction of another Store of the stream still in flight — a killed
// predecessor's COMMIT already on its way — finishes or fails before Load
// returns, and every later write of that other Store fails with
// [ErrCursorChanged]. A restarted process therefore never stops on its
// predecessor's late commit; the predecessor, if it still runs, does.
// A row the codec cannot decode gives an error marked [errclass.Permanent];
// so does a missing table that cannot be created (no privilege), naming the
// table.
func (s *Store[C]) Load(ctx context.Context) (C, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(ctx)
}

func (s *Store[C]) load(ctx context.Context) (C, error) {
	var zero C
	init, err := s.codec.Encode(s.initial)
	if err != nil {
		return zero, errclass.Permanent(fmt.Errorf("postgres: encoding the initial cursor %v of stream %q: %w", s.initial, s.name, err))
	}
	data, version, err := s.takeOver(ctx, init)
	if isCode(err, "42P01") { // undefined_table
		if err = s.create(ctx); err != nil {
			return zero, err
		}
		data, version, err = s.takeOver(ctx, init)
	}
	if err != nil {
		return zero, fmt.Errorf("postgres: loading the cursor of stream %q from table %s: %w", s.name, s.table, err)
	}
	c := s.initial
	if version != 0 {
		if c, err = s.codec.Decode(data); err != nil {
			return zero, errclass.Permanent(fmt.Errorf("postgres: the cursor of stream %q in table %s at version %d does not decode: %w", s.name, s.table, version, err))
		}
	}
	s.known, s.version, s.last, s.pending = true, version, data, nil
	return c, nil
}

// takeOver bumps the row's version (inserting init at version 1 when there
// is no row) and returns the row's cursor and new version.
func (s *Store[C]) takeOver(ctx context.Context, init []byte) ([]byte, int64, error) {
	var data []byte
	var version int64
	err := s.pool.QueryRow(ctx, s.sql.fence, s.name, init).Scan(&data, &version)
	return data, version, err
}

// read returns the row's cursor and version, or version 0 when there is no
// row.
func (s *Store[C]) read(ctx context.Context, q querier) ([]byte, int64, error) {
	var data []byte
	var version int64
	err := q.QueryRow(ctx, s.sql.load, s.name).Scan(&data, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	return data, version, err
}

// create creates the table; another process creating it at the same time
// is no failure.
func (s *Store[C]) create(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql.create)
	switch {
	case err == nil, isCode(err, "42P07"), isCode(err, "23505"): // duplicate_table, unique_violation (a concurrent CREATE)
		return nil
	case isCode(err, "42501"): // insufficient_privilege
		return errclass.Permanent(fmt.Errorf("postgres: table %s does not exist and creating it was refused: %w", s.table, err))
	}
	return fmt.Errorf("postgres: creating table %s: %w", s.table, err)
}

// Save writes c as the type's documentation says: nothing when the row
// holds c's encoding already. A Save before any Load takes the row's
// current version as its base. An encoding error is marked
// [errclass.Permanent].
func (s *Store[C]) Save(ctx context.Context, c C) error {
	enc, err := s.codec.Encode(c)
	if err != nil {
		return errclass.Permanent(fmt.Errorf("postgres: encoding the cursor %v of stream %q: %w", c, s.name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds(enc) {
		return nil
	}
	if !s.known {
		if _, err := s.load(ctx); err != nil {
			return err
		}
		if s.holds(enc) {
			return nil
		}
	}
	next, err := s.cas(ctx, s.pool, enc)
	if err != nil {
		if !errors.Is(err, ErrCursorChanged) {
			s.pending, s.pendVer = enc, s.version+1 // applied or not: the next write finds out
		}
		return fmt.Errorf("postgres: saving the cursor of stream %q: %w", s.name, err)
	}
	if next != 0 {
		s.version, s.last, s.pending = next, enc, nil
	}
	return nil
}

// holds reports whether the row is known to hold enc; s.mu is held.
func (s *Store[C]) holds(enc []byte) bool {
	return s.known && s.version != 0 && s.pending == nil && bytes.Equal(enc, s.last)
}

// cas writes enc over the row at the Store's version through q and
// returns the version the row has once q commits. When the row has changed
// it reads it: if it holds the pending write, that write landed and the
// Store adopts it; then cas returns 0 when enc is what it holds, or tries
// again on the new version. Any other change is an error matching
// ErrCursorChanged. s.mu is held.
func (s *Store[C]) cas(ctx context.Context, q querier, enc []byte) (next int64, err error) {
	for {
		var tag pgconn.CommandTag
		if s.version == 0 {
			tag, err = q.Exec(ctx, s.sql.insert, s.name, enc)
		} else {
			tag, err = q.Exec(ctx, s.sql.update, s.name, enc, s.version)
		}
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return s.version + 1, nil
		}
		data, version, err := s.read(ctx, q)
		if err != nil {
			return 0, err
		}
		if s.pending == nil || version != s.pendVer || !bytes.Equal(data, s.pending) {
			return 0, errclass.Permanent(fmt.Errorf("%w: stream %q in table %s is at version %d, not %d", ErrCursorChanged, s.name, s.table, version, s.version))
		}
		s.version, s.last, s.pending = version, data, nil // the lost write was ours
		if bytes.Equal(enc, data) {
			return 0, nil
		}
	}
}

// isCode reports whether err is a PostgreSQL error with SQLSTATE code.
func isCode(err error, code string) bool { return pgsql.IsCode(err, code) }

// invalid returns the error of a bad argument arg of where, given value:
// it matches [ErrInvalid] and stream.ErrInvalidOption.
func invalid(where, arg string, value any, why string) error {
	return &badarg.Error{Where: "postgres: " + where, Arg: arg, Value: value, Why: why, Mark: ErrInvalid}
}
