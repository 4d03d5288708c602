package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/errwalk"
	"github.com/resumable-go/resumable/internal/wait"
)

// The one step an event goes through, whoever runs it: take (the cursor
// and the kind, read once), try (the handler, or the dead letter), after
// (the one decision on a try's result: done, retry, park, stop or fail),
// and commit (committer.go). This file is what happens when a handler
// fails. With one handler Run's goroutine runs the step inline; under
// WithConcurrency the pipeline (pipeline.go) runs tries and decisions on
// its handler goroutines and commits and parks on its committer; hooks
// never run two at once (callHook).

// slot is one event on its way through the step.
type slot[T, C any] struct {
	ev    T
	c     C
	seq   uint64
	kind  eventKind
	moves bool // committing it moves the stream
	state slotState
	tries int              // handler calls made
	pause time.Duration    // the wait before the next try
	steps backoff.Sequence // the handler retry sequence, made at the first retry
	spent *HandlerError    // the tries are spent: park this at the head of the window
	// Written by a handler goroutine between receiving the slot and
	// sending it back.
	err      error
	started  bool // the try ran (false: the window halted before it started)
	panicked bool
	panicVal any
}

type slotState uint8

const (
	queued  slotState = iota // waits for its key or a free handler
	running                  // in a try
	parking                  // tries spent: parked once at the head of the window
	done                     // finished, ready to commit
)

// take extracts ev's cursor and says what to do with the event, given the
// cursor before it (see judge). It is the only place an event's cursor is
// read.
func (r *supervisor[T, C]) take(ev T, before C) (c C, kind eventKind, moves bool, err error) {
	c, err = r.extract(ev)
	if err == nil && r.order == nil {
		return c, handled, true, nil
	}
	kind, moves, err = r.judge(c, err, before)
	return c, kind, moves, err
}

// try calls the handler with the slot's event after its pause.
func (r *supervisor[T, C]) try(ctx context.Context, handle handler[T], s *slot[T, C]) {
	s.started = true
	if s.pause > 0 {
		if err := wait.Sleep(ctx, s.pause); err != nil {
			s.err = err
			return
		}
	}
	s.tries++
	s.err = handle(ctx, s.ev)
}

// action is what follows a try.
type action uint8

const (
	finished action = iota // the event is handled: commit it in its place
	retry                  // try again after s.pause
	park                   // park it once it heads the window
	stop                   // ErrStop: commit it, then Run ends
	fail                   // Run ends with the error; the event is not committed
)

// after is the one decision on a try's result. It runs on the loop's
// goroutine, and so does the OnHandlerError hook it calls.
func (r *supervisor[T, C]) after(ctx context.Context, s *slot[T, C]) (action, error) {
	err := s.err
	switch {
	case err == nil:
		return finished, nil
	case errwalk.Is(err, ErrStop):
		return stop, nil
	case ctx.Err() != nil: // shutdown is no failure of the handler
		return fail, ctx.Err()
	case errwalk.Is(err, errBreak): // an All loop body stopped: neither retried nor parked
		return fail, err
	}
	d := r.classify(err)
	again := d.Action == errclass.Retry && s.tries < r.tries
	if again {
		if s.steps == nil {
			s.steps = r.retryPolicy.NewSequence()
		}
		step, ok := s.steps.Next()
		again, s.pause = ok, max(step, r.capServer(d.After))
	}
	parks := !again && r.park != nil
	if r.hooks.OnHandlerError != nil {
		e := HandlerEvent[C]{Cursor: s.c, Try: s.tries, Err: err, Decision: d, Retry: again, Parked: parks}
		r.callHook(func() { r.hooks.OnHandlerError(e) })
	}
	switch {
	case again:
		r.mu.Lock()
		r.stats.HandlerRetries++
		r.mu.Unlock()
		return retry, nil
	case parks:
		s.spent = &HandlerError{Err: err, Tries: s.tries}
		return park, nil
	case s.tries <= 1:
		return fail, err // as without the options
	}
	return fail, &HandlerError{Err: err, Tries: s.tries}
}

// parkSlot hands a spent event to the dead letter. It is called when the
// event heads the window, so that a parked event is committed at once.
func (r *supervisor[T, C]) parkSlot(ctx context.Context, s *slot[T, C]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.park(ctx, s.ev, s.spent); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("stream: parking the event at cursor %s after %d tries (%w): %w", text(s.c), s.spent.Tries, s.spent.Err, err)
	}
	return nil
}

// inline runs the step of one event (at cursor c) on the loop's
// goroutine, until the event is finished, parked, stopping or failed. It
// returns the kind to commit it as (handled, or parked) and the action
// that ended it: finished or stop to commit, fail to end Run.
func (r *supervisor[T, C]) inline(ctx context.Context, handle handler[T], ev T, c C) (eventKind, action, error) {
	err := handle(ctx, ev)
	if err == nil { // the per-event path ends here
		return handled, finished, nil
	}
	return r.retried(ctx, handle, &slot[T, C]{ev: ev, c: c, tries: 1, started: true, err: err})
}

// retried is inline after the first try of s failed.
func (r *supervisor[T, C]) retried(ctx context.Context, handle handler[T], s *slot[T, C]) (eventKind, action, error) {
	for {
		a, err := r.after(ctx, s)
		switch a {
		case retry:
			r.try(ctx, handle, s)
			continue
		case park:
			if err := r.parkSlot(ctx, s); err != nil {
				return handled, fail, err
			}
			return parked, finished, nil
		}
		return handled, a, err
	}
}
