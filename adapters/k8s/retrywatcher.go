package k8s

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"go.uber.org/zap"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// RetryWatcher is a watch.Interface that reopens its watch after the
// resource version of the last event its consumer received, whenever the
// watch ends or fails for a reason worth retrying: client-go's
// watchtools.RetryWatcher, case by case (see the package documentation). A
// failure it does not retry (Forbidden, Unauthorized, a 410 in the stream,
// an invalid event) arrives as one last watch.Error event, then it stops.
// Its methods are safe for concurrent use. Make one with
// [NewRetryWatcherWithContext].
type RetryWatcher struct {
	r         *stream.Resumer[watch.Event, string]
	cancel    context.CancelCauseFunc
	result    chan watch.Event
	log       *zap.Logger
	initialRV string
	src       source       // allocated with the watcher
	rs        *resyncState // nil without WithResync

	mu       sync.Mutex
	done     chan struct{} // made by the first call to Done: most consumers never call it
	finished bool
}

// errStopped is the cause of the cancellation made by Stop.
var errStopped = errors.New("k8s: RetryWatcher asked to stop")

// NewRetryWatcher makes a RetryWatcher that watches through watcherClient
// from initialResourceVersion until Stop is called.
//
// Deprecated: use [NewRetryWatcherWithContext], as with client-go.
func NewRetryWatcher(initialResourceVersion string, watcherClient cache.Watcher, opts ...Option) (*RetryWatcher, error) {
	var w cache.WatcherWithContext
	if watcherClient != nil {
		w = cache.ToWatcherWithContext(watcherClient)
	}
	return start(context.Background(), site{"k8s: NewRetryWatcher", "watcherClient"}, initialResourceVersion, w, opts)
}

// NewRetryWatcherWithContext makes a RetryWatcher that watches through
// watcherClient (a cache.ListWatch, or a clientset's resource interface)
// the events after initialResourceVersion, on one goroutine of its own,
// until Stop, the end of ctx, or a failure it does not retry.
//
// It returns an error matching [stream.ErrInvalidOption] for every bad
// argument at once: an initialResourceVersion of "" or "0", with
// client-go's message word for word (use [NewRetryWatcherFromNow]), a nil
// watcherClient, a bad option.
func NewRetryWatcherWithContext(ctx context.Context, initialResourceVersion string, watcherClient cache.WatcherWithContext, opts ...Option) (*RetryWatcher, error) {
	return start(ctx, site{"k8s: NewRetryWatcherWithContext", "watcherClient"}, initialResourceVersion, watcherClient, opts)
}

// site names a constructor and its watch client argument, for the errors.
type site struct{ where, client string }

// start builds a watcher and starts its goroutine.
func start(ctx context.Context, at site, rv string, w cache.WatcherWithContext, opts []Option) (*RetryWatcher, error) {
	rw, handle, err := build(at, rv, w, opts)
	if err != nil {
		return nil, err
	}
	ctx, rw.cancel = context.WithCancelCause(ctx)
	go rw.run(ctx, handle)
	return rw, nil
}

// build makes a watcher, not started, and its handler; it checks every
// argument and option at once.
func build(at site, rv string, w cache.WatcherWithContext, opts []Option) (*RetryWatcher, func(context.Context, watch.Event) error, error) {
	cfg := newConfig(opts)
	errs := append(cfg.errs, checkInitialRV(at.where, rv))
	if w == nil {
		errs = append(errs, badarg.New(at.where, at.client, nil, "must not be nil"))
	}
	rw := &RetryWatcher{
		result:    make(chan watch.Event),
		log:       cfg.logger,
		initialRV: rv,
	}
	sopts := []stream.Option{
		stream.WithMinRestartDelay(cfg.minRestart),
		stream.WithBackoff(cfg.policy),
		stream.WithLogger(cfg.logger),
		// The Source marks its errors; the user's classifier, if any, is
		// asked first, errclass.Default reads the marks.
		stream.WithClassifier(cfg.classifier),
		// The Resumer's own cursor is the one reopened after.
		stream.WithCheckpointEvery(0),
		stream.WithIdleTimeout(cfg.idle),
		stream.WithOpenLimiter(cfg.limiter),
	}
	for _, h := range cfg.hooks {
		if h.OnResync != nil {
			h.OnResync = rw.resynced(h.OnResync)
		}
		sopts = append(sopts, stream.WithHooks(h))
	}
	handle := rw.send
	switch {
	case cfg.resync != nil:
		rw.rs = &resyncState{f: cfg.resync}
		sopts = append(sopts, stream.WithResync(rw.resync))
		handle = rw.sendTyped
		if cfg.diff {
			rw.rs.diff = newTracker()
			errs = append(errs, rw.rs.know(cfg.known))
			handle = rw.sendTracked
		}
	case cfg.diff:
		errs = append(errs, badarg.New("k8s: WithResyncDiff", "WithResync", nil, "is required"))
	}
	rw.src.w, rw.src.quiet, rw.src.goneRetries = w, cfg.idle <= 0, cfg.resync == nil
	r, err := stream.New[watch.Event, string](&rw.src, ResourceVersion, cursor.NewMemory(rv), sopts...)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", at.where, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	rw.r = r
	return rw, handle, nil
}

// checkInitialRV refuses what client-go's RetryWatcher refuses, with its
// message.
func checkInitialRV(where, rv string) error {
	switch rv {
	case "", "0":
		return &clientGoError{
			msg: fmt.Sprintf("initial RV %q is not supported due to issues with underlying WATCH", rv),
			err: badarg.New(where, "initialResourceVersion", rv, "is not supported due to issues with underlying WATCH"),
		}
	}
	return nil
}

// clientGoError reads as client-go's error for the same mistake, word for
// word (callers of a drop-in may match its text), and unwraps to the
// [badarg] error that names the argument.
type clientGoError struct {
	msg string
	err error
}

func (e *clientGoError) Error() string { return e.msg }
func (e *clientGoError) Unwrap() error { return e.err }

// run is the watcher's one goroutine. Keep its frame small (rare paths go
// in stopped and failed): thousands of idle watchers keep it on their stack.
func (rw *RetryWatcher) run(ctx context.Context, handle func(context.Context, watch.Event) error) {
	err := rw.r.Run(ctx, handle)
	if ctx.Err() != nil {
		rw.stopped(ctx)
	} else if err != nil {
		rw.failed(ctx, err)
	}
	close(rw.result)
	rw.cancel(errStopped)
	rw.mu.Lock()
	rw.finished = true
	if rw.done != nil {
		close(rw.done)
	}
	rw.mu.Unlock()
}

func (rw *RetryWatcher) stopped(ctx context.Context) {
	if ce := rw.log.Check(zap.DebugLevel, "RetryWatcher stopped"); ce != nil {
		ce.Write(zap.NamedError("cause", context.Cause(ctx)), zap.String("resourceVersion", rw.LastResourceVersion()))
	}
}

// failed delivers the failure that stops the watcher as a final watch.Error
// event.
func (rw *RetryWatcher) failed(ctx context.Context, err error) {
	if ce := rw.log.Check(zap.WarnLevel, "RetryWatcher stopping after a failure it does not retry"); ce != nil {
		ce.Write(zap.Error(err), zap.String("resourceVersion", rw.LastResourceVersion()))
	}
	_ = rw.send(ctx, finalEvent(err))
}

// finalEvent is the last watch.Error event: the server's own, err's
// Status, or an InternalError.
func finalEvent(err error) watch.Event {
	var ee *eventError
	if errors.As(err, &ee) {
		return ee.Event
	}
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		st := as.Status()
		return watch.Event{Type: watch.Error, Object: &st}
	}
	return watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}
}

// send is the handler: it hands ev to the consumer, on the Resumer's
// goroutine.
func (rw *RetryWatcher) send(ctx context.Context, ev watch.Event) error {
	// A non-blocking send first: cheaper than a two-way select.
	select {
	case rw.result <- ev:
		return nil
	default:
	}
	select {
	case rw.result <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendTyped also remembers the objects' kind, for the resync markers.
func (rw *RetryWatcher) sendTyped(ctx context.Context, ev watch.Event) error {
	if ev.Type != watch.Bookmark {
		rw.rs.kind.observe(ev.Object)
	}
	return rw.send(ctx, ev)
}

// sendTracked also records the object in the tracker once the consumer
// has it; it reads the object before, as the consumer owns it after.
func (rw *RetryWatcher) sendTracked(ctx context.Context, ev watch.Event) error {
	if ev.Type != watch.Bookmark {
		rw.rs.kind.observe(ev.Object)
	}
	s, ok := read(ev)
	if err := rw.send(ctx, ev); err != nil {
		return err
	}
	if ok {
		rw.rs.diff.record(s)
	}
	return nil
}

// ResultChan returns the unbuffered channel of events, closed when the
// watcher stops. A watch.Error event is only ever the last: the reason.
func (rw *RetryWatcher) ResultChan() <-chan watch.Event {
	return rw.result
}

// Stop stops the watcher: the result channel is closed, then Done. Stop
// does not wait and needs no reader of the result channel. It may be
// called more than once, from any goroutine.
func (rw *RetryWatcher) Stop() {
	rw.cancel(errStopped)
}

// LastResourceVersion returns the resource version the next watch would
// start after: the initial one, then that of the last event received (or
// bookmark, or resync). It is safe for concurrent use.
func (rw *RetryWatcher) LastResourceVersion() string {
	if rv := rw.r.Cursor(); rv != "" {
		return rv
	}
	return rw.initialRV // the Resumer has not loaded its store yet
}

// Done returns a channel closed once the watcher's goroutine has ended and
// the result channel is closed.
func (rw *RetryWatcher) Done() <-chan struct{} {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.done == nil {
		rw.done = make(chan struct{})
		if rw.finished {
			close(rw.done)
		}
	}
	return rw.done
}
