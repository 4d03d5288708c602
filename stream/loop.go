package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// guardFallback is the guard step after an empty clean end when the backoff
// policy has never given a positive step.
const guardFallback = time.Second

// outcome is how one try ended: loading the Store, opening and draining a
// connection, or a resync.
type outcome struct {
	err      error // what ended it; for a resync that succeeded, its cause
	final    bool  // Run returns err as it is (nil: the stream ended, or ErrStop)
	clean    bool  // no failure: io.EOF from Recv, or an idle close during the handler
	opened   bool  // Open succeeded
	events   int   // cursors the connection committed
	noResync bool  // an Expired verdict cannot resync: the Load or a resync failed
	resynced bool  // a resync succeeded; err is the expiry it followed
	saveErr  bool  // err came from saving the Store
}

// verdict is what the loop does next.
type verdict struct {
	stop   bool          // Run returns err
	resync bool          // resync with err as the cause, then decide again
	err    error         // what Run returns, or the resync's cause
	delay  time.Duration // the wait before the next Open
}

// begin resets what a run does not inherit from the previous one.
func (r *Resumer[T, C]) begin() {
	r.st.attempt, r.st.lastOpen, r.st.lastStep = 0, time.Time{}, 0
	r.st.resetSequences()
	r.guard.reset()
	r.mu.Lock()
	r.stats.FinalSaveError = nil
	r.mu.Unlock()
}

// connect loads the Store if needed, waits on the open limiter, opens a
// connection after the committed cursor and drains it.
func (r *Resumer[T, C]) connect(ctx context.Context, handle func(context.Context, T) error) outcome {
	if !r.st.loaded {
		if o := r.load(ctx); o.final || o.err != nil {
			return o
		}
	}
	if r.limiter != nil {
		if err := r.limiter.Wait(ctx); err != nil {
			return r.ended(ctx, outcome{err: fmt.Errorf("stream: waiting on the open limiter: %w", err)})
		}
	}
	r.st.lastOpen = time.Now() // once per Open: the minimum restart delay and the guard need it
	after := r.st.cur
	conn, err := r.src.Open(ctx, after)
	switch {
	case err == nil && isNil(conn):
		err = ErrNilConn
	case err != nil && !isNil(conn):
		_ = conn.Close() // an Open that failed must not leak what it opened
	}
	if err != nil {
		return r.ended(ctx, outcome{err: err})
	}
	r.mu.Lock()
	r.stats.Opens++
	r.mu.Unlock()
	r.debug("stream opened", nil)
	if r.hooks.OnConnect != nil {
		r.hooks.OnConnect(ConnectEvent[C]{After: after, Attempt: r.st.attempt})
	}
	return r.ended(ctx, r.drain(ctx, conn, handle))
}

// load reads the cursor to start after from the Store.
func (r *Resumer[T, C]) load(ctx context.Context) outcome {
	c, err := r.store.Load(ctx)
	if err != nil {
		// No cursor to resync from: the Store itself is the problem.
		return r.ended(ctx, outcome{err: fmt.Errorf("stream: loading the cursor from the Store: %w", err), noResync: true})
	}
	r.st.loaded, r.st.cur = true, c
	if r.interval > 0 {
		r.st.lastSave = time.Now()
	}
	r.mu.Lock()
	r.stats.Cursor = c
	r.mu.Unlock()
	return outcome{}
}

// ended finishes an outcome: the end of ctx and of the stream are final,
// and a lagging Store is saved (a connection's end is a good moment).
func (r *Resumer[T, C]) ended(ctx context.Context, o outcome) outcome {
	switch {
	case o.final:
		return o
	case ctx.Err() != nil:
		return outcome{final: true, err: ctx.Err()}
	case errors.Is(o.err, ErrEndOfStream):
		r.debug("stream ended for good", o.err)
		return outcome{final: true}
	case o.saveErr:
		return o
	}
	if err := r.checkpoint(ctx, false); err != nil {
		if o.clean {
			o.clean, o.err = false, err
		} else {
			o.err = errors.Join(o.err, err)
		}
		o.saveErr = true
	}
	return o
}

// drain reads one connection until it ends, handing each event to handle
// and committing its cursor. The Conn is closed when drain returns, even by
// a panic.
func (r *Resumer[T, C]) drain(ctx context.Context, conn Conn[T], handle func(context.Context, T) error) (o outcome) {
	if !r.guard.set(conn) {
		_ = conn.Close()
		return outcome{final: true, err: ctx.Err()}
	}
	defer func() {
		fired, seen := r.guard.release()
		_ = conn.Close()
		if fired && !o.final {
			o = r.idleEnd(o, seen)
		}
	}()
	return r.read(ctx, conn, handle)
}

// read is drain's loop: the per-event path.
func (r *Resumer[T, C]) read(ctx context.Context, conn Conn[T], handle func(context.Context, T) error) outcome {
	o := outcome{opened: true}
	for {
		if err := ctx.Err(); err != nil {
			o.err = err
			return o
		}
		ev, err := conn.Recv(ctx)
		if err != nil {
			o.err, o.clean = err, errors.Is(err, io.EOF)
			return o
		}
		c, err := r.extract(ev)
		progress := false
		if err != nil {
			if !errors.Is(err, cursor.ProgressOnly) {
				return outcome{final: true, err: fmt.Errorf("%w: %w", ErrExtract, err)}
			}
			progress = true
		}
		if r.order != nil && r.order(c, r.st.cur) < 0 {
			return outcome{final: true, err: fmt.Errorf("%w: event cursor %v is before committed cursor %v", ErrCursorRegressed, c, r.st.cur)}
		}
		stop := false
		if !progress {
			if err := handle(ctx, ev); err != nil {
				if !errors.Is(err, ErrStop) {
					return outcome{final: true, err: err}
				}
				stop = true
			}
		}
		o.events++
		if err := r.commit(ctx, c, progress); err != nil && !stop {
			o.err, o.saveErr = err, true
			return o
		}
		if stop {
			r.debug("handler asked to stop", nil)
			return outcome{final: true}
		}
	}
}

// idleEnd is the outcome of a connection the idle watchdog closed, when it
// had seen seen commits: a failure matching ErrIdleTimeout, or no failure
// when a commit came after the watchdog's last look (the handler held an
// event all along).
func (r *Resumer[T, C]) idleEnd(o outcome, seen uint64) outcome {
	o.clean = r.committed() > seen
	o.err = fmt.Errorf("%w (%v)", ErrIdleTimeout, r.guard.wd.idle)
	return o
}

// decide turns an outcome that is not final into a verdict: a clean end
// reopens, a failure is classified, a resync is followed by a backoff step.
func (r *Resumer[T, C]) decide(o outcome) verdict {
	switch {
	case o.clean:
		return r.cleanEnd(o)
	case o.resynced:
		return r.backoff(o.err, errclass.Decision{Action: errclass.Expired})
	}
	return r.failure(o)
}

// cleanEnd decides after a connection that ended without a failure: no
// attempt is counted and the failure sequence starts over; a connection
// that delivered nothing waits the poll interval, or the guard.
func (r *Resumer[T, C]) cleanEnd(o outcome) verdict {
	// A clean end may carry the server's reconnection delay (SSE retry:),
	// as errclass.RetryAfter(io.EOF, d): a floor for the next wait.
	d := errclass.Decision{Action: errclass.Retry, After: max(errclass.Markers().Classify(o.err).After, 0)}
	r.mu.Lock()
	r.stats.CleanEnds++
	r.mu.Unlock()
	if r.hooks.OnDisconnect != nil {
		r.hooks.OnDisconnect(DisconnectEvent[C]{Err: o.err, Decision: d, Clean: true, Opened: o.opened, Events: o.events, Cursor: r.st.cur})
	}
	r.st.attempt = 0
	if o.events > 0 {
		r.st.resetSequences()
		return r.schedule(o.err, d, 0, DelayNone)
	}
	if r.st.failures != nil { // the guard's sequence goes on
		r.st.failures.Reset()
	}
	if r.poll > 0 {
		return r.schedule(o.err, d, r.poll, DelayPoll)
	}
	return r.schedule(o.err, d, r.guardStep(), DelayPoll)
}

// guardStep returns the wait after an empty clean end without a poll
// interval: what is left of one guard step since the Open started. A
// connection that lived longer than the step (a quiet stream the server
// ended on schedule) waits nothing and starts the guard over. Once the
// policy has given up, the guard keeps its largest step (or guardFallback):
// a clean end never ends the stream, and never spins.
func (r *Resumer[T, C]) guardStep() time.Duration {
	if r.st.guard == nil {
		r.st.guard = r.policy.NewSequence()
	}
	step, ok := r.st.guard.Next()
	switch {
	case ok: // a zero step (backoff.None) is the policy's choice: no wait
		r.st.lastStep = max(step, r.st.lastStep)
	case r.st.lastStep > 0:
		step = r.st.lastStep
	default:
		step = guardFallback
	}
	lived := time.Since(r.st.lastOpen)
	if lived >= step {
		r.st.guard.Reset()
		return 0
	}
	return step - lived
}

// failure classifies a failure, counts it, and says what follows: return
// it, resync, or wait a backoff step.
func (r *Resumer[T, C]) failure(o outcome) verdict {
	d := r.classify(o.err)
	if o.events > 0 { // the connection made progress: a new streak starts
		r.st.resetSequences()
		r.st.attempt = 0
	}
	r.st.attempt++
	r.mu.Lock()
	switch d.Action {
	case errclass.Fail:
		r.stats.Failed++
	case errclass.Expired:
		r.stats.Expired++
	default:
		r.stats.Retried++
	}
	r.stats.LastError = o.err
	r.mu.Unlock()
	if r.hooks.OnDisconnect != nil {
		r.hooks.OnDisconnect(DisconnectEvent[C]{Err: o.err, Decision: d, Opened: o.opened, Events: o.events, Cursor: r.st.cur})
	}
	switch d.Action {
	case errclass.Fail:
		r.warn("stream failed", o.err)
		return verdict{stop: true, err: o.err}
	case errclass.Expired:
		return r.expired(o)
	}
	return r.backoff(o.err, d)
}

// expired decides after a failure classified Expired: resync, or return the
// failure marked expired.
func (r *Resumer[T, C]) expired(o outcome) verdict {
	if r.hooks.OnExpired != nil {
		r.hooks.OnExpired(ExpiredEvent[C]{Err: o.err, Cursor: r.st.cur})
	}
	err := o.err
	if !errors.Is(err, errclass.ErrExpired) {
		err = errclass.CursorExpired(err)
	}
	switch {
	case o.noResync:
		r.warn("cursor expired; no resync possible here", err)
		return verdict{stop: true, err: err}
	case r.resync == nil:
		err = fmt.Errorf("stream: cursor %v expired and no resync hook is set: %w", r.st.cur, err)
		r.warn("cursor expired", err)
		return verdict{stop: true, err: err}
	}
	return verdict{resync: true, err: err}
}

// backoff takes the next step of the failure sequence and schedules the
// reopen, or gives up when the policy does.
func (r *Resumer[T, C]) backoff(err error, d errclass.Decision) verdict {
	if r.st.failures == nil {
		r.st.failures = r.policy.NewSequence()
	}
	step, ok := r.st.failures.Next()
	if !ok {
		err = fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, r.st.attempt, err)
		r.warn("giving up", err)
		return verdict{stop: true, err: err}
	}
	return r.schedule(err, d, step, DelayBackoff)
}

// schedule returns the verdict to reopen after the delay rule:
// max(step, the server's After (capped), the minimum restart delay less the
// time since the last Open started).
func (r *Resumer[T, C]) schedule(err error, d errclass.Decision, step time.Duration, reason DelayReason) verdict {
	delay := step
	if step <= 0 {
		delay, reason = 0, DelayNone
	}
	after := d.After
	if r.maxServer > 0 && after > r.maxServer {
		after = r.maxServer
	}
	if after > delay {
		delay, reason = after, DelayServer
	}
	if r.minRestart > 0 && !r.st.lastOpen.IsZero() {
		if w := r.minRestart - time.Since(r.st.lastOpen); w > delay {
			delay, reason = w, DelayMinRestart
		}
	}
	if r.hooks.OnRetry != nil {
		r.hooks.OnRetry(RetryEvent[C]{Err: err, Decision: d, Delay: delay, Reason: reason, Attempt: r.st.attempt, After: r.st.cur})
	}
	lvl, msg := zapcore.InfoLevel, "stream failed; retrying"
	if r.st.attempt == 0 { // a clean end is never a failure
		lvl, msg = zapcore.DebugLevel, "connection ended; reopening"
	}
	if ce := r.log.Check(lvl, msg); ce != nil {
		ce.Write(zap.Int("attempt", r.st.attempt), zap.Any("cursor", r.st.cur), zap.Duration("delay", delay),
			zap.Stringer("reason", reason), zap.Stringer("decision", d), zap.Error(err))
	}
	return verdict{delay: delay}
}

// resyncAfter calls the resync hook after cause showed the cursor expired,
// streams its replay to handle, and commits the cursor it returns.
func (r *Resumer[T, C]) resyncAfter(ctx context.Context, handle func(context.Context, T) error, cause error) outcome {
	from := r.st.cur
	replayed := 0
	var herr error // the handler's error, which ends Run
	emit := func(ev T) error {
		if herr != nil {
			return herr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := handle(ctx, ev); err != nil {
			herr = err
			return err
		}
		replayed++
		return nil
	}
	after, err := r.resync(ctx, cause, emit)
	r.mu.Lock()
	r.stats.Events += uint64(replayed)
	r.mu.Unlock()
	switch {
	case errors.Is(herr, ErrStop):
		return outcome{final: true} // no cursor to commit mid-replay
	case herr != nil:
		return outcome{final: true, err: herr}
	case ctx.Err() != nil:
		return outcome{final: true, err: ctx.Err()}
	case err != nil:
		// Expired again is no reason to resync twice in a row.
		return outcome{err: fmt.Errorf("stream: resync after expired cursor %v: %w", from, err), noResync: true}
	}
	r.st.cur = after
	r.st.unsaved++
	r.mu.Lock()
	r.stats.Cursor = after
	r.stats.Resyncs++
	r.mu.Unlock()
	if r.hooks.OnResync != nil {
		r.hooks.OnResync(ResyncEvent[C]{Cause: cause, From: from, To: after, Replayed: replayed})
	}
	if ce := r.log.Check(zapcore.InfoLevel, "resynced after an expired cursor"); ce != nil {
		ce.Write(zap.Any("from", from), zap.Any("to", after), zap.Int("replayed", replayed), zap.Error(cause))
	}
	if err := r.checkpoint(ctx, false); err != nil {
		return outcome{err: err, noResync: true, saveErr: true}
	}
	return outcome{resynced: true, err: cause}
}

// commit records c as the committed cursor and saves the Store when the
// checkpoint cadence says so, under one lock for the stats. It returns the
// Store's error, if any.
func (r *Resumer[T, C]) commit(ctx context.Context, c C, progress bool) error {
	r.st.cur = c
	r.st.unsaved++
	save := (r.everyN > 0 && r.st.unsaved >= r.everyN) || (r.interval > 0 && time.Since(r.st.lastSave) >= r.interval)
	var err error
	if save {
		err = r.store.Save(ctx, c)
	}
	r.mu.Lock()
	r.stats.Cursor = c
	if progress {
		r.stats.Progress++
	} else {
		r.stats.Events++
	}
	if save {
		r.countSave(err)
	}
	r.mu.Unlock()
	if r.hooks.OnCommit != nil {
		r.hooks.OnCommit(CommitEvent[C]{Cursor: c, Progress: progress})
	}
	if save {
		return r.saved(c, err, false)
	}
	return nil
}

// checkpoint saves the committed cursor if the Store lags behind it.
func (r *Resumer[T, C]) checkpoint(ctx context.Context, final bool) error {
	if r.st.unsaved == 0 {
		return nil
	}
	c := r.st.cur
	err := r.store.Save(ctx, c)
	r.mu.Lock()
	r.countSave(err)
	r.mu.Unlock()
	return r.saved(c, err, final)
}

// countSave counts a Store.Save; r.mu is held.
func (r *Resumer[T, C]) countSave(err error) {
	if err != nil {
		r.stats.SaveErrors++
	} else {
		r.stats.Saves++
	}
}

// saved finishes a Store.Save of c that returned err.
func (r *Resumer[T, C]) saved(c C, err error, final bool) error {
	if r.hooks.OnSave != nil {
		r.hooks.OnSave(SaveEvent[C]{Cursor: c, Err: err, Final: final})
	}
	if err != nil {
		return fmt.Errorf("stream: saving cursor %v to the Store: %w", c, err)
	}
	r.st.unsaved = 0
	if r.interval > 0 {
		r.st.lastSave = time.Now() // read the clock only when the cadence needs it
	}
	return nil
}

// finalSave saves a lagging Store when the loop ends, on a context that
// outlives ctx's cancellation but not the final-save timeout.
func (r *Resumer[T, C]) finalSave(ctx context.Context, runErr error) error {
	if r.st.unsaved == 0 {
		return runErr
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.saveTO)
	defer cancel()
	err := r.checkpoint(sctx, true)
	if err == nil {
		return runErr
	}
	r.mu.Lock()
	r.stats.FinalSaveError = err
	r.mu.Unlock()
	r.warn("final save failed", err)
	return errors.Join(runErr, err)
}

// classify asks the user's classifier, falling back to the default.
func (r *Resumer[T, C]) classify(err error) errclass.Decision {
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

// sleep waits d, or returns ctx's error when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Resumer[T, C]) debug(msg string, err error) {
	if ce := r.log.Check(zapcore.DebugLevel, msg); ce != nil {
		ce.Write(zap.Int("attempt", r.st.attempt), zap.Any("cursor", r.st.cur), zap.Error(err))
	}
}

func (r *Resumer[T, C]) warn(msg string, err error) {
	if ce := r.log.Check(zapcore.WarnLevel, msg); ce != nil {
		ce.Write(zap.Any("cursor", r.st.cur), zap.Error(err))
	}
}
