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
	"github.com/resumable-go/resumable/errclass"
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
	if err := checkInitialRV(initialResourceVersion); err != nil {
		return nil, err
	}
	if watcherClient == nil {
		return nil, errNilClient
	}
	return NewRetryWatcherWithContext(context.Background(), initialResourceVersion, cache.ToWatcherWithContext(watcherClient), opts...)
}

var errDiffWithoutResync = errors.New("k8s: NewRetryWatcherWithContext: WithResyncDiff needs WithResync")

var errNilClient = errors.New("k8s: the watcher client is nil; pass a cache.ListWatch or a clientset's resource interface")

func checkInitialRV(rv string) error {
	switch rv {
	case "", "0":
		// client-go's message, word for word.
		return fmt.Errorf("initial RV %q is not supported due to issues with underlying WATCH", rv)
	}
	return nil
}

// NewRetryWatcherWithContext makes a RetryWatcher that watches through
// watcherClient the events after initialResourceVersion, on one goroutine
// of its own, until Stop, the end of ctx, or a failure it does not retry.
// initialResourceVersion "" and "0" are refused with client-go's error (use
// [NewRetryWatcherFromNow]); so are a nil watcherClient and a bad option.
func NewRetryWatcherWithContext(ctx context.Context, initialResourceVersion string, watcherClient cache.WatcherWithContext, opts ...Option) (*RetryWatcher, error) {
	if err := checkInitialRV(initialResourceVersion); err != nil {
		return nil, err
	}
	if watcherClient == nil {
		return nil, errNilClient
	}
	cfg := newConfig(opts)
	rw := &RetryWatcher{
		result:    make(chan watch.Event),
		log:       cfg.logger,
		initialRV: initialResourceVersion,
	}
	sopts := []stream.Option{
		stream.WithMinRestartDelay(cfg.minRestart),
		stream.WithBackoff(cfg.policy),
		stream.WithLogger(cfg.logger),
		stream.WithClassifier(newClassifier(cfg.classifier, cfg.resync != nil)),
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
			if err := rw.rs.know(cfg.known); err != nil {
				return nil, err
			}
			handle = rw.sendTracked
		}
	case cfg.diff:
		return nil, errDiffWithoutResync
	}
	rw.src.w, rw.src.quiet = watcherClient, cfg.idle <= 0
	r, err := stream.New[watch.Event, string](&rw.src, ResourceVersion, cursor.NewMemory(initialResourceVersion), sopts...)
	if err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherWithContext: %w", err)
	}
	rw.r = r
	ctx, rw.cancel = context.WithCancelCause(ctx)
	go rw.run(ctx, handle)
	return rw, nil
}

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

// newClassifier: the user's, then the errclass markers, then the
// Kubernetes rules; the Resumer resolves the rest with errclass.Default.
func newClassifier(user errclass.Classifier, resync bool) errclass.Classifier {
	if user == nil {
		if resync {
			return resyncClassifier
		}
		return defaultClassifier
	}
	return errclass.Chain(user, errclass.Markers(), StatusClassifier(resync))
}

// Shared by watchers without a classifier of their own.
var (
	defaultClassifier = errclass.Chain(errclass.Markers(), StatusClassifier(false))
	resyncClassifier  = errclass.Chain(errclass.Markers(), StatusClassifier(true))
)
