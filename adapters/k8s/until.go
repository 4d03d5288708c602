package k8s

import (
	"context"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Until is client-go's watchtools.Until over a [RetryWatcher]: it watches
// through watcherClient from initialResourceVersion and feeds each event to
// the conditions in turn, moving to the next condition when one returns
// true, and returns the last event seen.
//
// It returns
//   - the event that satisfied the last condition, and nil;
//   - the event and the error of a condition that failed;
//   - watchtools.ErrWatchClosed when the watcher stopped first (after a
//     watch.Error event it does not retry, which the conditions saw);
//   - when ctx ends, an error for which wait.Interrupted reports true (as
//     client-go's) and that also matches ctx's error with errors.Is;
//   - the constructor's error for an initialResourceVersion of "" or "0".
//
// Unlike client-go's, it returns only once the watcher's goroutine has
// ended. To pass options (a resync, say), make the watcher with
// [NewRetryWatcherWithContext] and hand it to watchtools.UntilWithoutRetry.
func Until(ctx context.Context, initialResourceVersion string, watcherClient cache.WatcherWithContext, conditions ...watchtools.ConditionFunc) (*watch.Event, error) {
	rw, err := NewRetryWatcherWithContext(ctx, initialResourceVersion, watcherClient)
	if err != nil {
		return nil, err
	}
	defer func() {
		rw.Stop()
		<-rw.Done()
	}()
	ch := rw.ResultChan()
	var last *watch.Event
	for _, condition := range conditions {
		// A condition may already hold for the event the previous one
		// stopped at.
		if last != nil {
			done, err := condition(*last)
			if err != nil {
				return last, err
			}
			if done {
				continue
			}
		}
	next:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					if ctx.Err() != nil {
						// The watcher stopped because ctx ended.
						return last, wait.ErrorInterrupted(ctx.Err())
					}
					return last, watchtools.ErrWatchClosed
				}
				last = &ev
				done, err := condition(ev)
				if err != nil {
					return last, err
				}
				if done {
					break next
				}
			case <-ctx.Done():
				return last, wait.ErrorInterrupted(ctx.Err())
			}
		}
	}
	return last, nil
}
