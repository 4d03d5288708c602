package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"golang.org/x/time/rate"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/backoff"
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
		label: "k8s.RetryWatcher, WithOpenLimiter",
		fleet: func(cfg config) func(context.Context, cache.WatcherWithContext) (watcher, error) {
			lim := rate.NewLimiter(rate.Limit(cfg.limit), cfg.burst)
			return func(ctx context.Context, w cache.WatcherWithContext) (watcher, error) {
				return k8s.NewRetryWatcherWithContext(ctx, initialRV, w, k8s.WithOpenLimiter(lim))
			}
		},
	},
}

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
