package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/wait"
	"github.com/resumable-go/resumable/stream"
)

// Transactional returns a handler for stream.Resumer.Run that makes each
// event's effects and its cursor one transaction: it begins a transaction
// on s's pool (at s's isolation level, [WithIsolation]), writes the cursor
// extract gives for the event to s's row (a compare-and-set, first, so that
// a second process on the same stream waits on the row and then fails),
// calls fn with the transaction, and commits. If fn or the compare-and-set
// fails, the transaction rolls back: no effect and no cursor. The Resumer's
// own Save of that cursor afterwards finds it stored and makes no round
// trip. An event whose cursor the row already holds through a commit whose
// reply was lost is not handled again.
//
// A serialization failure or deadlock (SQLSTATE 40001, 40P01) and a lost
// connection are retried in place, the whole transaction with fn, with the
// delays of [WithTxRetry]; each attempt calls fn again with a new
// transaction. Other errors of fn (a constraint violation included) are
// returned as they are, and so is the last one when the retries give up.
// A row written by another process gives an error matching
// [ErrCursorChanged], marked [errclass.Permanent].
//
// fn must do its work through tx only, must not commit or roll it back, and
// must not call s (the Store is busy with the transaction). An fn that
// returns stream.ErrStop has its effects committed with the cursor: the
// stream commits the event and stops.
// Transactional marks s as committing in the handler
// ([Store.CommitsInHandler]): a stream refuses to run such a handler
// concurrently. The handler's calls run one at a time. A nil s, extract or
// fn gives a handler that returns an error matching [ErrInvalid], marked
// [errclass.Permanent].
func Transactional[T, C any](s *Store[C], extract cursor.Extractor[T, C], fn func(ctx context.Context, tx pgx.Tx, event T) error) func(ctx context.Context, event T) error {
	if err := nilArgs("Transactional", s == nil, extract == nil, fn == nil); err != nil {
		return func(context.Context, T) error { return err }
	}
	s.inTx.Store(true)
	return func(ctx context.Context, event T) error {
		enc, err := encodeCursor(s, extract, event)
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return transact(ctx, s, enc, fn, event)
	}
}

// TransactionalBatch is [Transactional] for stream.Resumer.RunBatch: a
// batch's effects and the cursor of its last event are one transaction, so
// each batch is applied exactly once, retried as Transactional retries.
// fn receives the batch as RunBatch hands it over (valid until fn
// returns); an empty batch does nothing. Its rules and errors are
// Transactional's. An fn that returns stream.ErrStop has its effects
// committed with the cursor of the batch's last event: it must have
// applied the whole batch, or the events it left out are never delivered
// again.
func TransactionalBatch[T, C any](s *Store[C], extract cursor.Extractor[T, C], fn func(ctx context.Context, tx pgx.Tx, events []T) error) func(ctx context.Context, events []T) error {
	if err := nilArgs("TransactionalBatch", s == nil, extract == nil, fn == nil); err != nil {
		return func(context.Context, []T) error { return err }
	}
	s.inTx.Store(true)
	return func(ctx context.Context, events []T) error {
		if len(events) == 0 {
			return nil
		}
		enc, err := encodeCursor(s, extract, events[len(events)-1])
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return transact(ctx, s, enc, fn, events)
	}
}

// nilArgs returns the error of where's nil arguments, each named, marked
// errclass.Permanent; nil when none is nil.
func nilArgs(where string, s, extract, fn bool) error {
	var errs []error
	for _, a := range []struct {
		name string
		nil  bool
	}{{"s", s}, {"extract", extract}, {"fn", fn}} {
		if a.nil {
			errs = append(errs, invalid(where, a.name, nil, "must not be nil"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errclass.Permanent(errors.Join(errs...))
}

// encodeCursor returns the encoded cursor of event.
func encodeCursor[T, C any](s *Store[C], extract cursor.Extractor[T, C], event T) ([]byte, error) {
	c, err := extract(event)
	if err != nil && !errors.Is(err, cursor.ProgressOnly) {
		return nil, fmt.Errorf("postgres: extracting the cursor of an event of stream %q: %w", s.name, err)
	}
	enc, err := s.codec.Encode(c)
	if err != nil {
		return nil, errclass.Permanent(fmt.Errorf("postgres: encoding the cursor %v of stream %q: %w", c, s.name, err))
	}
	return enc, nil
}

// transact runs attempts until one commits, fails for good, or the retry
// policy gives up; s.mu is held. E is an event, or a batch of them.
func transact[E, C any](ctx context.Context, s *Store[C], enc []byte, fn func(context.Context, pgx.Tx, E) error, event E) error {
	if !s.known {
		if _, err := s.load(ctx); err != nil {
			return err
		}
	}
	var seq backoff.Sequence // made at the first retry: the common path allocates none
	for attempts := 1; ; attempts++ {
		retry, err := attempt(ctx, s, enc, fn, event)
		if err == nil || !retry {
			return err
		}
		if ctx.Err() == nil {
			if seq == nil {
				seq = s.retry.NewSequence()
			}
			d, ok := seq.Next()
			if !ok {
				return fmt.Errorf("postgres: the transaction of stream %q failed %d times: %w", s.name, attempts, err)
			}
			_ = wait.Sleep(ctx, d) // ctx's end is checked below
		}
		if ctx.Err() != nil {
			return fmt.Errorf("postgres: retrying the transaction of stream %q after %v: %w", s.name, err, ctx.Err())
		}
	}
}

// attempt runs one transaction and reports whether its failure may be
// retried; s.mu is held. An fn that returns stream.ErrStop has its effects
// committed with the cursor, and ErrStop is returned: the stream commits
// the event and stops.
func attempt[E, C any](ctx context.Context, s *Store[C], enc []byte, fn func(context.Context, pgx.Tx, E) error, event E) (retry bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: s.iso})
	if err != nil {
		return retryable(err, true), fmt.Errorf("postgres: beginning the transaction of stream %q: %w", s.name, err)
	}
	done := false
	defer func() {
		if !done {
			rollback(ctx, tx)
		}
	}()
	next, err := s.cas(ctx, tx, enc)
	if err != nil {
		return retryable(err, tx.Conn().IsClosed()), fmt.Errorf("postgres: writing the cursor of stream %q: %w", s.name, err)
	}
	if next == 0 {
		return false, nil // committed before, by an attempt whose reply was lost
	}
	err = fn(ctx, tx, event)
	if st := tx.Conn().PgConn().TxStatus(); st == 'I' && !tx.Conn().IsClosed() {
		// fn ended the transaction itself (a raw COMMIT or ROLLBACK): the
		// cursor may be committed; the next write finds out.
		s.pending, s.pendVer = enc, next
		return false, errclass.Permanent(fmt.Errorf("postgres: the function of stream %q ended the transaction itself (fn must not commit or roll back; its error: %v)", s.name, err))
	}
	stop := err != nil && errors.Is(err, stream.ErrStop)
	if err != nil && !stop {
		return retryable(err, tx.Conn().IsClosed()), err
	}
	if err := tx.Commit(ctx); err != nil {
		var pg *pgconn.PgError
		if !errors.As(err, &pg) {
			s.pending, s.pendVer = enc, next // committed or not: the next write finds out
		}
		return retryable(err, tx.Conn().IsClosed()), fmt.Errorf("postgres: committing the transaction of stream %q: %w", s.name, err)
	}
	done = true
	s.version, s.last, s.pending = next, enc, nil
	if stop {
		return false, err
	}
	return false, nil
}

// rollback rolls tx back, even when ctx has ended, within rollbackTimeout.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	tx.Rollback(ctx) // an error leaves the connection closed: the server rolls back
}

// rollbackTimeout bounds a rollback; a server that does not answer within it
// loses the connection, which rolls the transaction back as well.
const rollbackTimeout = 5 * time.Second

// retryable reports whether a transaction that failed with err may be run
// again: a serialization failure, a deadlock, a connection that was lost
// (connLost, or a connection error), or a server shutting down.
func retryable(err error, connLost bool) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "40001", "40P01", // serialization_failure, deadlock_detected
			"57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return strings.HasPrefix(pg.Code, "08") // connection_exception
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var connect *pgconn.ConnectError
	return connLost || errors.As(err, &connect) || pgconn.SafeToRetry(err)
}
