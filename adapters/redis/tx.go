package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// watchRetries bounds the attempts of one transaction whose WATCH fired
// while the Store still owned the key (someone touched the hash without
// taking it over).
const watchRetries = 10

// Transactional returns a handler for stream.Resumer.Run that makes each
// event's effects and its cursor one MULTI/EXEC: under WATCH of s's hash,
// it checks that s still owns the key, calls fn with a transaction
// pipeline, and executes the commands fn queued together with the write
// of the cursor extract gives for the event. If fn fails, nothing is sent:
// no effect and no cursor. The Resumer's own Save of that cursor
// afterwards finds it stored and makes no round trip. An event whose
// cursor the hash already holds (an EXEC whose reply was lost) is not
// handled again.
//
// A Store that lost the key (another Store loaded it since) gives an
// error matching [ErrCursorChanged], marked errclass.Permanent, and sends
// nothing. A hash touched by someone else while s still owns it fires
// the WATCH: the transaction runs again, fn included (at most 10 times).
// Nothing else is retried: a lost connection is returned as an error the
// stream retries, so run the stream with stream.WithHandlerRetry to call
// the handler again in place. Redis has
// no rollback: a queued command that fails when EXEC runs it (WRONGTYPE)
// does not stop the others nor the cursor, and its error is returned
// marked errclass.Permanent.
//
// fn must only queue commands on p (their results are set once EXEC ran,
// after fn returned), must not call p's Exec or Discard, and
// must not call s. An fn that returns stream.ErrStop has its commands
// executed with the cursor: the stream commits the event and stops.
// Transactional marks s as committing in the handler
// ([Store.CommitsInHandler]): a stream refuses to run such a handler
// concurrently. The handler's calls run one at a time. A nil s, extract or
// fn gives a handler that returns an error matching
// stream.ErrInvalidOption, marked errclass.Permanent.
func Transactional[T, C any](s *Store[C], extract cursor.Extractor[T, C], fn func(ctx context.Context, p goredis.Pipeliner, event T) error) func(ctx context.Context, event T) error {
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
// batch's commands and the cursor of its last event are one MULTI/EXEC,
// so each batch is applied exactly once. fn receives the batch as
// RunBatch hands it over (valid until fn returns); an empty batch does
// nothing. Its rules and errors are Transactional's. An fn that returns
// stream.ErrStop has its commands executed with the cursor of the batch's
// last event: it must have queued the whole batch, or the events it left
// out are never delivered again.
func TransactionalBatch[T, C any](s *Store[C], extract cursor.Extractor[T, C], fn func(ctx context.Context, p goredis.Pipeliner, events []T) error) func(ctx context.Context, events []T) error {
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
			errs = append(errs, badarg.New("redis: "+where, a.name, nil, "required"))
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
		return nil, fmt.Errorf("redis: extracting the cursor of an event for %q: %w", s.key, err)
	}
	return s.encode(c)
}

// transact runs attempts until one commits or fails; s.mu is held. E is
// an event, or a batch of them.
func transact[E, C any](ctx context.Context, s *Store[C], enc []byte, fn func(context.Context, goredis.Pipeliner, E) error, event E) error {
	if s.token == "" {
		if _, err := s.load(ctx); err != nil {
			return err
		}
	}
	t := txn[E, C]{s: s, enc: enc, fn: fn, event: event}
	cl, ok := s.rdb.(*goredis.Client)
	t.pipelined = ok
	for range watchRetries {
		var aerr error // the attempt's outcome; Watch's own error is the WATCH's
		run := func(tx *goredis.Tx) error {
			aerr = t.attempt(ctx, tx)
			return nil
		}
		var err error
		if t.pipelined {
			err = cl.Watch(ctx, run)
		} else {
			err = s.rdb.Watch(ctx, run, s.key)
		}
		switch {
		case err != nil:
			return classify(fmt.Sprintf("watching the cursor of %q", s.key), err)
		case !errors.Is(aerr, goredis.TxFailedErr):
			return aerr
		}
	}
	return fmt.Errorf("redis: the cursor of %q was touched under %d transactions in a row", s.key, watchRetries)
}

// txn is the transaction of one handler call; its Store's mu is held.
type txn[E, C any] struct {
	s     *Store[C]
	enc   []byte // the cursor to write
	fn    func(context.Context, goredis.Pipeliner, E) error
	event E
	// pipelined: the attempt sends WATCH itself, in one round trip with
	// the ownership check (on a *Client; go-redis's Watch sends it alone),
	// and UNWATCHes when EXEC did not run.
	pipelined bool
}

// attempt runs one transaction on tx. It returns goredis.TxFailedErr,
// unwrapped, when the WATCH fired while the Store still owned the key:
// the attempt may run again.
func (t *txn[E, C]) attempt(ctx context.Context, tx *goredis.Tx) (err error) {
	s := t.s
	watched := t.pipelined // a WATCH of ours that EXEC has not released
	defer func() {
		if watched {
			_ = tx.Unwatch(context.WithoutCancel(ctx)).Err() // else the pooled connection keeps it
		}
	}()
	owned, done, err := t.check(ctx, tx, t.pipelined)
	if err != nil || !owned || done {
		return err
	}
	p := &txPipe{Pipeliner: tx.TxPipeline()}
	err = t.fn(ctx, p, t.event)
	if p.ended {
		return errclass.Permanent(fmt.Errorf("redis: the function of %q called Exec or Discard itself (its error: %v)", s.key, err))
	}
	stop := err != nil && errors.Is(err, stream.ErrStop)
	if err != nil && !stop {
		return err
	}
	once, write := newOnce(ctx, "hset", s.key, fieldCursor, t.enc)
	_ = p.Pipeliner.Process(ctx, once) // never retried by go-redis: a lost reply is found out by the next check
	cmds, err := p.Pipeliner.Exec(ctx)
	if err == nil || errors.Is(err, goredis.TxFailedErr) || goredis.IsExecAbortError(err) {
		watched = false // EXEC ran: it released the WATCH
	}
	switch {
	case errors.Is(err, goredis.TxFailedErr):
		if owned, _, rerr := t.check(ctx, tx, false); rerr != nil || !owned {
			return rerr
		}
		return goredis.TxFailedErr
	case goredis.IsExecAbortError(err):
		return errclass.Permanent(fmt.Errorf("redis: the transaction of %q was refused, nothing written: %w", s.key, err))
	case write.Err() != nil:
		s.sure = false // committed or not: the next write reads the hash
		return classify(fmt.Sprintf("the transaction of %q", s.key), write.Err())
	}
	s.sure, s.last = true, t.enc
	for _, c := range cmds {
		if c.Err() != nil && !errors.Is(c.Err(), goredis.Nil) {
			return errclass.Permanent(fmt.Errorf("redis: a command of the transaction of %q failed after its cursor was committed (Redis has no rollback): %v: %w", s.key, c.Args(), c.Err()))
		}
	}
	if stop {
		return stream.ErrStop
	}
	return nil
}

// check reads the Store's hash through tx, after a WATCH of it when watch
// is set (one round trip), and reports whether the Store owns it and
// whether it holds the cursor to write already (a commit whose reply was
// lost); an error matching ErrCursorChanged when the Store does not own
// it.
func (t *txn[E, C]) check(ctx context.Context, tx *goredis.Tx, watch bool) (owned, done bool, err error) {
	s := t.s
	var get *goredis.SliceCmd
	if watch {
		_, err = tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.Process(ctx, goredis.NewStatusCmd(ctx, "watch", s.key))
			get = p.HMGet(ctx, s.key, fieldOwner, fieldCursor)
			return nil
		})
	} else {
		get = tx.HMGet(ctx, s.key, fieldOwner, fieldCursor)
		err = get.Err()
	}
	if err != nil {
		return false, false, classify(fmt.Sprintf("reading the cursor of %q", s.key), err)
	}
	v := get.Val()
	if owner, _ := v[0].(string); owner != s.token {
		return false, false, s.changed()
	}
	s.sure, s.last = true, nil // what the hash holds was written by s alone: s owns the key
	if last, ok := v[1].(string); ok {
		s.last = []byte(last)
	}
	return true, s.last != nil && bytes.Equal(s.last, t.enc), nil
}

// txPipe is the transaction pipeline fn queues on: its calls that would
// execute or discard the queue do nothing and are reported.
type txPipe struct {
	goredis.Pipeliner
	ended bool
}

var errEnded = errors.New("redis: a Transactional function must not execute or discard its pipeline")

func (p *txPipe) Exec(context.Context) ([]goredis.Cmder, error) {
	p.ended = true
	return nil, errEnded
}

func (p *txPipe) Pipelined(context.Context, func(goredis.Pipeliner) error) ([]goredis.Cmder, error) {
	p.ended = true
	return nil, errEnded
}

func (p *txPipe) TxPipelined(context.Context, func(goredis.Pipeliner) error) ([]goredis.Cmder, error) {
	p.ended = true
	return nil, errEnded
}

func (p *txPipe) Discard() { p.ended = true }

func (p *txPipe) Pipeline() goredis.Pipeliner { return p }

func (p *txPipe) TxPipeline() goredis.Pipeliner { return p }
