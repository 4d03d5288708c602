package k8s

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until is client-go's watchtools.Until over a [RetryWatcher], same
// signature and results: the last event seen and a condition's error,
// watchtools.ErrWatchClosed when the watcher stopped first, or the
// constructor's error. When ctx ends the error satisfies wait.Interrupted
// and matches ctx's error with errors.Is. Unlike client-go's, it returns
// only once the watcher's goroutine has ended. For options, make the
// watcher with [NewRetryWatcherWithContext] and call
// watchtools.UntilWithoutRetry.
func Until(ctx context.Context, initialResourceVersion string, watcherClient cache.Watcher, conditions ...watchtools.ConditionFunc) (*watch.Event, error) {
	var w cache.WatcherWithContext
	if watcherClient != nil {
		w = cache.ToWatcherWithContext(watcherClient)
	}
	rw, err := start(ctx, site{"k8s: Until", "watcherClient"}, initialResourceVersion, w, nil)
	if err != nil {
		return nil, err
	}
	last, err := watchtools.UntilWithoutRetry(ctx, rw, conditions...) // stops rw
	<-rw.Done()
	if ctxErr := ctx.Err(); ctxErr != nil && (wait.Interrupted(err) || errors.Is(err, watchtools.ErrWatchClosed)) {
		// UntilWithoutRetry's interruption carries no cause, and the
		// watcher may have closed its channel because ctx ended.
		err = wait.ErrorInterrupted(ctxErr)
	}
	return last, err
}
