// Package k8s is a drop-in replacement for client-go's
// watchtools.RetryWatcher (k8s.io/client-go/tools/watch), built on the
// [stream.Resumer] of this module. Swapping is one import and one
// constructor:
//
//	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw) // before
//	rw, err := k8s.NewRetryWatcherWithContext(ctx, rv, lw)        // after
//
// The watcher is then used exactly as before (ResultChan, Stop, Done; it is
// a watch.Interface). With default options [RetryWatcher] behaves as
// client-go v0.37's, case by case: an initial resource version of "" or "0"
// is refused; Forbidden and Unauthorized arrive as one watch.Error event,
// then the watcher stops; a watch.Error with code 410 is forwarded and
// stops it; other failures are retried; two watches start at least one
// second apart; ResultChan is unbuffered. A failure that stops the watcher
// for a reason client-go's never meets (a backoff that gives up, your
// classifier's Fail) is delivered the same way, as one last watch.Error.
//
// Beyond client-go, opt-in: [WithResync] (survive "resource version too
// old", with [WatchListResync] or [ListResync]), [WithResyncDiff],
// [WithIdleTimeout], [WithOpenLimiter], [WithBackoff], [WithClassifier],
// [WithLogger], [NewRetryWatcherFromNow] and [Until].
//
// The building blocks compose a [stream.Resumer] of your own (to keep the
// resource version in a durable [cursor.Store], say): [WatchSource] is the
// [stream.Source], which marks its errors where they arise (so
// [errclass.Default] decides as client-go does), and [ResourceVersion] the
// [cursor.Extractor]; [StatusClassifier] gives client-go's rules exactly.
// Every constructor and option reports a bad argument with an error
// matching [stream.ErrInvalidOption] that names it, all at once.
//
// The contract case by case, the resync's markers and diff, memory and
// how WatchListResync decides: docs/kubernetes.md in the repository.
package k8s
