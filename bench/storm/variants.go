package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"golang.org/x/time/rate"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// watcher is what the benchmark needs of a watcher: both RetryWatchers have
// these methods.
type watcher interface {
	Stop()
	Done() <-chan struct{}
}

// variant is one kind of watcher under test.
type variant struct {
	key   string // the CSV's name for it
	label string // the legend's
	// fleet returns the function that starts one watcher of the variant;
	// the watchers it starts share what they share (a rate limiter).
	fleet func(cfg config) func(ctx context.Context, w cache.WatcherWithContext) (watcher, error)
}

// initialRV is the resource version every watcher starts after.
const initialRV = "1"

// variants are the four watchers compared, in the order they run.
var variants = []variant{
	{
		key:   "client-go",
		label: "client-go RetryWatcher",
		fleet: func(config) func(context.Context, cache.WatcherWithContext) (watcher, error) {
			return func(ctx context.Context, w cache.WatcherWithContext) (watcher, error) {
				return watchtools.NewRetryWatcherWithContext(ctx, initialRV, w)
			}
		},
	},
	{
		key:   "ours-default",
		label: "k8s.RetryWatcher, defaults",
		fleet: func(config) func(context.Context, cache.WatcherWithContext) (watcher, error) {
			return func(ctx context.Context, w cache.WatcherWithContext) (watcher, error) {
				return k8s.NewRetryWatcherWithContext(ctx, initialRV, w)
			}
		},
	},
	{
		key:   "ours-backoff",
		label: "k8s.RetryWatcher, backoff.Default()",
		fleet: func(config) func(context.Context, cache.WatcherWithContext) (watcher, error) {
			return func(ctx context.Context, w cache.WatcherWithContext) (watcher, error) {
				return k8s.NewRetryWatcherWithContext(ctx, initialRV, w, k8s.WithBackoff(backoff.Default()))
			}
		},
	},
	{
		key:   "ours-limiter",
		label: "shared rate.Limiter",
		fleet: func(cfg config) func(context.Context, cache.WatcherWithContext) (watcher, error) {
			lim := rate.NewLimiter(rate.Limit(cfg.limit), cfg.burst)
			return func(ctx context.Context, w cache.WatcherWithContext) (watcher, error) {
				return newLimitedWatcher(ctx, w, lim)
			}
		},
	},
}

// limitedWatcher is the Kubernetes adapter's RetryWatcher with its defaults
// plus a shared open limiter, composed from the adapter's parts exactly as
// the adapter composes them (k8s.WithOpenLimiter is not on main yet): a
// WatchSource, the resource version extractor, the Status classifier, a one
// second minimum restart delay, no backoff step, and
// stream.WithOpenLimiter. It drops the events (the server sends none).
type limitedWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func newLimitedWatcher(ctx context.Context, w cache.WatcherWithContext, lim stream.Limiter) (*limitedWatcher, error) {
	r, err := stream.New(k8s.WatchSource(w), k8s.ResourceVersion, cursor.NewMemory(initialRV),
		stream.WithMinRestartDelay(k8s.DefaultMinRestartDelay),
		stream.WithBackoff(backoff.None()),
		stream.WithClassifier(k8s.StatusClassifier{}),
		stream.WithCheckpointEvery(0),
		stream.WithOpenLimiter(lim))
	if err != nil {
		return nil, fmt.Errorf("storm: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	lw := &limitedWatcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(lw.done)
		_ = r.Run(ctx, func(context.Context, watch.Event) error { return nil })
	}()
	return lw, nil
}

// Stop stops the watcher; Done is closed once its goroutine has ended.
func (lw *limitedWatcher) Stop() { lw.cancel() }

// Done returns a channel closed once the watcher has stopped.
func (lw *limitedWatcher) Done() <-chan struct{} { return lw.done }

// stopAll stops every watcher and waits for each to be done, or returns an
// error after timeout.
func stopAll(ws []watcher, timeout time.Duration) error {
	for _, w := range ws {
		w.Stop()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i, w := range ws {
		select {
		case <-w.Done():
		case <-deadline.C:
			return fmt.Errorf("%w: %d of %d watchers still running %v after Stop", errTimeout, len(ws)-i, len(ws), timeout)
		}
	}
	return nil
}
