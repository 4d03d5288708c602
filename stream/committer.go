package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/cursor"
)

// The one committer: every cursor is committed, and the Store saved, by
// the rules below, whoever runs them — Run's goroutine with one handler,
// the pipeline's committer goroutine under WithConcurrency (which also
// runs the supervisor's saves through pipeline.call). docs/how-it-decides.md
// states them:
//   - a commit records the cursor, counts it in Stats and calls OnCommit, in
//     stream order, one event at a time;
//   - a save follows a commit that moved the stream when the cadence says
//     so (WithCheckpointEvery's count, WithCheckpointInterval's time since
//     the last save ended), and once the events read before a connection's
//     end are committed; a save failure ends the connection and no other
//     save is made on it; its classification, with the retry budget, is the
//     supervisor's, and no connection resets that budget while the last
//     save failed (progress the Store does not hold is none);
//   - a save cut short by ctx's end is no failure (neither counted nor
//     hooked): the final save, on a context that outlives ctx, follows;
//   - under WithCheckpointInterval a stream that goes quiet is saved once
//     the interval has passed, not at its next event: a serial loop hands
//     the committer to a timer while it waits in Recv, RunBatch's while it
//     waits for the read-ahead ring (quietSave); the pipeline's committer
//     sets one for itself.

// committer is the committer's state: the Store, the cadence, what the
// Store lags behind, Stats and the hooks. The supervisor holds it; with
// one handler Run's goroutine runs it, under WithConcurrency the
// pipeline's committer goroutine (the supervisor's calls go through
// pipeline.call).
type committer[C any] struct {
	store       cursor.Store[C]
	everyN      int           // save every n commits; 0: not by count
	interval    time.Duration // save at the first commit this long after the last save; 0: not by time
	saveTimeout time.Duration // of the final save
	hooks       Hooks[C]
	// hookTurn holds the turn to run a hook, made by each run: hooks never
	// overlap. A channel, not a mutex, so that a hook waiting on the clock
	// inside a testing/synctest bubble does not stall the bubble.
	hookTurn chan struct{}

	unsaved     int         // commits since the last successful save: the Store lags when > 0
	saveFailed  bool        // a save failed on this connection: save no more until it ends
	lastSave    time.Time   // read only with a checkpoint interval
	saveFailing atomic.Bool // the last Store.Save failed (read by decide)
	// armed is set while the quiet save's timer is set for when the
	// interval will have passed since the last save (quietSave): until it
	// fires, no save is due by time, and a commit need not read the clock
	// (half of an interval stream's cost per event).
	armed atomic.Bool

	mu    sync.Mutex // guards stats; the committer alone writes stats.Cursor
	stats Stats[C]
}

// committed returns the committed cursor.
func (r *committer[C]) committed() C {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.Cursor
}

// commit records c as the committed cursor and saves the Store when the
// cadence says so; it returns the Store's error, or ctx's when ctx ended
// during the save.
func (r *committer[C]) commit(ctx context.Context, c C, kind eventKind, moved bool) error {
	// The per-event path of a serial loop, spelled out (generic methods do
	// not inline): the cadence, the save, then the commit recorded and the
	// save counted under one lock.
	if moved {
		r.unsaved++
	}
	save := moved && !r.saveFailed &&
		((r.everyN > 0 && r.unsaved >= r.everyN) || (r.interval > 0 && !r.armed.Load() && time.Since(r.lastSave) >= r.interval))
	var err error
	if save {
		// A save cut short by ctx's end is neither counted nor hooked: the
		// Store lags, and the final save follows.
		err = r.store.Save(ctx, c)
		save = err == nil || ctx.Err() == nil
	}
	r.mu.Lock()
	r.stats.Cursor = c
	switch kind {
	case progress:
		r.stats.Progress++
	case resyncEnd:
		r.stats.Resyncs++
	case parked:
		r.stats.Parked++
		r.stats.Events++
	default:
		r.stats.Events++
	}
	if save {
		r.countSave(err)
	}
	r.mu.Unlock()
	if r.hooks.OnCommit != nil {
		r.onCommit(commitRec[C]{c: c, kind: kind, moves: moved})
	}
	switch {
	case save:
		return r.saved(c, err, false)
	case err != nil: // ctx's end
		return ctx.Err()
	}
	return nil
}

// commitRun commits a run of finished events of the pipeline and saves
// once after them when the cadence says so, or when connEnd (the events
// read before a connection's end are all committed) finds the Store
// behind. A save cut short by ctx's end returns nil: the final save
// follows.
func (r *committer[C]) commitRun(ctx context.Context, recs []commitRec[C], connEnd bool) error {
	r.recordRun(recs)
	if !r.due() && !(connEnd && r.unsaved > 0 && !r.saveFailed) {
		return nil
	}
	if err := r.save(ctx, false); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// recordRun records a run of commits (the pipeline's), under one lock when
// no OnCommit hook needs to see each.
func (r *committer[C]) recordRun(recs []commitRec[C]) {
	if len(recs) == 0 {
		return
	}
	if r.hooks.OnCommit != nil { // a hook sees Stats as of its own commit
		for _, rec := range recs {
			r.record(rec)
		}
		return
	}
	r.mu.Lock()
	for _, rec := range recs {
		if rec.moves {
			r.unsaved++
		}
		r.count(rec)
	}
	r.stats.Cursor = recs[len(recs)-1].c
	r.mu.Unlock()
}

// record commits rec's cursor in memory: Stats, the cursor, OnCommit.
func (r *committer[C]) record(rec commitRec[C]) {
	if rec.moves {
		r.unsaved++
	}
	r.mu.Lock()
	r.stats.Cursor = rec.c
	r.count(rec)
	r.mu.Unlock()
	if r.hooks.OnCommit != nil {
		r.onCommit(rec)
	}
}

// count counts a commit in Stats; r.mu is held.
func (r *committer[C]) count(rec commitRec[C]) {
	switch {
	case rec.handled+rec.folded > 0: // a batch: each of its events counts
		r.stats.Events += uint64(rec.handled)
		r.stats.Progress += uint64(rec.folded)
	case rec.kind == progress:
		r.stats.Progress++
	case rec.kind == resyncEnd:
		r.stats.Resyncs++
	case rec.kind == parked:
		r.stats.Parked++
		r.stats.Events++
	default:
		r.stats.Events++
	}
}

// onCommit calls OnCommit for rec.
func (r *committer[C]) onCommit(rec commitRec[C]) {
	r.callHook(func() {
		r.hooks.OnCommit(CommitEvent[C]{Cursor: rec.c, Progress: rec.kind == progress, Resync: rec.kind == resyncEnd, Parked: rec.kind == parked,
			InFlight: rec.inFlight, Handled: rec.handled, Folded: rec.folded})
	})
}

// due reports whether the cadence asks for a save now.
func (r *committer[C]) due() bool { return r.dueAt(r.unsaved) }

// dueAt reports whether the cadence asks for a save with unsaved commits
// since the last save.
func (r *committer[C]) dueAt(unsaved int) bool {
	return unsaved > 0 && !r.saveFailed &&
		((r.everyN > 0 && unsaved >= r.everyN) || (r.interval > 0 && time.Since(r.lastSave) >= r.interval))
}

// checkpoint saves the committed cursor if the Store lags behind it.
func (r *committer[C]) checkpoint(ctx context.Context, final bool) error {
	if r.unsaved == 0 {
		return nil
	}
	return r.save(ctx, final)
}

// save saves the committed cursor, counts the save and calls OnSave. A
// save that is not the final one and failed because ctx ended returns
// ctx's error, uncounted and unhooked.
func (r *committer[C]) save(ctx context.Context, final bool) error {
	c := r.committed()
	err := r.store.Save(ctx, c)
	if err != nil && !final && ctx.Err() != nil {
		return ctx.Err()
	}
	r.mu.Lock()
	r.countSave(err)
	r.mu.Unlock()
	return r.saved(c, err, final)
}

// countSave counts a Store.Save; r.mu is held.
func (r *committer[C]) countSave(err error) {
	if err != nil {
		r.stats.SaveErrors++
	} else {
		r.stats.Saves++
	}
}

// saved finishes a counted Store.Save of c that returned err: OnSave, and
// the committer's state.
func (r *committer[C]) saved(c C, err error, final bool) error {
	if failing := err != nil; r.saveFailing.Load() != failing {
		r.saveFailing.Store(failing)
	}
	if r.hooks.OnSave != nil {
		r.callHook(func() { r.hooks.OnSave(SaveEvent[C]{Cursor: c, Err: err, Final: final}) })
	}
	if err != nil {
		r.saveFailed = true
		return fmt.Errorf("stream: saving cursor %s to the Store: %w", text(c), err)
	}
	r.unsaved = 0
	if r.interval > 0 {
		r.lastSave = time.Now() // read the clock only when the cadence needs it
	}
	return nil
}

// finalSave saves a lagging Store when the loop ends, on a context that
// outlives ctx's cancellation but not the final-save timeout. A loop that
// ended because saving failed is not saved again: its error already says so.
func (r *supervisor[T, C]) finalSave(ctx context.Context, o outcome) error {
	if r.unsaved == 0 || o.end == saveFailed {
		return o.err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.saveTimeout)
	defer cancel()
	err := r.checkpoint(sctx, true)
	if err == nil {
		return o.err
	}
	r.mu.Lock()
	r.stats.FinalSaveError = err
	r.mu.Unlock()
	r.warn("final save failed", err)
	return errors.Join(o.err, err)
}

// commitVia runs the committer's commit of c (a resync's cursor) on the
// goroutine that owns the committer.
func (r *supervisor[T, C]) commitVia(ctx context.Context, c C, kind eventKind) error {
	if p := r.pipe.Load(); p != nil {
		return p.call(func() error { return r.commit(ctx, c, kind, true) })
	}
	return r.commit(ctx, c, kind, true)
}

// saveNow saves the Store if it lags (a try's end), on the goroutine that
// owns the committer.
func (r *supervisor[T, C]) saveNow(ctx context.Context) error {
	if p := r.pipe.Load(); p != nil {
		return p.call(func() error { return r.checkpoint(ctx, false) })
	}
	return r.checkpoint(ctx, false)
}

// newConnection lets the committer save again on a new connection, after
// a failed save ended the last one.
func (r *supervisor[T, C]) newConnection() {
	if p := r.pipe.Load(); p != nil {
		_ = p.call(func() error { r.saveFailed = false; return nil })
		return
	}
	r.saveFailed = false
}

// quietSave is the interval save of a serial loop (one handler, or
// RunBatch: Run's goroutine commits) that waits for events (in Recv, or
// for RunBatch's read-ahead ring) with commits the Store does not hold
// yet: a timer saves them once the interval has passed. Run's goroutine
// and the timer hand the committer over through st: the timer commits only
// while Run's goroutine is away waiting, and Run's goroutine, back, waits
// for a save in progress before it goes on. Leaving and coming back are
// one atomic store and one compare-and-swap: they come with every event
// while the Store lags behind (a token channel's four operations cost 63
// ns an event more, BenchmarkRunFileStore/interval=1s).
type quietSave[T, C any] struct {
	st atomic.Int32 // home, away or saving (the committer's armed: the timer is set)
	// saved has a token after each save the timer made: Run's goroutine
	// that found one in progress waits on it, a channel so that a wait
	// for a save that waits on the clock inside a testing/synctest bubble
	// does not stall the bubble.
	saved    chan struct{}
	timer    *time.Timer // made at a Run's first leave; stopped when it ends
	err      error       // the timer's save failed: the connection ends once Run's goroutine is back
	panicked bool        // the timer's save panicked with panicVal: raised once Run's goroutine is back
	panicVal any
}

// The states of a quietSave: Run's goroutine holds the committer (home),
// waits and lets the timer take it (away), or the timer saves (saving).
// Only Run's goroutine moves home to away and away to home; only the timer
// moves away to saving and saving to away.
const (
	home int32 = iota
	away
	saving
)

// leave hands the committer to the interval timer while Run's goroutine
// waits in Recv, setting the timer for when the interval will have passed
// since the last save. The caller checked r.interval > 0 and unsaved > 0.
//
// A timer that fires while Run's goroutine is home disarms and leaves; one
// that fires between the look at armed and the store of away would leave
// nobody to save: so armed is looked at again once away, and when the
// timer disarmed meanwhile, Run's goroutine takes the committer back (unless
// the timer is saving) and sets it again.
func (r *supervisor[T, C]) leave(ctx context.Context) bool {
	q := &r.quiet
	if r.saveFailed { // no save is due on this connection: nothing to set
		q.st.Store(away)
		return true
	}
	for {
		if !r.armed.Load() {
			r.armed.Store(true)
			d := r.interval - time.Since(r.lastSave)
			if q.timer == nil {
				q.timer = time.AfterFunc(d, func() { r.saveQuiet(ctx) })
			} else {
				q.timer.Reset(d)
			}
		}
		q.st.Store(away) // the timer may take the committer from here on
		if r.armed.Load() || !q.st.CompareAndSwap(away, home) {
			return true // a timer is set, or it is saving now
		}
	}
}

// back takes the committer back when Recv returned: it waits for a save the
// timer is making, and returns that save's error, or raises its panic.
func (r *supervisor[T, C]) back() error {
	q := &r.quiet
	r.comeHome()
	err, panicked, v := q.err, q.panicked, q.panicVal
	q.err, q.panicked, q.panicVal = nil, false, nil
	if panicked {
		panic(v)
	}
	return err
}

// comeHome takes the committer back from the timer, waiting for a save it
// is making.
func (r *supervisor[T, C]) comeHome() {
	q := &r.quiet
	for {
		switch q.st.Load() {
		case home:
			return
		case away:
			if q.st.CompareAndSwap(away, home) {
				return
			}
		default: // saving: its end sends a token (an older one only loops)
			<-q.saved
		}
	}
}

// saveQuiet is the timer: while Run's goroutine is away, it saves the
// commits the Store lags behind once the interval has passed since the
// last save (a save Run's goroutine made meanwhile sets it again).
func (r *supervisor[T, C]) saveQuiet(ctx context.Context) {
	q := &r.quiet
	r.armed.Store(false)
	if !q.st.CompareAndSwap(away, saving) {
		return // Run's goroutine is home: it sets the timer at its next leave
	}
	defer func() {
		q.st.Store(away)
		select {
		case q.saved <- struct{}{}:
		default:
		}
	}()
	if r.unsaved == 0 || r.saveFailed || ctx.Err() != nil {
		return
	}
	if d := r.interval - time.Since(r.lastSave); d > 0 {
		r.armed.Store(true)
		q.timer.Reset(d)
		return
	}
	defer func() {
		if v := recover(); v != nil {
			q.panicked, q.panicVal = true, v
			r.guard.drop() // Run's goroutine comes back to raise it
		}
	}()
	if err := r.save(ctx, false); err != nil && ctx.Err() == nil {
		q.err = err
		r.guard.drop() // the connection ends: a save failure, classified as any
	}
}

// stopQuiet stops the interval timer when a Run ends; a save it is making
// finishes first.
func (r *supervisor[T, C]) stopQuiet() {
	q := &r.quiet
	r.comeHome()
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	r.armed.Store(false)
	q.err, q.panicked, q.panicVal = nil, false, nil
	select {
	case <-q.saved:
	default:
	}
}
