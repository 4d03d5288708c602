package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

// defaultFinalSaveTimeout bounds the save made when Run returns.
const defaultFinalSaveTimeout = 5 * time.Second

// Resumer reads a stream of events of type T, keeps the cursor C of the last
// event handled, and when the stream breaks reopens it just after that
// cursor, deciding from each failure whether to retry, wait or give up.
//
// A Resumer runs one loop at a time ([Resumer.Run] or [Resumer.All]); its
// other methods are safe for concurrent use. Make one with [New].
type Resumer[T, C any] struct {
	src        Source[T, C]
	extract    cursor.Extractor[T, C]
	store      cursor.Store[C]
	classifier errclass.Classifier
	seq        backoff.Sequence
	minRestart time.Duration
	log        *zap.Logger
	everyN     int
	interval   time.Duration
	saveTO     time.Duration
	hooks      Hooks[C]
	order      func(a, b C) int
	resync     ResyncFunc[T, C]

	running  atomic.Bool
	saves    atomic.Uint64 // kept out of stats: counted per event without the lock
	saveErrs atomic.Uint64
	guard    connGuard[T]
	noGuard  bool // the Source's Recv respects ctx: no watcher needed

	// Owned by the running loop.
	loaded   bool
	cur      C   // the committed cursor, the loop's own copy
	unsaved  int // commits since the last successful save: the Store lags when > 0
	lastSave time.Time
	peek     time.Duration
	peeked   bool // peek holds a backoff step drawn but not yet waited

	mu    sync.Mutex // guards stats (its Cursor too)
	stats Stats[C]
}

// Stats is a snapshot of a Resumer's counters, from [Resumer.Stats].
type Stats[C any] struct {
	// Cursor is the committed cursor.
	Cursor C
	// Events counts events delivered to the handler and committed.
	Events uint64
	// Progress counts progress-only events committed.
	Progress uint64
	// Opens counts successful Opens.
	Opens uint64
	// CleanEnds counts connections that ended with io.EOF.
	CleanEnds uint64
	// Failures counts failures by the action they were classified as
	// (index with errclass.Retry, errclass.Fail, errclass.Expired).
	Failures [errclass.NumActions]uint64
	// Resyncs counts completed resyncs.
	Resyncs uint64
	// Saves and SaveErrors count Store.Save calls that succeeded and failed.
	Saves, SaveErrors uint64
	// LastError is the last failure (clean ends excluded), or nil.
	LastError error
}

// New returns a Resumer that reads src, takes each event's cursor with
// extract, and resumes after the cursor kept in start (loaded when Run
// first starts, saved as the checkpoint options say). It returns an error
// matching [ErrInvalidOption] for a nil src, extract or start, a bad
// option, or a typed option (WithHooks, WithCursorOrder, WithResync) whose
// types are not T and C.
func New[T, C any](src Source[T, C], extract cursor.Extractor[T, C], start cursor.Store[C], opts ...Option) (*Resumer[T, C], error) {
	cfg := config{everyN: -1}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if isNil(src) {
		cfg.fail("New: the Source is nil")
	}
	if extract == nil {
		cfg.fail("New: the Extractor is nil")
	}
	if isNil(start) {
		cfg.fail("New: the Store is nil; use cursor.NewMemory(initial) to start from a cursor in memory")
	}
	r := &Resumer[T, C]{
		src:        src,
		extract:    extract,
		store:      start,
		classifier: cfg.classifier,
		minRestart: cfg.minRestart,
		log:        cfg.logger,
		interval:   cfg.interval,
		saveTO:     cfg.saveTO,
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if cr, ok := src.(ContextRespecter); ok && cr.RecvRespectsContext() {
		r.noGuard = true
	}
	if r.saveTO == 0 {
		r.saveTO = defaultFinalSaveTimeout
	}
	switch {
	case cfg.everyN >= 0:
		r.everyN = cfg.everyN
	case cfg.interval > 0:
		r.everyN = 0
	default:
		r.everyN = 1
	}
	policy := cfg.policy
	if policy == nil {
		policy = backoff.Default()
	}
	if v, ok := policy.(backoff.Validator); ok {
		if err := v.Validate(); err != nil {
			cfg.fail("WithBackoff: %w", err)
		}
	}
	r.seq = policy.NewSequence()
	if cfg.hooks != nil {
		if h, ok := cfg.hooks.(Hooks[C]); ok {
			r.hooks = h
		} else {
			cfg.fail("WithHooks: hooks for %s given to a Resumer with cursor type %s", typeArg(cfg.hooks), typeName[C]())
		}
	}
	if cfg.order != nil {
		if f, ok := cfg.order.(func(a, b C) int); ok {
			r.order = f
		} else {
			cfg.fail("WithCursorOrder: a comparison of type %T given to a Resumer with cursor type %s", cfg.order, typeName[C]())
		}
	}
	if cfg.resync != nil {
		if f, ok := cfg.resync.(ResyncFunc[T, C]); ok {
			r.resync = f
		} else {
			cfg.fail("WithResync: a %T given to a Resumer[%s, %s]", cfg.resync, typeName[T](), typeName[C]())
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return r, nil
}

// Cursor returns the last committed cursor: the cursor of the last event the
// handler finished (or of the last progress-only event). Before the first
// Run has loaded the Store it returns the zero C. It is safe for concurrent
// use.
func (r *Resumer[T, C]) Cursor() C {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.Cursor
}

// Stats returns a snapshot of the Resumer's counters. It is safe for
// concurrent use.
func (r *Resumer[T, C]) Stats() Stats[C] {
	r.mu.Lock()
	st := r.stats
	r.mu.Unlock()
	st.Saves, st.SaveErrors = r.saves.Load(), r.saveErrs.Load()
	return st
}

// Run reads the stream and calls handle for each event, in order, on the
// calling goroutine. An event's cursor is committed only after handle
// returned nil: at-least-once, never a skip.
//
// Run returns
//   - nil when the source reports [ErrEndOfStream];
//   - handle's error, as it is, when handle fails (the event is not
//     committed; a new Resumer on the same Store redelivers it);
//   - an error matching [ErrExtract] and the extractor's error when the
//     extractor fails;
//   - a failure classified [errclass.Fail], as it is;
//   - a failure classified [errclass.Expired] when there is no resync hook,
//     matching both the failure and [errclass.ErrExpired];
//   - an error matching [ErrRetriesExhausted] and the last failure when the
//     backoff policy gives up;
//   - ctx's error when ctx ends (the current Conn is closed to unblock it);
//   - [ErrAlreadyRunning] when another Run or All is in progress;
//   - an error matching [ErrInvalidOption] for a nil ctx or handler.
//
// io.EOF from Recv is a clean end whatever marks it carries, except that an
// [errclass.RetryAfter] on it sets a floor for the next wait (an SSE
// server's retry:). A Store whose Load reports an expired cursor ends Run
// with that error, resync hook or not.
//
// Before returning, Run saves the committed cursor to the Store if it is not
// saved yet; a failure of that save is joined to the returned error. Run may
// be called again after it returned: it continues after the committed cursor
// without loading the Store again.
func (r *Resumer[T, C]) Run(ctx context.Context, handle func(ctx context.Context, event T) error) error {
	if handle == nil {
		return fmt.Errorf("%w: Run: the handler is nil", ErrInvalidOption)
	}
	return r.run(ctx, handle)
}

// errBreak is the handler error All uses when the loop body stops.
var errBreak = errors.New("stream: loop body stopped")

// All returns an iterator over the stream's events for a range-over-func
// loop. It yields (event, nil) per event, and on a terminal error (see
// [Resumer.Run]) yields (zero, err) once and stops; [ErrEndOfStream] just ends
// the loop. An event is committed when the loop body asks for the next one;
// breaking out of the loop closes the Conn and leaves the event it broke on
// uncommitted, to be delivered again by the next Run or All.
func (r *Resumer[T, C]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		broke := false
		err := r.run(ctx, func(_ context.Context, ev T) error {
			if !yield(ev, nil) {
				broke = true
				return errBreak
			}
			return nil
		})
		if broke || err == nil {
			return
		}
		var zero T
		yield(zero, err)
	}
}

// run is the one loop behind Run and All.
func (r *Resumer[T, C]) run(ctx context.Context, handle func(context.Context, T) error) (err error) {
	if ctx == nil {
		return fmt.Errorf("%w: nil context; use context.Background()", ErrInvalidOption)
	}
	if !r.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer r.running.Store(false)
	if err := ctx.Err(); err != nil {
		return err
	}
	defer func() { err = r.finalSave(ctx, err) }()
	// One watcher per run closes the current Conn when ctx ends, so that a
	// Recv that ignores ctx is unblocked; it has ended before run returns.
	r.guard.reset()
	if !r.noGuard {
		closed := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(closed)
			r.guard.cancel()
		})
		defer func() {
			if !stop() {
				<-closed
			}
		}()
	}

	r.seq.Reset()
	r.peeked = false
	attempt := 0
	var lastOpen time.Time
	for {
		if !r.loaded {
			c, lerr := r.store.Load(ctx)
			if lerr == nil {
				r.loaded = true
				r.cur = c
				if r.interval > 0 {
					r.lastSave = time.Now()
				}
				r.mu.Lock()
				r.stats.Cursor = c
				r.mu.Unlock()
			} else {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				lerr = fmt.Errorf("stream: loading the cursor from the Store: %w", lerr)
				attempt++
				// No cursor to resync from: the Store itself is the problem.
				if err := r.failureNoResync(ctx, lerr, attempt, lastOpen); err != nil {
					return err
				}
				continue
			}
		}

		lastOpen = time.Now() // once per Open: the minimum restart delay and idle ends need it
		after := r.cur
		conn, oerr := r.src.Open(ctx, after)
		switch {
		case oerr == nil && isNil(conn):
			oerr = ErrNilConn
		case oerr != nil && !isNil(conn):
			_ = conn.Close() // an Open that failed must not leak what it opened
		}
		var n int
		var cerr error
		opened := oerr == nil
		if opened {
			r.count(func(s *Stats[C]) { s.Opens++ })
			r.debug("stream opened", attempt, nil)
			if r.hooks.OnConnect != nil {
				r.hooks.OnConnect(ConnectEvent[C]{After: after, Attempt: attempt})
			}
			var fatal error
			n, cerr, fatal = r.drain(ctx, conn, handle)
			if fatal != nil {
				return fatal
			}
		} else {
			cerr = oerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(cerr, ErrEndOfStream) {
			r.debug("stream ended for good", attempt, cerr)
			return nil
		}
		if n > 0 {
			r.seq.Reset()
			attempt = 0
		}
		// A connection end is a good moment to checkpoint a lagging Store.
		if serr := r.checkpoint(ctx, false); serr != nil && errors.Is(cerr, io.EOF) {
			cerr = serr
		}
		if errors.Is(cerr, io.EOF) {
			if err := r.cleanEnd(ctx, cerr, opened, n, &attempt, lastOpen); err != nil {
				return err
			}
			continue
		}
		attempt++
		if err := r.failure(ctx, cerr, opened, n, attempt, lastOpen); err != nil {
			var rs errResync
			if !errors.As(err, &rs) {
				return err
			}
			if err := r.doResync(ctx, handle, rs.cause, &attempt, lastOpen); err != nil {
				return err
			}
		}
	}
}

// doResync calls the resync hook after an expired cursor, delivers its
// replay and commits the cursor it returned. A nil return means "reopen":
// after a successful resync, or after a retried resync failure (the next
// Open meets the expired cursor again and resyncs again).
func (r *Resumer[T, C]) doResync(ctx context.Context, handle func(context.Context, T) error, cause error, attempt *int, lastOpen time.Time) error {
	from := r.cur
	after, replay, err := r.resync(ctx, cause)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		*attempt++
		err = fmt.Errorf("stream: resync after an expired cursor (%v) failed: %w", cause, err)
		return r.failureNoResync(ctx, err, *attempt, lastOpen) // expired again: no second resync in a row
	}
	for _, ev := range replay {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := handle(ctx, ev); err != nil {
			return err
		}
	}
	r.cur = after
	r.mu.Lock()
	r.stats.Cursor = after
	r.stats.Events += uint64(len(replay))
	r.stats.Resyncs++
	r.mu.Unlock()
	r.unsaved++
	r.seq.Reset()
	*attempt = 0
	if r.hooks.OnResync != nil {
		r.hooks.OnResync(ResyncEvent[C]{Cause: cause, From: from, To: after, Replayed: len(replay)})
	}
	if ce := r.log.Check(zapcore.InfoLevel, "resynced after an expired cursor"); ce != nil {
		ce.Write(zap.Any("from", from), zap.Any("to", after), zap.Int("replayed", len(replay)), zap.Error(cause))
	}
	if err := r.checkpoint(ctx, false); err != nil {
		*attempt++
		return r.failureNoResync(ctx, err, *attempt, lastOpen)
	}
	return nil
}

// drain reads one connection until it ends. It returns the number of cursors
// committed, the error that ended the connection (to be classified), and a
// fatal error that ends Run (handler, extractor, order, or break).
func (r *Resumer[T, C]) drain(ctx context.Context, conn Conn[T], handle func(context.Context, T) error) (n int, cerr, fatal error) {
	if !r.guard.set(conn) {
		_ = conn.Close()
		return 0, ctx.Err(), nil
	}
	defer func() {
		r.guard.set(nil)
		_ = conn.Close()
	}()
	for {
		if err := ctx.Err(); err != nil {
			return n, err, nil
		}
		ev, err := conn.Recv(ctx)
		if err != nil {
			return n, err, nil
		}
		c, err := r.extract(ev)
		progress := false
		if err != nil {
			if !errors.Is(err, cursor.ProgressOnly) {
				return n, nil, fmt.Errorf("%w: %w", ErrExtract, err)
			}
			progress = true
		}
		if r.order != nil && r.order(c, r.cur) < 0 {
			return n, nil, fmt.Errorf("%w: event cursor %v is before committed cursor %v", ErrCursorRegressed, c, r.cur)
		}
		if !progress {
			if err := handle(ctx, ev); err != nil {
				return n, nil, err
			}
		}
		n++
		if serr := r.commit(ctx, c, progress); serr != nil {
			return n, serr, nil
		}
	}
}

// commit records c as the committed cursor and checkpoints the Store when
// the cadence says so. It returns the Store's error, if any.
func (r *Resumer[T, C]) commit(ctx context.Context, c C, progress bool) error {
	r.cur = c
	r.mu.Lock()
	r.stats.Cursor = c
	if progress {
		r.stats.Progress++
	} else {
		r.stats.Events++
	}
	r.mu.Unlock()
	r.unsaved++
	if r.hooks.OnCommit != nil {
		r.hooks.OnCommit(CommitEvent[C]{Cursor: c, Progress: progress})
	}
	if (r.everyN > 0 && r.unsaved >= r.everyN) || (r.interval > 0 && time.Since(r.lastSave) >= r.interval) {
		return r.checkpoint(ctx, false)
	}
	return nil
}

// checkpoint saves the committed cursor if the Store lags behind it.
func (r *Resumer[T, C]) checkpoint(ctx context.Context, final bool) error {
	if r.unsaved == 0 {
		return nil
	}
	c := r.cur
	err := r.store.Save(ctx, c)
	if err != nil {
		r.saveErrs.Add(1)
	} else {
		r.saves.Add(1)
	}
	if r.hooks.OnSave != nil {
		r.hooks.OnSave(SaveEvent[C]{Cursor: c, Err: err, Final: final})
	}
	if err != nil {
		return fmt.Errorf("stream: saving cursor %v to the Store: %w", c, err)
	}
	r.unsaved = 0
	if r.interval > 0 {
		r.lastSave = time.Now() // read the clock only when the cadence needs it
	}
	return nil
}

// finalSave saves a lagging Store when the loop ends, on a context that
// outlives ctx's cancellation but not the final-save timeout.
func (r *Resumer[T, C]) finalSave(ctx context.Context, runErr error) error {
	if r.unsaved == 0 {
		return runErr
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.saveTO)
	defer cancel()
	if err := r.checkpoint(sctx, true); err != nil {
		r.warn("final save failed", err)
		return errors.Join(runErr, err)
	}
	return runErr
}

// cleanEnd handles a connection that ended with io.EOF: no failure is
// counted; a connection that delivered nothing and closed sooner than a
// backoff step lasts takes that step, so that a server that accepts and
// closes at once cannot cause a hot loop.
func (r *Resumer[T, C]) cleanEnd(ctx context.Context, cerr error, opened bool, n int, attempt *int, lastOpen time.Time) error {
	r.count(func(s *Stats[C]) { s.CleanEnds++ })
	d := errclass.Decision{Action: errclass.Retry}
	// A clean end may carry the server's reconnection delay (SSE retry:),
	// as errclass.RetryAfter(io.EOF, d): a floor for the next wait.
	if after, ok := errclass.RetryAfterOf(cerr); ok {
		d.After = after
	}
	if r.hooks.OnDisconnect != nil {
		r.hooks.OnDisconnect(DisconnectEvent[C]{Err: cerr, Decision: d, Clean: true, Opened: opened, Events: n, Cursor: r.cur})
	}
	step := n == 0
	if step && opened {
		// An empty connection that lived at least as long as the backoff
		// step it would cost is an idle stream that the server ended on its
		// schedule (a Kubernetes watch timeout on a quiet namespace), not a
		// server that accepts and closes at once: no step, and the
		// sequence starts over, so a policy that gives up after N attempts
		// never stops a healthy idle stream.
		delay, ok := r.seq.Next()
		if !ok || time.Since(lastOpen) >= delay {
			r.seq.Reset()
			*attempt = 0
			step = false
		} else {
			r.peek, r.peeked = delay, true
		}
	}
	if step {
		*attempt++
	}
	return r.wait(ctx, cerr, d, step, *attempt, lastOpen)
}

// failure classifies a failure and either waits for the next attempt (nil)
// or returns the error that ends Run.
func (r *Resumer[T, C]) failure(ctx context.Context, cerr error, opened bool, n, attempt int, lastOpen time.Time) error {
	d := r.classify(cerr)
	r.count(func(s *Stats[C]) {
		s.Failures[d.Action]++
		s.LastError = cerr
	})
	if r.hooks.OnDisconnect != nil {
		r.hooks.OnDisconnect(DisconnectEvent[C]{Err: cerr, Decision: d, Opened: opened, Events: n, Cursor: r.cur})
	}
	switch d.Action {
	case errclass.Fail:
		r.warn("stream failed", cerr)
		return cerr
	case errclass.Expired:
		if r.hooks.OnExpired != nil {
			r.hooks.OnExpired(ExpiredEvent[C]{Err: cerr, Cursor: r.cur})
		}
		if !errors.Is(cerr, errclass.ErrExpired) {
			cerr = errclass.CursorExpired(cerr)
		}
		if r.resync == nil {
			r.warn("cursor expired and no resync hook is set", cerr)
			return cerr
		}
		return errResync{cause: cerr}
	}
	return r.wait(ctx, cerr, d, true, attempt, lastOpen)
}

// failureNoResync is failure for the places that cannot resync (a Store
// that failed, a resync that failed): an Expired verdict ends Run with the
// failure, marked expired.
func (r *Resumer[T, C]) failureNoResync(ctx context.Context, err error, attempt int, lastOpen time.Time) error {
	ferr := r.failure(ctx, err, false, 0, attempt, lastOpen)
	var rs errResync
	if errors.As(ferr, &rs) {
		return rs.cause
	}
	return ferr
}

// errResync asks the loop to resync; it never leaves the package.
type errResync struct{ cause error }

func (e errResync) Error() string { return "stream: resync needed: " + e.cause.Error() }

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

// wait computes the delay before the next Open and waits for it:
// max(backoff step (only when step), the server's After, the minimum restart
// delay less the time since the previous Open started).
func (r *Resumer[T, C]) wait(ctx context.Context, cerr error, d errclass.Decision, step bool, attempt int, lastOpen time.Time) error {
	var delay time.Duration
	reason := DelayNone
	if step {
		s, ok := r.peek, true
		if !r.peeked {
			s, ok = r.seq.Next()
		}
		r.peeked = false
		if !ok {
			err := fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt, cerr)
			r.warn("giving up", err)
			return err
		}
		if s > 0 {
			delay, reason = s, DelayBackoff
		}
	}
	if d.After > delay {
		delay, reason = d.After, DelayServer
	}
	if r.minRestart > 0 && !lastOpen.IsZero() {
		if w := r.minRestart - time.Since(lastOpen); w > delay {
			delay, reason = w, DelayMinRestart
		}
	}
	if r.hooks.OnRetry != nil {
		r.hooks.OnRetry(RetryEvent[C]{Err: cerr, Decision: d, Delay: delay, Reason: reason, Attempt: attempt, After: r.cur})
	}
	if errors.Is(cerr, io.EOF) { // a clean end is never a failure, even an empty one
		if ce := r.log.Check(zapcore.DebugLevel, "connection ended; reopening"); ce != nil {
			ce.Write(zap.Int("attempt", attempt), zap.Any("cursor", r.cur), zap.Duration("delay", delay))
		}
	} else if ce := r.log.Check(zapcore.InfoLevel, "stream failed; retrying"); ce != nil {
		ce.Write(zap.Int("attempt", attempt), zap.Any("cursor", r.cur), zap.Duration("delay", delay),
			zap.Stringer("reason", reason), zap.Stringer("decision", d), zap.Error(cerr))
	}
	if delay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Resumer[T, C]) count(f func(*Stats[C])) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

func (r *Resumer[T, C]) debug(msg string, attempt int, err error) {
	if ce := r.log.Check(zapcore.DebugLevel, msg); ce != nil {
		ce.Write(zap.Int("attempt", attempt), zap.Any("cursor", r.cur), zap.Error(err))
	}
}

func (r *Resumer[T, C]) warn(msg string, err error) {
	if ce := r.log.Check(zapcore.WarnLevel, msg); ce != nil {
		ce.Write(zap.Any("cursor", r.cur), zap.Error(err))
	}
}

// connGuard holds the current Conn so that a context watcher can close it.
type connGuard[T any] struct {
	mu        sync.Mutex
	conn      Conn[T]
	cancelled bool
}

func (g *connGuard[T]) reset() {
	g.mu.Lock()
	g.conn, g.cancelled = nil, false
	g.mu.Unlock()
}

// set makes c the current Conn; it reports false when the run was already
// cancelled (the caller then closes c itself).
func (g *connGuard[T]) set(c Conn[T]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancelled && c != nil {
		return false
	}
	g.conn = c
	return true
}

// cancel closes the current Conn and refuses later ones.
func (g *connGuard[T]) cancel() {
	g.mu.Lock()
	c := g.conn
	g.cancelled = true
	g.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}
