package stream

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/errwalk"
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
	// The Resumer is a façade: its loop is the supervisor's, which opens,
	// decides, waits and resyncs (loop.go, step.go); the events' handling
	// is the serial step's or the pipeline's (pipeline.go); commits and
	// saves are the committer's (committer.go).
	s supervisor[T, C]
}

// supervisor is the Resumer's loop and state: it loads, opens, reads each
// connection into the step (one handler), the batch (RunBatch) or the
// pipeline (WithConcurrency), decides after each connection and waits.
type supervisor[T, C any] struct {
	// Set by New, read-only after.
	src         Source[T, C]
	extract     cursor.Extractor[T, C]
	classifier  errclass.Classifier
	policy      backoff.Policy
	limiter     Limiter
	log         *zap.Logger
	order       func(a, b C) int
	equal       func(a, b C) bool // nil: C has no reliable ==
	resync      ResyncFunc[T, C]
	minRestart  time.Duration
	maxServer   time.Duration
	poll        time.Duration
	noWatch     bool // the Source's Recv respects ctx: no context watcher needed
	handlers    int  // WithConcurrency
	window      int
	keys        func(window int) keyTable[T] // nil: no order key
	tries       int
	retryPolicy backoff.Policy
	park        func(ctx context.Context, event T, err error) error
	skipRepeats bool
	batch       int           // WithBatch's max; 0: not set
	linger      time.Duration // WithBatch's linger
	batchEnd    func(T) bool  // WithBatchEnd
	bat         *batch[T, C]  // RunBatch's, while it runs (loop goroutine only)

	running atomic.Bool
	pipe    atomic.Pointer[pipeline[T, C]] // the handlers and committer under WithConcurrency, while Run runs
	st      loopState                      // the supervisor's
	quiet   quietSave[T, C]                // the interval save of a serial loop blocked in Recv (committer.go)
	guard   connGuard[T]                   // shared with the context watcher and the idle watchdog

	committer[C]
}

// loopState is what the loop carries from one connection to the next. Only
// the goroutine running the loop touches it. The committed cursor lives in
// stats.Cursor.
type loopState struct {
	loaded  bool             // the Store was loaded
	attempt int              // consecutive failures
	lastTry time.Time        // when the last try (limiter wait and Open) started
	steps   backoff.Sequence // made at the first step: an idle stream keeps none
	largest time.Duration    // the sequence's largest step
}

// next returns the next step of the backoff sequence, making it from p at
// the first, and whether the policy gave one.
func (st *loopState) next(p backoff.Policy) (time.Duration, bool) {
	if st.steps == nil {
		st.steps = p.NewSequence()
	}
	step, ok := st.steps.Next()
	if ok {
		st.largest = max(step, st.largest)
	}
	return step, ok
}

// resetSteps starts the backoff sequence over, if it exists.
func (st *loopState) resetSteps() {
	if st.steps != nil {
		st.steps.Reset()
	}
}

// Stats is a snapshot of a Resumer's counters, from [Resumer.Stats].
type Stats[C any] struct {
	// Cursor is the committed cursor.
	Cursor C
	// Events counts events delivered to the handler and committed, a
	// resync's replay included.
	Events uint64
	// Progress counts progress-only events committed.
	Progress uint64
	// Opens counts successful Opens.
	Opens uint64
	// CleanEnds counts connections that ended without a failure (io.EOF).
	CleanEnds uint64
	// Retried, Failed and Expired count failures by what they were
	// classified as: [errclass.Retry], [errclass.Fail], [errclass.Expired].
	Retried, Failed, Expired uint64
	// Resyncs counts completed resyncs.
	Resyncs uint64
	// Skipped counts events skipped as repeats ([WithSkipRepeats]).
	Skipped uint64
	// HandlerRetries counts handler calls retried in place
	// ([WithHandlerRetry]); Parked counts events handed to the dead letter
	// ([WithDeadLetter]) and committed.
	HandlerRetries, Parked uint64
	// InFlight is how many events are read but not yet committed under
	// [WithConcurrency]; 0 with one handler, whose event is committed
	// before the next is read.
	InFlight int
	// Saves and SaveErrors count Store.Save calls that succeeded and failed.
	Saves, SaveErrors uint64
	// LastError is the last failure (clean ends excluded), or nil.
	LastError error
	// FinalSaveError is the error of the save made when the last Run or All
	// returned, or nil. It is how a loop body that broke out of All learns
	// that its progress was not saved.
	FinalSaveError error
}

// New returns a Resumer that reads src, takes each event's cursor with
// extract, and resumes after the cursor kept in start (loaded when Run
// first starts). It returns an error matching [ErrInvalidOption] for a nil
// argument or a bad option.
func New[T, C any](src Source[T, C], extract cursor.Extractor[T, C], start cursor.Store[C], opts ...Option) (*Resumer[T, C], error) {
	cfg := config{everyN: -1, maxServer: defaultMaxServerDelay, saveTO: defaultFinalSaveTimeout, concurrency: 1}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if isNil(src) {
		cfg.fail("New: nil Source")
	}
	if extract == nil {
		cfg.fail("New: nil Extractor")
	}
	if isNil(start) {
		cfg.fail("New: nil Store")
	}
	r := &Resumer[T, C]{s: supervisor[T, C]{
		committer: committer[C]{
			store:       start,
			everyN:      cfg.everyN,
			interval:    cfg.interval,
			saveTimeout: cfg.saveTO,
		},
		src:         src,
		extract:     extract,
		classifier:  cfg.classifier,
		policy:      cfg.policy,
		limiter:     cfg.limiter,
		log:         cfg.logger,
		minRestart:  cfg.minRestart,
		maxServer:   cfg.maxServer,
		poll:        cfg.poll,
		handlers:    cfg.concurrency,
		window:      cfg.window,
		tries:       max(cfg.tries, 1),
		retryPolicy: cfg.retryPolicy,
		skipRepeats: cfg.skipRepeats,
		batch:       cfg.batch,
		linger:      cfg.linger,
		equal:       equalFunc[C](),
		quiet:       quietSave[T, C]{saved: make(chan struct{}, 1)},
	}}
	if cr, ok := src.(ContextRespecter); ok && cr.RecvRespectsContext() {
		r.s.noWatch = true
	}
	r.s.defaults(&cfg)
	r.s.typedOptions(&cfg)
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	return r, nil
}

// defaults fills in what the options left unset and checks what only
// their combination can tell.
func (r *supervisor[T, C]) defaults(cfg *config) {
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if r.everyN < 0 { // unset: save per event unless an interval says otherwise
		r.everyN = 1
		if r.interval > 0 {
			r.everyN = 0
		}
	}
	if r.policy == nil {
		r.policy = backoff.Default()
	}
	validate(cfg, "WithBackoff", r.policy)
	validate(cfg, "WithHandlerRetry", r.retryPolicy)
	if cfg.idle > 0 {
		r.guard.wd = &watchdog{idle: cfg.idle, count: r.published}
	}
	if r.window == 0 {
		r.window = max(minDefaultWindow, defaultWindowPerHandler*r.handlers)
	}
	if r.handlers > 1 && r.window < r.handlers {
		cfg.fail("WithWindow(%d): smaller than WithConcurrency(%d)", r.window, r.handlers)
	}
	if r.skipRepeats && cfg.order.v == nil {
		cfg.fail("WithSkipRepeats: no WithCursorOrder to tell a repeat")
	}
}

// typedOptions takes the options made for the Resumer's type parameters,
// recording an error for one made for others.
func (r *supervisor[T, C]) typedOptions(cfg *config) {
	r.keys = typedEvent[func(int) keyTable[T]](cfg, "WithOrderKey", cfg.orderKey)
	r.park = typedEvent[func(context.Context, T, error) error](cfg, "WithDeadLetter", cfg.park)
	r.batchEnd = typedEvent[func(T) bool](cfg, "WithBatchEnd", cfg.batchEnd)
	r.hooks = joinHooks(typedAll[Hooks[C]](cfg, "WithHooks", cfg.hooks, reflect.TypeFor[C]()))
	r.order = typedOne[func(a, b C) int](cfg, "WithCursorOrder", cfg.order, reflect.TypeFor[C]())
	if cfg.resync.v != nil {
		if cfg.resync.t != reflect.TypeFor[T]() {
			cfg.fail("WithResync: a resync of events of type %v given to a Resumer of events of type %v", cfg.resync.t, reflect.TypeFor[T]())
		}
		r.resync = typedOne[ResyncFunc[T, C]](cfg, "WithResync", cfg.resync, reflect.TypeFor[C]())
	}
}

// validate records an error when policy p has a method Validate() error
// that reports one (an out-of-range backoff.Exponential).
func validate(cfg *config, name string, p backoff.Policy) {
	if v, ok := p.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			cfg.fail("%s: %w", name, err)
		}
	}
}

// typedOne returns a typed option's value as a V, or records an error
// naming the cursor types when it was made for another cursor type.
func typedOne[V any](cfg *config, name string, o typed, c reflect.Type) V {
	v, ok := o.v.(V)
	if o.v != nil && !ok {
		if o.c != c {
			cfg.fail("%s: an option for cursor type %v given to a Resumer with cursor type %v", name, o.c, c)
		}
		// Otherwise T differs, which the caller reports.
	}
	return v
}

// typedEvent returns an option's value made for event type T, or records
// an error naming the event types when it was made for another.
func typedEvent[V any](cfg *config, name string, o typed) V {
	v, ok := o.v.(V)
	if o.v != nil && !ok {
		cfg.fail("%s: an option for events of type %v given to a Resumer of another event type", name, o.t)
	}
	return v
}

// equalFunc returns == for C when it is comparable and holds no interface
// (whose == may panic), and nil otherwise.
func equalFunc[C any]() func(a, b C) bool {
	t := reflect.TypeFor[C]()
	if !plainComparable(t) {
		return nil
	}
	// The usual cursors (strings, integers) compare as what they are, which
	// spares the per-event path two conversions to an interface.
	switch t.Kind() {
	case reflect.String:
		return func(a, b C) bool { return *(*string)(unsafe.Pointer(&a)) == *(*string)(unsafe.Pointer(&b)) }
	case reflect.Int64, reflect.Uint64, reflect.Int, reflect.Uint, reflect.Uintptr:
		if t.Size() == 8 {
			return func(a, b C) bool { return *(*uint64)(unsafe.Pointer(&a)) == *(*uint64)(unsafe.Pointer(&b)) }
		}
	}
	return func(a, b C) bool { return any(a) == any(b) }
}

// plainComparable reports whether == on t is defined and cannot panic.
func plainComparable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Interface, reflect.Func, reflect.Map, reflect.Slice:
		return false
	case reflect.Array:
		return plainComparable(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainComparable(t.Field(i).Type) {
				return false
			}
		}
	}
	return t.Comparable()
}

// typedAll is typedOne for a repeatable option.
func typedAll[V any](cfg *config, name string, os []typed, c reflect.Type) []V {
	vs := make([]V, 0, len(os))
	for _, o := range os {
		vs = append(vs, typedOne[V](cfg, name, o, c))
	}
	return vs
}

// Cursor returns the last committed cursor: the cursor of the last event the
// handler finished (or of the last progress-only event). Before the first
// Run has loaded the Store it returns the zero C. It is safe for concurrent
// use.
func (r *Resumer[T, C]) Cursor() C { return r.s.committed() }

// Stats returns a snapshot of the Resumer's counters. It is safe for
// concurrent use.
func (r *Resumer[T, C]) Stats() Stats[C] { return r.s.snapshot() }

// snapshot returns a copy of Stats, with the pipeline's events in flight.
func (r *supervisor[T, C]) snapshot() Stats[C] {
	r.mu.Lock()
	s := r.stats
	r.mu.Unlock()
	if p := r.pipe.Load(); p != nil {
		s.InFlight = p.inFlight()
	}
	return s
}

// published returns how many cursors were committed and events skipped, for
// the idle watchdog.
func (r *supervisor[T, C]) published() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats.Events + r.stats.Progress + r.stats.Skipped
}

// Run reads the stream and calls handle for each event, in order: on the
// calling goroutine, or on n goroutines under [WithConcurrency] (in order
// per key). An event's cursor is committed only after handle returned nil:
// at-least-once, never a skip.
//
// Run returns
//   - nil when the source reports [ErrEndOfStream], or handle returns an
//     error matching [ErrStop] (that event is committed);
//   - handle's error, as it is, when handle fails (the event is not
//     committed; a new Resumer on the same Store redelivers it);
//   - an error matching the extractor's error when the extractor fails;
//   - a failure classified [errclass.Fail], as it is;
//   - a failure classified [errclass.Expired] when there is no resync hook,
//     matching both the failure and [errclass.ErrExpired];
//   - an error matching [ErrRetriesExhausted] and the last failure when the
//     backoff policy gives up;
//   - ctx's error when ctx ends, whatever failed because of it (the current
//     Conn is closed to unblock it; a Limiter, ResyncFunc, Store or handler
//     that ignores ctx delays it);
//   - an error when another Run or All is in progress;
//   - an error matching [ErrInvalidOption] for a nil ctx or handler.
//
// Every other failure is retried; docs/how-it-decides.md in the repository
// states how each is decided and how long Run waits.
//
// Before returning, Run saves the committed cursor to the Store if it is not
// saved yet; a failure of that save is joined to the returned error and kept
// in [Stats].FinalSaveError. A Run that returns because saving failed (the
// Store's error, classified as final) makes no such save: its error says
// the Store lags. Run may be called again after it returned: it
// continues after the committed cursor without loading the Store again.
func (r *Resumer[T, C]) Run(ctx context.Context, handle func(ctx context.Context, event T) error) error {
	return r.s.runEach(ctx, handle)
}

// runEach is Run.
func (r *supervisor[T, C]) runEach(ctx context.Context, handle func(ctx context.Context, event T) error) error {
	switch {
	case handle == nil:
		return fmt.Errorf("%w: Run: nil handler", ErrInvalidOption)
	case r.batch > 0:
		return fmt.Errorf("%w: Run with WithBatch: use RunBatch", ErrInvalidOption)
	case r.batchEnd != nil:
		return fmt.Errorf("%w: Run with WithBatchEnd: batch boundaries need RunBatch", ErrInvalidOption)
	}
	return r.run(ctx, handle, nil)
}

// errBreak is the handler error by which All ends the loop when its body
// stops.
var errBreak = errors.New("stream: loop body stopped")

// All returns an iterator over the stream's events for a range-over-func
// loop. It yields (event, nil) per event, and on a terminal error (see
// [Resumer.Run]) yields (zero, err) once and stops; [ErrEndOfStream] just ends
// the loop. An event is committed when the loop body asks for the next one.
// A loop body is sequential by nature: with [WithConcurrency] (n > 1) All
// yields an error matching [ErrInvalidOption] and nothing else.
//
// Breaking out of the loop closes the Conn and leaves the event it broke on
// uncommitted, to be delivered again by the next Run or All (to commit it
// and stop, use Run and return [ErrStop]). The committed cursor is then saved
// as when Run returns, but no error can be yielded after a break: read
// [Stats].FinalSaveError to learn whether that save failed.
func (r *Resumer[T, C]) All(ctx context.Context) iter.Seq2[T, error] { return r.s.all(ctx) }

// all is All.
func (r *supervisor[T, C]) all(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		switch {
		case r.handlers > 1:
			yield(zero, fmt.Errorf("%w: All with WithConcurrency(%d): a loop body takes one event at a time; use Run", ErrInvalidOption, r.handlers))
			return
		case r.batch > 0:
			yield(zero, fmt.Errorf("%w: All with WithBatch: a loop body takes one event at a time; use RunBatch", ErrInvalidOption))
			return
		case r.batchEnd != nil:
			yield(zero, fmt.Errorf("%w: All with WithBatchEnd: batch boundaries need RunBatch", ErrInvalidOption))
			return
		}
		broke := false
		err := r.run(ctx, func(_ context.Context, ev T) error {
			if !yield(ev, nil) {
				broke = true
				return errBreak
			}
			return nil
		}, nil)
		if broke || err == nil {
			return
		}
		yield(zero, err)
	}
}

// panicSave is the final save on a panic's way up; a Store that panics
// again leaves the first panic to go on.
func (r *supervisor[T, C]) panicSave(ctx context.Context) {
	defer func() { _ = recover() }()
	r.stopQuiet()
	_ = r.finalSave(ctx, outcome{end: finalEnd})
}

// run is Run, RunBatch (b not nil) and All: one loop at a time, the final
// save, and the OnStop hook once it returned.
func (r *supervisor[T, C]) run(ctx context.Context, handle handler[T], b *batch[T, C]) (err error) {
	if err := r.enter(ctx); err != nil {
		return err
	}
	defer r.running.Store(false)
	r.begin()
	r.hookTurn = make(chan struct{}, 1)
	r.bat = b
	defer func() { r.bat = nil }()
	returned := false
	defer func() {
		if !returned { // a panic: save what was committed on its way up
			r.panicSave(ctx)
		}
	}()
	o := outcome{end: finalEnd, err: ctx.Err()}
	if o.err == nil {
		o = r.guarded(ctx, handle)
	}
	returned = true
	return r.stopped(ctx, o)
}

// enter refuses a nil ctx, a second concurrent run and a handler
// transaction under concurrency; otherwise the Resumer is running.
// It and stopped are frames of their own, kept out of run's: run sits on
// the stack of every idle stream.
//
//go:noinline
func (r *supervisor[T, C]) enter(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidOption)
	}
	if !r.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
	}
	if hc, ok := r.store.(cursor.HandlerCommitter); ok && r.handlers > 1 && hc.CommitsInHandler() {
		r.running.Store(false)
		return fmt.Errorf("%w: WithConcurrency(%d) with a Store that commits in the handler's transaction: transactions finishing out of order would store a cursor beyond an unfinished event", ErrInvalidOption, r.handlers)
	}
	return nil
}

// stopped ends a run whose loop returned o: the final save, then the
// OnStop hook.
//
//go:noinline
func (r *supervisor[T, C]) stopped(ctx context.Context, o outcome) error {
	r.stopQuiet()
	if o.end == finalEnd && errwalk.Is(o.err, errBreak) {
		o.err = nil // an All loop body stopped: no failure (All knows it broke)
	}
	err := r.finalSave(ctx, o)
	if r.hooks.OnStop != nil {
		r.callHook(func() { r.hooks.OnStop(StopEvent[C]{Err: err, Cursor: r.cur()}) })
	}
	return err
}
