package stream

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/resumable-go/resumable/internal/errwalk"
)

const (
	defaultBatch = 100  // a batch's largest size under RunBatch without WithBatch
	minAhead     = 1024 // the fewest events RunBatch's reader reads ahead
)

// WithBatch sets how [Resumer.RunBatch] groups events: a batch holds at
// most max events (default 100); it is handed over when full, when linger
// has passed since its first event was read, or when the connection ends.
// With linger 0 (the default) a batch is whatever has been read when the
// handler is free, never waiting for more. max < 1 or a negative linger
// makes New fail; Run and All refuse a Resumer made with it.
func WithBatch(max int, linger time.Duration) Option {
	return optionFunc(func(cfg *config) {
		switch {
		case max < 1:
			cfg.fail("WithBatch(%d, %v): a batch of fewer than one event", max, linger)
		case linger < 0:
			cfg.fail("WithBatch(%d, %v): negative linger", max, linger)
		default:
			cfg.batch, cfg.linger = max, linger
		}
	})
}

// WithBatchEnd makes [Resumer.RunBatch] end batches only after an event
// for which end returns true (the last event of a source transaction): a
// batch holds whole transactions — as many as were read already and fit in
// its max — and never waits for more; a transaction larger than max is
// split at max. A connection's end or failure drops the part of a
// transaction a batch holds (it is read again whole); only
// [ErrEndOfStream] hands it over. end may be called more than once for an
// event (it looks ahead). Run and All refuse it. T must be the Resumer's
// event type, or New fails. Nil means none.
func WithBatchEnd[T any](end func(T) bool) Option {
	return optionFunc(func(cfg *config) {
		cfg.batchEnd = typed{}
		if end != nil {
			cfg.batchEnd = typed{v: end, t: reflect.TypeFor[T]()}
		}
	})
}

// RunBatch is [Resumer.Run] for a handler that takes many events at once:
// handle receives consecutive events of the stream (progress-only events
// between them are folded into the batch's commit), and when it returns nil
// the cursor of the batch's last event is committed; when it fails, nothing
// of the batch is. [WithBatch] and [WithBatchEnd] say where batches end.
// The slice is reused: it is valid only until handle returns.
//
// [WithHandlerRetry] retries the whole batch; a handler returning [ErrStop]
// commits its batch and ends Run cleanly; a resync's replay is handed over
// in batches too. RunBatch returns an error matching [ErrInvalidOption]
// with [WithConcurrency] (n > 1) or [WithDeadLetter] (a batch is not an
// event to park), and otherwise what Run returns.
func (r *Resumer[T, C]) RunBatch(ctx context.Context, handle func(ctx context.Context, events []T) error) error {
	return r.s.runBatch(ctx, handle)
}

// runBatch is RunBatch.
func (r *supervisor[T, C]) runBatch(ctx context.Context, handle func(ctx context.Context, events []T) error) error {
	switch {
	case handle == nil:
		return fmt.Errorf("%w: RunBatch: nil handler", ErrInvalidOption)
	case r.handlers > 1:
		return fmt.Errorf("%w: RunBatch with WithConcurrency(%d): a batch is handled at once; use larger batches", ErrInvalidOption, r.handlers)
	case r.park != nil:
		return fmt.Errorf("%w: RunBatch with WithDeadLetter: a batch is not an event to park", ErrInvalidOption)
	}
	b := &batch[T, C]{handle: handle, events: make([]T, 0, r.batchMax())}
	return r.run(ctx, b.call, b)
}

// batchMax is a batch's largest size.
func (r *supervisor[T, C]) batchMax() int {
	if r.batch > 0 {
		return r.batch
	}
	return defaultBatch
}

// batch is one RunBatch's buffer: the events of the batch being filled or
// handled, and the handler.
type batch[T, C any] struct {
	handle func(ctx context.Context, events []T) error
	events []T
	last   C             // the cursor of the batch's last event, progress-only ones included
	moves  bool          // committing last moves the stream
	n      int           // events and progress-only events taken
	first  time.Duration // when its first event was read (the ring's stamp), under a linger
	q      *ahead[T]     // the read-ahead ring, made at the first connection
}

// call is the step's handler for a batch: the batch stands in for the
// event.
func (b *batch[T, C]) call(ctx context.Context, _ T) error { return b.handle(ctx, b.events) }

// add takes an event of kind into the batch at cursor c.
func (b *batch[T, C]) add(ev T, c C, kind eventKind, moves bool) {
	if kind == handled || kind == replayed {
		b.events = append(b.events, ev)
	}
	b.last, b.n = c, b.n+1
	b.moves = b.moves || moves
}

func (b *batch[T, C]) reset() {
	clear(b.events)
	b.events, b.n, b.moves = b.events[:0], 0, false
}

// flush runs the step for the batch and commits its last cursor. It
// returns the action that ended the step (finished, stop or fail) and its
// error: the handler's, or a failed save's (as saveFailed).
func (r *supervisor[T, C]) flush(ctx context.Context, b *batch[T, C], kind eventKind) (action, error) {
	if b.n == 0 {
		return finished, nil
	}
	defer b.reset()
	a := finished
	if len(b.events) > 0 {
		var zero T
		var err error
		r.guard.wd.handling(true)
		_, a, err = r.inline(ctx, b.call, zero, b.last)
		r.guard.wd.handling(false)
		if a == fail {
			return fail, err
		}
	}
	if kind == replayed { // a replay commits the resync's cursor, once
		return a, nil
	}
	k := handled
	if len(b.events) == 0 {
		k = progress
	}
	rec := commitRec[C]{c: b.last, kind: k, moves: b.moves, handled: len(b.events), folded: b.n - len(b.events)}
	r.record(rec)
	if b.moves && r.due() {
		return a, r.save(ctx, false)
	}
	return a, nil
}

// readBatch is drain's loop under RunBatch: a reader goroutine reads ahead
// up to four batches, and the loop hands batches to the step as WithBatch and
// WithBatchEnd say. Under WithBatchEnd a connection's end drops the part of
// a transaction the batch holds: it is read again after the committed
// cursor, never handed over split.
func (r *supervisor[T, C]) readBatch(ctx context.Context, conn Conn[T], b *batch[T, C]) outcome {
	o := outcome{opened: true}
	// Room to read on while a batch is handled (and while the loop wakes);
	// the reader records what it reads as activity, as the loop may sleep
	// until a whole batch was read.
	if b.q == nil {
		b.q = newAhead[T](max(4*cap(b.events), minAhead), r.guard.wd, r.linger > 0)
	}
	q := b.q.start(ctx, conn)
	defer q.stop(conn)
	var linger *time.Timer
	if r.linger > 0 {
		linger = time.NewTimer(r.linger)
		linger.Stop()
		defer linger.Stop()
	}
	for {
		end, err := r.fill(ctx, q, b, linger)
		if qf, ok := err.(quietFailed); ok { // fill's own, never wrapped
			b.reset() // read again after the committed cursor
			return r.saveEnded(ctx, o, qf.err)
		}
		switch {
		case err != nil:
			return o.final(err)
		case errwalk.Is(end, errReaderPanicked): // raised once the deferred stop ended the reader and closed the Conn
			b.reset()
			panic(q.panicVal)
		case end != nil && r.batchEnd != nil && len(b.events) > 0 && !errwalk.Is(end, ErrEndOfStream):
			b.reset() // a part of a transaction: read again, unless the stream is over
			return r.connEnded(ctx, o, end)
		}
		n := b.n
		a, err := r.flush(ctx, b, handled)
		switch {
		case a == fail:
			return o.final(err)
		case n > 0:
			o.commits++
		}
		switch {
		case a == stop:
			return o.final(nil)
		case err != nil:
			return r.saveEnded(ctx, o, err)
		case end != nil:
			return r.connEnded(ctx, o, end)
		}
	}
}

// fill takes events from q into b until the batch is ready: full, at an
// end marker (WithBatchEnd), lingered (linger after its first event was
// read, or earlier when the ring could not tell exactly: what was read by
// then goes with it), with only progress-only
// events under WithBatchEnd once nothing more was read, or — with linger
// 0 and no end markers — at the first moment nothing more was read. It
// returns the error that ended the connection, if it came, or an error
// that ends Run (ctx's end, an extractor's failure).
func (r *supervisor[T, C]) fill(ctx context.Context, q *ahead[T], b *batch[T, C], linger *time.Timer) (end, stop error) {
	var lingered <-chan time.Time
	defer func() {
		if lingered != nil && !linger.Stop() {
			select { // a fire that raced the stop
			case <-linger.C:
			default:
			}
		}
	}()
	due := false // the linger ran out: hand over what was read
	for {
		for evs := q.run(); len(evs) > 0; evs = q.run() {
			if b.n == 0 && q.stamps != nil {
				b.first = q.firstRead()
			}
			n, ready, err := r.addRun(evs, b)
			q.release(n)
			if ready || err != nil {
				return nil, err
			}
		}
		if over, err := q.ended(); over {
			return err, nil
		}
		switch {
		case b.n == 0:
		case due, r.batchEnd == nil && linger == nil:
			return nil, nil
		case r.batchEnd != nil && len(b.events) == 0:
			return nil, nil // progress-only events: commit what the stream moved past
		}
		need := 1 // the first event, or the next that may end the batch
		if b.n > 0 && r.batchEnd == nil {
			left := r.linger - (time.Since(q.base) - b.first)
			if left <= 0 {
				due = true
				continue // take what was read meanwhile
			}
			need = cap(b.events) - len(b.events) // the rest of the batch, in one wake
			if lingered == nil {
				linger.Reset(left)
				lingered = linger.C
			}
		}
		switch ran, err := r.await(ctx, q.waitForN(need), lingered); {
		case err != nil:
			return nil, err
		case ran:
			lingered, due = nil, true
		}
	}
}

// quietFailed is what fill returns when the interval save of a quiet
// stream failed while the loop waited: the connection ends as after any
// failed save.
type quietFailed struct{ err error }

func (q quietFailed) Error() string { return q.err.Error() }

// await waits for the ring's wake (nil: nothing to wait for), the linger
// or ctx's end, and reports whether the linger ran out. Under
// WithCheckpointInterval a stream gone quiet is saved meanwhile, as Run's
// loop does while it waits in Recv; that save's failure is a quietFailed.
func (r *supervisor[T, C]) await(ctx context.Context, wake <-chan struct{}, lingered <-chan time.Time) (ran bool, err error) {
	if wake == nil {
		return false, nil
	}
	away := r.interval > 0 && r.unsaved > 0 && r.leave(ctx)
	select {
	case <-wake:
	case <-lingered:
		ran = true
	case <-ctx.Done():
		err = ctx.Err()
	}
	if away {
		if serr := r.back(); serr != nil && err == nil {
			return ran, quietFailed{serr}
		}
	}
	return ran, err
}

// addRun takes events from evs into b until the batch is ready (full, or
// at an end marker), and returns how many it took. It is RunBatch's
// per-event path: take and add, their common case spelled out (generic
// methods do not inline).
func (r *supervisor[T, C]) addRun(evs []T, b *batch[T, C]) (n int, ready bool, _ error) {
	for i, ev := range evs {
		c, err := r.extract(ev)
		kind, moves := handled, true
		if err != nil || r.order != nil {
			if kind, moves, err = r.judge(c, err, b.lastOr(r.cur())); err != nil {
				return i + 1, true, err
			}
		}
		switch kind {
		case skipped:
			r.skip()
			continue
		case handled:
			b.events = append(b.events, ev)
		}
		b.last, b.n, b.moves = c, b.n+1, b.moves || moves
		if len(b.events) == cap(b.events) ||
			(r.batchEnd != nil && kind == handled && r.batchEnd(ev) && !r.nextFits(evs[i+1:], cap(b.events)-len(b.events))) {
			return i + 1, true, nil
		}
	}
	return len(evs), false, nil
}

// nextFits reports whether the batch, at the end of a transaction (a
// WithBatchEnd mark), takes the next one too: when that transaction was
// read whole already (its end is among the events read, rest) and fits in
// the room left. So a batch holds whole transactions up to max, and never
// waits for more: what was not read yet goes in the next batch.
func (r *supervisor[T, C]) nextFits(rest []T, room int) bool {
	for j, ev := range rest {
		if j >= room {
			return false
		}
		if r.batchEnd(ev) {
			return true
		}
	}
	return false
}

// lastOr returns the cursor of the batch's last event, or c when the batch
// is empty.
func (b *batch[T, C]) lastOr(c C) C {
	if b.n > 0 {
		return b.last
	}
	return c
}
