package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/errwalk"
	"github.com/resumable-go/resumable/internal/wait"
)

// emptyEndFallback is the wait after an empty clean end when the backoff
// policy has never given a positive step.
const emptyEndFallback = time.Second

// ending is how one try ended.
type ending uint8

const (
	failed     ending = iota // a failure, for the classifier
	saveFailed               // saving the Store failed: classified, not saved again
	cleanEnd                 // io.EOF from Recv: no failure
	finalEnd                 // Run returns err as it is (nil: the stream ended, or ErrStop)
	resynced                 // a resync succeeded; err is the expiry it followed
)

// outcome is how one try ended — loading the Store, opening and draining a
// connection, or a resync — with the facts the verdict needs.
type outcome struct {
	end      ending
	err      error
	opened   bool // Open succeeded
	moved    bool // the connection moved the stream: the cursor the next Open asks for differs from the one before
	commits  int  // cursors the connection committed
	read     int  // events the connection read into the window (WithConcurrency)
	noResync bool // the Load or a resync failed: an Expired verdict cannot resync
}

// final returns o ended for good with err.
func (o outcome) final(err error) outcome {
	o.end, o.err = finalEnd, err
	return o
}

// verdict is what the loop does next.
type verdict struct {
	stop   bool          // Run returns err
	resync bool          // resync with err as the cause, then decide again
	err    error         // what Run returns, or the resync's cause
	delay  time.Duration // the wait before the next Open
}

// eventKind is what the loop does with an event.
type eventKind uint8

const (
	handled   eventKind = iota // handed to the handler, then committed
	progress                   // committed without the handler
	skipped                    // a repeat (WithSkipRepeats): neither
	replayed                   // a resync's: handled, no cursor of its own
	parked                     // handed to the dead letter, then committed
	resyncEnd                  // the cursor a resync returned
)

// handler is Run's event handler.
type handler[T any] func(ctx context.Context, event T) error

// begin resets what a run does not inherit from the previous one.
func (r *supervisor[T, C]) begin() {
	r.st.attempt, r.st.lastTry, r.st.largest = 0, time.Time{}, 0
	r.st.resetSteps()
	r.guard.reset()
	r.mu.Lock()
	r.stats.FinalSaveError = nil
	r.mu.Unlock()
}

// cur returns the committed cursor. With one handler only the loop's
// goroutine writes it (under r.mu, for Stats), so the loop reads it
// without the lock; under WithConcurrency the committer writes it.
func (r *supervisor[T, C]) cur() C {
	if r.pipe.Load() == nil {
		return r.stats.Cursor
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.Cursor
}

// guarded runs the loop with its helpers: the context watcher, the idle
// watchdog and, under WithConcurrency, the pipeline; each has ended when
// it returns.
func (r *supervisor[T, C]) guarded(ctx context.Context, handle handler[T]) outcome {
	defer r.guard.rethrow() // a Close that panicked on the watcher's or watchdog's goroutine
	defer r.guard.wait()
	if r.handlers > 1 {
		return r.piped(ctx, handle)
	}
	if !r.noWatch {
		defer r.guard.watch(ctx)()
	}
	return r.settle(ctx, r.loop(ctx, handle))
}

// piped is guarded's loop under WithConcurrency, with the pipeline
// running beside it. It is its own frame: guarded's sits on the stack of
// every idle stream.
//
//go:noinline
func (r *supervisor[T, C]) piped(ctx context.Context, handle handler[T]) outcome {
	p := r.startPipeline(ctx, handle)
	r.pipe.Store(p)
	defer r.pipe.Store(nil)
	defer p.stop()
	defer r.guard.watch(p.opens)() // ctx's end, or the pipeline's stop, closes the Conn
	return r.settle(ctx, r.loop(ctx, handle))
}

// blocking is the context of the supervisor's blocking calls: ctx, or
// under WithConcurrency ctx also cancelled once the pipeline stops.
func (r *supervisor[T, C]) blocking(ctx context.Context) context.Context {
	if p := r.pipe.Load(); p != nil {
		return p.opens
	}
	return ctx
}

// saveFailedBehind reports whether the pipeline's committer failed to
// save: the connection it ended is a save failure, decided once settled.
func (r *supervisor[T, C]) saveFailedBehind() bool {
	p := r.pipe.Load()
	return p != nil && p.ending().saveErr != nil
}

// pipeStopped reports whether the pipeline stopped reading (a handler's
// failure, panic or stop): the try ends, and settle says how.
func (r *supervisor[T, C]) pipeStopped() bool {
	p := r.pipe.Load()
	return p != nil && p.stopped()
}

// loop is the one loop: load, open and drain a connection (connect); then
// decide what its end means (between) — return, or open again.
func (r *supervisor[T, C]) loop(ctx context.Context, handle handler[T]) outcome {
	for {
		if o, done := r.between(ctx, handle, r.connect(ctx, handle)); done {
			return o
		}
	}
}

// between decides what a connection's end o means: done (Run returns o),
// or resync and wait before the next open. It is a frame of its own, so
// that loop's, on the stack of every idle stream, stays small.
//
//go:noinline
func (r *supervisor[T, C]) between(ctx context.Context, handle handler[T], o outcome) (_ outcome, done bool) {
	if o.end != cleanEnd || ctx.Err() != nil || r.saveFailing.Load() || r.saveFailedBehind() {
		o = r.settle(ctx, o) // a clean end alone leaves events in flight, to open on meanwhile
	}
	if o = r.saveBehind(ctx, o); o.end == finalEnd {
		return o, true
	}
	if ctx.Err() != nil { // shutdown is no failure: nothing to count or hook
		return o.final(ctx.Err()), true
	}
	v := r.decide(o)
	if v.resync {
		if o = r.saveBehind(ctx, r.resyncAfter(ctx, handle, v.err)); o.end == finalEnd {
			return o, true
		}
		if ctx.Err() != nil {
			return o.final(ctx.Err()), true
		}
		v = r.decide(o)
	}
	if v.stop {
		o.err = v.err
		return o, true
	}
	if v.delay > 0 { // no events wait uncommitted through a delay
		if o = r.settle(ctx, o); o.end == finalEnd {
			return o, true
		}
	}
	if err := wait.Sleep(ctx, v.delay); err != nil {
		return o.final(err), true
	}
	return o, false
}

// endOf classifies the error that ended a try: the end of the stream and
// ErrStop end Run cleanly, ctx's end ends it with ctx's error, a stopped
// pipeline ends it as the pipeline says (settle); anything else is a
// failure.
func (r *supervisor[T, C]) endOf(ctx context.Context, o outcome, err error) outcome {
	switch {
	case ctx.Err() != nil:
		return o.final(ctx.Err())
	case r.pipeStopped():
		return o.final(nil)
	case errwalk.Is(err, ErrEndOfStream):
		return o.final(nil)
	case errwalk.Is(err, ErrStop): // only a handler's ErrStop commits; from a Source it just stops
		return o.final(nil)
	}
	o.end, o.err = failed, err
	return o
}

// connect loads the Store if needed, waits on the open limiter, opens a
// connection after the committed cursor and drains it.
func (r *supervisor[T, C]) connect(ctx context.Context, handle handler[T]) outcome {
	conn, after, o := r.open(ctx)
	if conn == nil {
		return o
	}
	o = r.drain(ctx, conn, handle)
	o.moved = r.movedFrom(after, o.commits+o.read)
	return o
}

// open is connect up to a Conn opened after the cursor after; a nil Conn
// comes with the outcome that ended the try. It is a frame of its own, so
// that connect's, on the stack of every idle stream, stays small.
//
//go:noinline
func (r *supervisor[T, C]) open(ctx context.Context) (_ Conn[T], after C, _ outcome) {
	if !r.st.loaded {
		if o := r.load(ctx); o.end != cleanEnd {
			return nil, after, o
		}
	}
	r.st.lastTry = time.Now() // a try starts here: a failed limiter wait obeys the delay rule too
	bctx := r.blocking(ctx)
	if r.limiter != nil {
		if err := r.limiter.Wait(bctx); err != nil {
			return nil, after, r.endOf(ctx, outcome{}, fmt.Errorf("stream: waiting on the open limiter: %w", err))
		}
	}
	after = r.resumeAt()
	r.newConnection()
	conn, err := r.src.Open(bctx, after)
	switch {
	case err == nil && isNil(conn):
		err = errNilConn
	case err != nil && !isNil(conn):
		_ = conn.Close() // an Open that failed must not leak what it opened
	}
	if err != nil {
		return nil, after, r.endOf(ctx, outcome{}, err)
	}
	r.mu.Lock()
	r.stats.Opens++
	r.mu.Unlock()
	r.debug("stream opened", nil)
	if r.hooks.OnConnect != nil {
		r.callHook(func() { r.hooks.OnConnect(ConnectEvent[C]{After: after, Attempt: r.st.attempt}) })
	}
	return conn, after, outcome{}
}

// movedFrom reports whether the connection moved the stream from before,
// after it committed or read n events: whether the cursor the next Open
// asks for differs, compared once per connection by the cursor order or by
// == when C has one; a connection that committed or read anything counts
// as moved when cursors cannot be compared.
func (r *supervisor[T, C]) movedFrom(before C, n int) bool {
	switch {
	case n == 0:
		return false
	case r.order != nil:
		return r.order(r.resumeAt(), before) != 0
	case r.equal != nil:
		return !r.equal(r.resumeAt(), before)
	}
	return true
}

// load reads the cursor to start after from the Store. Its outcome is a
// cleanEnd when the loop may go on.
func (r *supervisor[T, C]) load(ctx context.Context) outcome {
	c, err := r.store.Load(ctx)
	if err != nil {
		// No cursor to resync from: the Store itself is the problem.
		return r.endOf(ctx, outcome{noResync: true}, fmt.Errorf("stream: loading the cursor from the Store: %w", err))
	}
	r.st.loaded = true
	if r.interval > 0 {
		r.lastSave = time.Now()
	}
	r.mu.Lock()
	r.stats.Cursor = c
	r.mu.Unlock()
	return outcome{end: cleanEnd}
}

// saveBehind saves the Store after a try when it lags behind the committed
// cursor (a connection's end is a good moment); a failed save turns a clean
// end into a failure. Final outcomes are left to the final save. Under
// WithConcurrency, while events read before a clean end still run, the
// committer saves once they are committed.
func (r *supervisor[T, C]) saveBehind(ctx context.Context, o outcome) outcome {
	if o.end == finalEnd || o.end == saveFailed {
		return o
	}
	if ctx.Err() != nil {
		return o.final(ctx.Err())
	}
	if p := r.pipe.Load(); p != nil {
		if _, ok := p.lastRead(); ok {
			p.endConn()
			return o
		}
	}
	// A failed try keeps its own error (an expiry still resyncs); the
	// Store is saved again at the next checkpoint, or when Run returns.
	if err := r.saveNow(ctx); err != nil && ctx.Err() == nil && (o.end == cleanEnd || o.end == resynced) {
		o.end, o.err, o.noResync = saveFailed, err, true
	}
	return o
}

// drain reads one connection until it ends, and closes the Conn, even when
// a panic ends it.
func (r *supervisor[T, C]) drain(ctx context.Context, conn Conn[T], handle handler[T]) (o outcome) {
	if !r.guard.set(conn) {
		_ = conn.Close()
		return outcome{end: finalEnd, err: ctx.Err()}
	}
	defer func() {
		fired, seen := r.guard.release()
		_ = conn.Close()
		r.guard.rethrow()
		if fired && (o.end == failed || o.end == cleanEnd) {
			o = r.idleEnd(o, seen)
		}
	}()
	switch p := r.pipe.Load(); {
	case p != nil:
		return r.readPipe(ctx, conn, p)
	case r.bat != nil:
		return r.readBatch(ctx, conn, r.bat)
	}
	return r.read(ctx, conn, handle)
}

// read is drain's loop with one handler: each event's step runs inline.
// It is the per-event path.
func (r *supervisor[T, C]) read(ctx context.Context, conn Conn[T], handle handler[T]) outcome {
	o := outcome{opened: true}
	for {
		if err := ctx.Err(); err != nil {
			return o.final(err)
		}
		away := r.interval > 0 && r.unsaved > 0 && r.leave(ctx) // a quiet stream is saved meanwhile
		ev, err := conn.Recv(ctx)
		if away {
			if err := r.back(); err != nil {
				return r.saveEnded(ctx, o, err)
			}
		}
		if err != nil {
			return r.connEnded(ctx, o, err)
		}
		c, err := r.extract(ev) // take, its common case spelled out: generic calls do not inline
		kind, moves := handled, true
		if err != nil || r.order != nil {
			if kind, moves, err = r.judge(c, err, r.cur()); err != nil {
				return o.final(err)
			}
		}
		a := finished
		switch kind {
		case skipped:
			r.skip()
			continue
		case handled:
			r.guard.wd.handling(true)
			if err = handle(ctx, ev); err != nil { // the step's first try; the rest is inline's
				kind, a, err = r.retried(ctx, handle, failedFirst(ev, c, err))
			}
			r.guard.wd.handling(false)
			if a == fail {
				return o.final(err)
			}
		}
		err = r.commit(ctx, c, kind, moves)
		o.commits++
		switch {
		case a == stop:
			r.debug("handler asked to stop", nil)
			return o.final(nil)
		case err != nil:
			return r.saveEnded(ctx, o, err)
		}
	}
}

// failedFirst returns the slot of ev (cursor c) whose first try failed
// with err, for the retries. It is its own frame, on the heap: read sits on
// the stack of every idle stream, and a slot is only wanted after a failure.
//
//go:noinline
func failedFirst[T, C any](ev T, c C, err error) *slot[T, C] {
	return &slot[T, C]{ev: ev, c: c, tries: 1, started: true, err: err}
}

// saveEnded is the outcome of a connection whose commit failed to save
// with err: a failure to classify, or, when ctx ended, the end of Run.
func (r *supervisor[T, C]) saveEnded(ctx context.Context, o outcome, err error) outcome {
	if ctx.Err() != nil {
		return o.final(ctx.Err())
	}
	o.end, o.err = saveFailed, err
	return o
}

// connEnded is the outcome of a connection whose Recv returned err: only
// io.EOF from Recv is a clean end.
func (r *supervisor[T, C]) connEnded(ctx context.Context, o outcome, err error) outcome {
	if errwalk.Is(err, io.EOF) && ctx.Err() == nil && !errwalk.Is(err, ErrEndOfStream) {
		o.end, o.err = cleanEnd, err
		return o
	}
	return r.endOf(ctx, o, err)
}

// judge says what to do with an event whose cursor c the extractor returned
// with err, given the cursor before it, and whether committing it changes
// the cursor: an event handed over does unless the cursor order says it
// repeats the one before; a progress-only event does unless its cursor is
// known to repeat it (by the order, or by == when C has one). An extractor
// failure or a cursor that goes back ends Run.
func (r *supervisor[T, C]) judge(c C, err error, before C) (kind eventKind, moves bool, _ error) {
	kind, moves = handled, true
	if err != nil {
		if !errwalk.Is(err, cursor.ProgressOnly) {
			return kind, false, fmt.Errorf("%w: %w", errExtract, err)
		}
		kind = progress
	}
	switch {
	case r.order != nil:
		n := r.order(c, before)
		if n < 0 {
			return kind, false, fmt.Errorf("%w: event cursor %s is before committed cursor %s", ErrCursorRegressed, text(c), text(before))
		}
		moves = n > 0
		if !moves && r.skipRepeats && kind == handled {
			kind = skipped
		}
	case kind == progress && r.equal != nil: // a heartbeat may repeat the cursor
		moves = !r.equal(c, before)
	}
	return kind, moves, nil
}

// skip counts an event skipped as a repeat.
func (r *supervisor[T, C]) skip() {
	r.mu.Lock()
	r.stats.Skipped++
	r.mu.Unlock()
}

// idleEnd is the outcome of a connection the idle watchdog closed, when it
// had seen activity seen: the watchdog adds its reason to the connection's
// own error (whose marks, a server's delay among them, survive). The end is
// clean when there was activity after the watchdog's last look (the handler
// held an event all along), a failure otherwise.
func (r *supervisor[T, C]) idleEnd(o outcome, seen uint64) outcome {
	o.err = &idleError{idle: r.guard.wd.idle, err: o.err}
	o.end = failed
	if r.guard.activeSince(seen, r.pipe.Load() == nil) {
		o.end = cleanEnd
	}
	return o
}

// idleError is the failure of a connection the idle watchdog closed: it
// matches ErrIdleTimeout and keeps the connection's own error reachable.
type idleError struct {
	idle time.Duration
	err  error
}

func (e *idleError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("%v (%v)", ErrIdleTimeout, e.idle)
	}
	return fmt.Sprintf("%v (%v): %v", ErrIdleTimeout, e.idle, e.err)
}

func (e *idleError) Unwrap() []error { return []error{ErrIdleTimeout, e.err} }

// decide turns an outcome that is not final into a verdict — return,
// resync, or wait and reopen — and reports it. It is the one decision
// after a try, with one backoff sequence: failures, resyncs and clean ends
// that moved nothing take its steps; a connection that moved the stream,
// and the first failure of a streak, start it over (so clean ends never
// spend the failure budget).
func (r *supervisor[T, C]) decide(o outcome) verdict {
	// Progress the Store does not hold is none: while saves fail, the
	// budget runs on.
	healthy := !r.saveFailing.Load()
	moved := o.moved && o.end != saveFailed && healthy
	if moved {
		r.st.attempt = 0
	}
	if moved || (r.st.attempt == 0 && (o.end == failed || o.end == saveFailed)) {
		r.st.resetSteps()
	}
	d := errclass.Decision{Action: errclass.Expired} // after a resync
	clean := o.end == cleanEnd
	switch {
	case clean: // it may carry the server's delay (SSE retry:) as RetryAfter(io.EOF, d)
		d = errclass.Decision{Action: errclass.Retry, After: max(errclass.Markers().Classify(o.err).After, 0)}
		if healthy { // a clean end ends a streak of failures, unless saves fail on
			r.st.attempt = 0
		}
	case o.end != resynced:
		d = r.classify(o.err)
		r.st.attempt++
	}
	if o.end != resynced {
		r.report(o, d)
	}
	switch {
	case clean && o.moved:
		return r.schedule(o.err, d, 0, delayNone)
	case clean && r.poll > 0:
		return r.schedule(o.err, d, r.poll, delayPoll)
	case clean:
		return r.schedule(o.err, d, r.guardStep(), delayPoll)
	case d.Action == errclass.Fail:
		r.warn("stream failed", o.err)
		return verdict{stop: true, err: o.err}
	case d.Action == errclass.Expired && o.end != resynced:
		return r.expired(o)
	}
	step, ok := r.st.next(r.policy)
	if !ok {
		err := fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, r.st.attempt, o.err)
		r.warn("giving up", err)
		return verdict{stop: true, err: err}
	}
	return r.schedule(o.err, d, step, delayBackoff)
}

// report counts the end of a try by its decision d and calls OnDisconnect.
func (r *supervisor[T, C]) report(o outcome, d errclass.Decision) {
	clean := o.end == cleanEnd
	r.mu.Lock()
	switch {
	case clean:
		r.stats.CleanEnds++
	case d.Action == errclass.Fail:
		r.stats.Failed++
	case d.Action == errclass.Expired:
		r.stats.Expired++
	default:
		r.stats.Retried++
	}
	if !clean {
		r.stats.LastError = o.err
	}
	r.mu.Unlock()
	if r.hooks.OnDisconnect != nil {
		e := DisconnectEvent[C]{Err: o.err, Decision: d, Clean: clean, Opened: o.opened, Events: o.commits, Cursor: r.cur()}
		r.callHook(func() { r.hooks.OnDisconnect(e) })
	}
}

// guardStep returns the wait after a clean end that moved nothing, without
// a poll interval: what is left of one backoff step since the try started.
// A connection that lived longer than the step (a quiet stream the server
// ended on schedule) waits nothing and starts the sequence over. Once the
// policy has given up, its largest step (or emptyEndFallback) is used: a
// clean end never ends the stream, and never spins.
func (r *supervisor[T, C]) guardStep() time.Duration {
	step, ok := r.st.next(r.policy)
	switch {
	case ok: // a zero step (backoff.Constant(0)) is the policy's choice: no wait
	case r.st.largest > 0:
		step = r.st.largest
	default:
		step = emptyEndFallback
	}
	lived := time.Since(r.st.lastTry)
	if lived >= step {
		r.st.resetSteps()
		return 0
	}
	return step - lived
}

// expired decides after a failure classified Expired: resync, or return the
// failure marked expired.
func (r *supervisor[T, C]) expired(o outcome) verdict {
	err := o.err
	if !errwalk.Is(err, errclass.ErrExpired) {
		err = errclass.CursorExpired(err)
	}
	switch {
	case o.noResync:
		r.warn("cursor expired; no resync possible here", err)
		return verdict{stop: true, err: err}
	case r.resync == nil:
		err = fmt.Errorf("stream: cursor %s cannot be resumed and no resync hook is set: %w", text(r.cur()), err)
		r.warn("cursor expired", err)
		return verdict{stop: true, err: err}
	}
	return verdict{resync: true, err: err}
}

// schedule returns the verdict to reopen after the delay rule:
// max(step, the server's After (capped), the minimum restart delay less the
// time since the last try started).
func (r *supervisor[T, C]) schedule(err error, d errclass.Decision, step time.Duration, reason string) verdict {
	delay := step
	if step <= 0 {
		delay, reason = 0, delayNone
	}
	if after := r.capServer(d.After); after > delay {
		delay, reason = after, delayServer
	}
	if r.minRestart > 0 && !r.st.lastTry.IsZero() {
		if w := r.minRestart - time.Since(r.st.lastTry); w > delay {
			delay, reason = w, delayMinRestart
		}
	}
	if r.hooks.OnRetry != nil {
		e := RetryEvent[C]{Err: err, Decision: d, Delay: delay, Reason: reason, Attempt: r.st.attempt, After: r.resumeAt()}
		r.callHook(func() { r.hooks.OnRetry(e) })
	}
	lvl, msg := zapcore.InfoLevel, "stream failed; retrying"
	if r.st.attempt == 0 { // a clean end is never a failure
		lvl, msg = zapcore.DebugLevel, "connection ended; reopening"
	}
	if ce := r.log.Check(lvl, msg); ce != nil {
		ce.Write(zap.Int("attempt", r.st.attempt), zap.Any("cursor", r.cur()), zap.Duration("delay", delay),
			zap.String("reason", reason), zap.Stringer("decision", d), zap.Error(err))
	}
	return verdict{delay: delay}
}

// capServer caps a server's requested delay (WithMaxServerDelay).
func (r *supervisor[T, C]) capServer(after time.Duration) time.Duration {
	if r.maxServer > 0 && after > r.maxServer {
		return r.maxServer
	}
	return max(after, 0)
}

// resyncAfter calls the resync hook after cause showed the cursor cannot be
// resumed, streams its replay through the step, and commits the cursor it
// returns. emit refuses once the hook returned.
func (r *supervisor[T, C]) resyncAfter(ctx context.Context, handle handler[T], cause error) outcome {
	from := r.cur()
	rp := &replay[T, C]{r: r, ctx: ctx, handle: handle, p: r.pipe.Load()}
	after, err := r.resync(r.blocking(ctx), cause, rp.emit)
	rp.over.Store(true)
	herr := rp.finish(err == nil)
	switch {
	case ctx.Err() != nil:
		return outcome{end: finalEnd, err: ctx.Err()}
	case errwalk.Is(herr, ErrStop):
		return outcome{end: finalEnd} // no cursor to commit mid-replay
	case herr != nil:
		return outcome{end: finalEnd, err: herr}
	case errwalk.Is(err, ErrStop):
		return outcome{end: finalEnd}
	case err != nil:
		// Expired again is no reason to resync twice in a row.
		return outcome{end: failed, err: fmt.Errorf("stream: resync after expired cursor %s: %w", text(from), err), noResync: true}
	}
	serr := r.commitVia(ctx, after, resyncEnd)
	if errors.Is(serr, errCommitterPanicked) {
		return outcome{end: finalEnd} // settle raises the Store's panic; the resync did not complete
	}
	r.mu.Lock()
	r.stats.Events += uint64(rp.n) // a completed replay's, committed with its cursor
	r.stats.Parked += uint64(rp.parked)
	r.mu.Unlock()
	if r.hooks.OnResync != nil {
		r.callHook(func() { r.hooks.OnResync(ResyncEvent[C]{Cause: cause, From: from, To: after, Replayed: rp.n}) })
	}
	if ce := r.log.Check(zapcore.InfoLevel, "resynced after an expired cursor"); ce != nil {
		ce.Write(zap.Any("from", from), zap.Any("to", after), zap.Int("replayed", rp.n), zap.Error(cause))
	}
	if serr != nil {
		return r.saveEnded(ctx, outcome{}, serr)
	}
	return outcome{end: resynced, err: cause}
}

// errEmitAfterResync is what emit returns when called after its ResyncFunc
// returned.
var errEmitAfterResync = errors.New("stream: emit called after its ResyncFunc returned")

// replay is one resync's emit: it hands each event to the step (inline, or
// through the pipeline under WithConcurrency) and remembers the first
// handler error, which ends Run.
type replay[T, C any] struct {
	r      *supervisor[T, C]
	ctx    context.Context // the resync's; a replay lives only as long as the call
	handle handler[T]
	p      *pipeline[T, C] // nil: one handler
	over   atomic.Bool     // the ResyncFunc returned
	n      int             // events handled
	parked int             // of which parked
	herr   error
}

func (p *replay[T, C]) emit(ev T) error {
	switch {
	case p.over.Load():
		return errEmitAfterResync
	case p.herr != nil:
		return p.herr
	}
	if err := p.ctx.Err(); err != nil {
		return err
	}
	if p.p != nil {
		p.herr = p.r.replayed(p.ctx, p.p, ev)
		return p.herr
	}
	var zero C
	if b := p.r.bat; b != nil {
		b.add(ev, zero, replayed, false)
		if len(b.events) < cap(b.events) {
			return nil
		}
		return p.flush()
	}
	kind, a, err := p.r.inline(p.ctx, p.handle, ev, zero)
	switch {
	case a == stop:
		p.herr = ErrStop
	case a == fail:
		p.herr = err
	default:
		p.n++
		if kind == parked {
			p.parked++
		}
	}
	return p.herr
}

// flush hands the replay's batch to the step (RunBatch).
func (p *replay[T, C]) flush() error {
	n := len(p.r.bat.events)
	switch a, err := p.r.flush(p.ctx, p.r.bat, replayed); a {
	case stop:
		p.herr = ErrStop
	case fail:
		p.herr = err
	default:
		p.n += n
	}
	return p.herr
}

// finish hands over what the replay still holds (a batch, or events in the
// window) and returns the first handler error. A batch of a replay whose
// hook failed (ok false) is dropped: the replay comes again.
func (p *replay[T, C]) finish(ok bool) error {
	if b := p.r.bat; b != nil && b.n > 0 {
		if !ok || p.herr != nil {
			b.reset()
			return p.herr
		}
		return p.flush()
	}
	if p.p == nil {
		return p.herr
	}
	if p.herr == nil {
		p.herr = p.r.settleReplay(p.ctx, p.p)
	}
	p.n, p.parked = p.p.takeReplayed()
	return p.herr
}

// classify asks the user's classifier, falling back to the default.
func (r *supervisor[T, C]) classify(err error) errclass.Decision {
	var d errclass.Decision
	if r.classifier != nil {
		d = r.classifier.Classify(err)
	}
	if d.Action == errclass.Unknown || d.Action > errclass.Expired {
		d = errclass.Default().Classify(err)
	}
	if d.After < 0 {
		d.After = 0
	}
	return d
}

// text formats a cursor for a message: quoted when it is a string, so that
// an empty one shows.
func text(c any) string {
	if s, ok := c.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(c)
}

func (r *supervisor[T, C]) debug(msg string, err error) {
	if r.log.Core().Enabled(zapcore.DebugLevel) {
		r.debugWrite(msg, err)
	}
}

// debugWrite writes debug's entry. It is a frame of its own, and the
// level is checked before it: a logger's Check takes more stack than every
// idle stream should keep.
//
//go:noinline
func (r *supervisor[T, C]) debugWrite(msg string, err error) {
	if ce := r.log.Check(zapcore.DebugLevel, msg); ce != nil {
		ce.Write(zap.Int("attempt", r.st.attempt), zap.Any("cursor", r.cur()), zap.Error(err))
	}
}

func (r *supervisor[T, C]) warn(msg string, err error) {
	if ce := r.log.Check(zapcore.WarnLevel, msg); ce != nil {
		ce.Write(zap.Any("cursor", r.cur()), zap.Error(err))
	}
}
