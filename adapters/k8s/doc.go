// Package k8s is a drop-in replacement for client-go's
// watchtools.RetryWatcher (k8s.io/client-go/tools/watch), built on the
// [stream.Resumer] of this module. Swapping is one import and one
// constructor:
//
//	import "github.com/resumable-go/resumable/adapters/k8s"
//
//	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw) // before
//	rw, err := k8s.NewRetryWatcherWithContext(ctx, rv, lw)        // after
//
// The watcher is then used exactly as before (ResultChan, Stop, Done; it is
// a watch.Interface, so watchtools.UntilWithoutRetry takes it). A file that
// uses nothing else of watchtools can instead keep its code and import this
// package under the name watchtools.
//
// [RetryWatcher] behaves as client-go v0.37's, case by case: an initial
// resource version of "" or "0" is refused; each watch asks for the events
// after the last resource version, with bookmarks, and the resource version
// advances once the consumer received an event; failures to open are
// retried except Forbidden and Unauthorized, which arrive as one
// watch.Error event before the watcher stops; an event without a usable
// resource version stops it, and so does a watch.Error with code 410, which
// is forwarded; other watch.Error events are retried after their
// RetryAfterSeconds (at most ten minutes); two watches start at least one
// second apart. ResultChan is unbuffered and closed on stop, then Done; Stop never
// waits for the consumer; each watcher runs one goroutine of its own.
//
// Beyond client-go, opt-in:
//   - [WithResync]: survive "resource version too old". With it, a 410 Gone
//     or Expired, at open or in the stream, calls the [ResyncFunc]
//     ([WatchListResync] streams the state, [ListResync] lists it page by
//     page), delivers its replay between a start marker ([IsResyncMarker])
//     and an end marker ([IsResyncEnd]), and continues from the resource
//     version it returned, a second after the previous watch at the
//     earliest. A resync that fails half-way is retried, and the consumer
//     sees a new start marker and the replay again. Without it a
//     RetryWatcher reopens an expired resource version once a second forever
//     when the 410 comes at open, as client-go's does.
//   - [WithResyncDiff]: a resync delivers only what changed — Added,
//     Modified, and Deleted for what vanished — instead of the whole state.
//   - [WithIdleTimeout]: reopen a watch that went silent (bookmarks count).
//   - [WithOpenLimiter]: share a budget of watch opens between watchers.
//   - [WithBackoff], [WithClassifier]: wait longer between failures, stop on
//     errors client-go retries or retry errors it stops on.
//   - [NewRetryWatcherFromNow]: start from the current resource version.
//   - [Until]: client-go's watchtools.Until over this RetryWatcher.
//   - [WithLogger]: zap logging (client-go's uses klog).
//
// The long form, with the contract case by case, the resync's markers and
// diff, its memory and how WatchListResync decides, is docs/kubernetes.md
// in the repository.
//
// A failure that stops the watcher for a reason client-go's never meets (a
// backoff policy that gives up, a failure your classifier says to give up
// on) is delivered like the others: as one last watch.Error event, carrying
// the failure's Status when it has one and an InternalError otherwise.
//
// The building blocks are exported so that you can compose your own
// [stream.Resumer] over a watch (to keep the resource version in a durable
// [cursor.Store], say): [WatchSource] is the [stream.Source],
// [ResourceVersion] the [cursor.Extractor], and [StatusClassifier] the
// [errclass.Classifier] with client-go's rules.
//
// The per-event path allocates nothing and hands each event from the watch
// to the consumer on the watcher's one goroutine, without a further
// channel.
package k8s
