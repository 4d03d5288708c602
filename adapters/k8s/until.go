package k8s

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until is client-go's watchtools.Until over a [RetryWatcher], with the same
// signature: it watches through watcherClient from initialResourceVersion
// and hands the watcher to watchtools.UntilWithoutRetry, which feeds each
// event to the conditions in turn, moving to the next condition when one
// returns true, and returns the last event seen.
//
// It returns
//   - the event that satisfied the last condition, and nil;
//   - the event and the error of a condition that failed;
//   - watchtools.ErrWatchClosed when the watcher stopped first (after a
//     watch.Error event it does not retry, which the conditions saw);
//   - when ctx ends, an error for which wait.Interrupted reports true (as
//     client-go's) and that also matches ctx's error with errors.Is;
//   - the constructor's error for an initialResourceVersion of "" or "0" or
//     a nil watcherClient.
//
// Unlike client-go's, it returns only once the watcher's goroutine has
// ended. To pass options (a resync, say), make the watcher with
// [NewRetryWatcherWithContext] and hand it to watchtools.UntilWithoutRetry.
func Until(ctx context.Context, initialResourceVersion string, watcherClient cache.Watcher, conditions ...watchtools.ConditionFunc) (*watch.Event, error) {
	if watcherClient == nil {
		return nil, errNilClient
	}
	rw, err := NewRetryWatcherWithContext(ctx, initialResourceVersion, cache.ToWatcherWithContext(watcherClient))
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
