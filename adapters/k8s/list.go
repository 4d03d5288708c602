package k8s

import (
	"context"
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/resumable-go/resumable/errclass"
)

// pageSize is the number of objects per page of a [ListResync]: 500, as
// client-go's informers.
const pageSize = 500

// watchListTimeoutSeconds bounds a WatchList request (TimeoutSeconds): a server
// that ignores SendInitialEvents and sends nothing cannot hold a resync
// longer. It is the longest of client-go's reflector's watch timeouts.
const watchListTimeoutSeconds = 10 * 60

// lister is the ResyncFunc of ListResync.
type lister struct {
	l   cache.ListerWithContext
	err error // a bad argument, returned by every call
}

func newLister(name string, lw cache.ListerWatcher) *lister {
	if lw == nil {
		return &lister{err: errclass.Permanent(fmt.Errorf("k8s: %s: the ListerWatcher is nil", name))}
	}
	return &lister{l: cache.ToListerWithContext(lw)}
}

// ListResync returns a [ResyncFunc] that lists through lw page by page and
// emits every listed object as an Added event, one page in memory at a
// time, then continues from the list's resource version.
//
// Its first page is listed "not older than" the resource version that
// expired (ResourceVersionMatch NotOlderThan), which the API
// server's watch cache serves without reading etcd; only if that answers
// 410 Gone / Expired or "too large resource version" does it fall back to
// a consistent read (ResourceVersion ""), which reads etcd. A list of the
// whole collection at once from etcd, repeated by every watcher after an
// API server restart, is what took down control planes in
// kubernetes/kubernetes#86483. Each page asks for 500 objects, as
// client-go's informers do, and continues with the token of the previous
// one. When a
// continue token has expired (the list took longer than the server keeps
// one, five minutes by default), it starts its replay over once, from the
// first page (the consumer sees a new start marker); a second expiry fails
// the resync, which is retried after the usual delay.
//
// Objects deleted while the watch was expired are not in the list: with
// [WithResyncDiff] the watcher delivers Deleted events for them; without
// it, replace your state with the replay (see [IsResyncMarker]).
// [WatchListResync] streams the state instead of listing it.
func ListResync(lw cache.ListerWatcher) ResyncFunc {
	return newLister("ListResync", lw).resync
}

func (l *lister) resync(ctx context.Context, from string, emit func(watch.Event) error) (string, error) {
	if l.err != nil {
		return "", l.err
	}
	first := metav1.ListOptions{Limit: pageSize}
	if from != "" {
		first.ResourceVersion = from
		first.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	opts := first
	restarted := false
	for {
		list, err := l.l.ListWithContext(ctx, opts)
		switch {
		case err == nil:
		case opts.Continue == "" && opts.ResourceVersion != "" && (isExpired(err) || isTooLargeResourceVersion(err)):
			// The watch cache cannot serve it: read etcd.
			opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
			first = opts
			continue
		case opts.Continue != "" && isExpired(err) && !restarted:
			restarted = true
			if err := emit(restartMarker(from)); err != nil {
				return "", err
			}
			opts = first
			continue
		case opts.Continue != "" && isExpired(err):
			// Not the resync's own expiry, which would stop the watcher:
			// retried after the usual delay.
			return "", errclass.RetryAfter(fmt.Errorf("k8s: ListResync: the list's continue token expired twice: %w", err), 0)
		default:
			return "", err
		}
		rv, cont, err := emitPage(list, emit)
		if err != nil {
			return "", err
		}
		if cont == "" {
			return rv, nil
		}
		// A continued list takes no resource version: the token has it.
		opts = metav1.ListOptions{Limit: pageSize, Continue: cont}
	}
}

// emitPage emits the items of one page as Added events, each in its own
// allocation so that a consumer keeping one object does not keep the page,
// and returns the page's resource version and continue token.
func emitPage(list runtime.Object, emit func(watch.Event) error) (rv, cont string, err error) {
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return "", "", errclass.Permanent(fmt.Errorf("k8s: ListResync: the list is not a list: %w", err))
	}
	rv, cont = lm.GetResourceVersion(), lm.GetContinue()
	var emitErr error
	err = meta.EachListItemWithAlloc(list, func(obj runtime.Object) error {
		emitErr = emit(watch.Event{Type: watch.Added, Object: obj})
		return emitErr
	})
	switch {
	case emitErr != nil:
		return "", "", emitErr
	case err != nil:
		return "", "", errclass.Permanent(fmt.Errorf("k8s: ListResync: %w", err))
	}
	return rv, cont, nil
}

// isExpired reports whether err is 410 Gone or Expired.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeResourceVersion reports whether err says the resource version
// asked for is newer than the server knows (an etcd restored from a
// backup, a server behind its peers), as client-go's reflector tells it.
func isTooLargeResourceVersion(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// WatchListResync returns a [ResyncFunc] that streams the state of the
// collection with a WatchList request (a watch with SendInitialEvents,
// ResourceVersionMatch NotOlderThan and AllowWatchBookmarks, from the
// resource version that expired): the server sends each
// object as an Added event, from its watch cache, then a Bookmark annotated
// k8s.io/initial-events-end at the resource version the watch continues
// from. Neither side holds the whole list: it costs the least memory of
// all, on the client and on the server.
//
// It falls back to [ListResync] for the resync at hand when the
// server does not serve it:
//   - lw says so, as client-go's fake clients do
//     (watchlist.DoesClientNotSupportWatchListSemantics, the test client-go's
//     reflector makes);
//   - the watch call fails, except with 410 Gone / Expired or "too large
//     resource version" from the expired resource version, which it retries
//     once from "" (a consistent read), as the reflector does;
//   - the stream reports an error, or ends, before the end bookmark;
//   - the stream shows the server ignored SendInitialEvents (an older
//     server, or the WatchList feature turned off): a Bookmark without the
//     annotation, or a Modified or Deleted event, before the end bookmark.
//
// Like client-go's reflector, which falls back to a list whenever its
// WatchList attempt fails, it tries WatchList first at every resync,
// except after a server refused the request as invalid (400, 422) or
// showed it ignores SendInitialEvents: then it lists for the rest of its
// life. A fallback after some objects were emitted starts the replay over
// (the consumer sees a new start marker). The request carries
// TimeoutSeconds of ten minutes, so a server that ignores it and sends
// nothing cannot hold a resync forever.
func WatchListResync(lw cache.ListerWatcher) ResyncFunc {
	wl := &watchLister{list: newLister("WatchListResync", lw)}
	if lw != nil {
		wl.w = cache.ToWatcherWithContext(lw)
		wl.unsupported.Store(watchlist.DoesClientNotSupportWatchListSemantics(lw))
	}
	return wl.resync
}

// watchLister is the ResyncFunc of WatchListResync.
type watchLister struct {
	w           cache.WatcherWithContext
	list        *lister
	unsupported atomic.Bool // the server showed it does not serve WatchList
}

func (wl *watchLister) resync(ctx context.Context, from string, emit func(watch.Event) error) (string, error) {
	if wl.list.err != nil || wl.unsupported.Load() {
		return wl.list.resync(ctx, from, emit)
	}
	rv, next, err := wl.watchList(ctx, from, emit)
	if err == nil && next == retryConsistent {
		rv, next, err = wl.watchList(ctx, "", emit)
	}
	switch {
	case err != nil:
		return "", err
	case next == streamed:
		return rv, nil
	}
	return wl.list.resync(ctx, from, emit)
}

// watchListEnd is how a WatchList request ended.
type watchListEnd int

const (
	streamed        watchListEnd = iota // every initial event arrived
	retryConsistent                     // the resource version asked for cannot be served: ask from ""
	fallBack                            // list instead
)

// watchList runs one WatchList request from the resource version from. It
// returns the resource version of the end bookmark when every initial
// event arrived, and what to do next otherwise. An error (ctx's, or
// emit's) is one the resync must return.
func (wl *watchLister) watchList(ctx context.Context, from string, emit func(watch.Event) error) (string, watchListEnd, error) {
	timeout := int64(watchListTimeoutSeconds)
	sendInitialEvents := true
	w, err := wl.w.WatchWithContext(ctx, metav1.ListOptions{
		ResourceVersion:      from,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    &sendInitialEvents,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       &timeout,
	})
	if err != nil {
		if w != nil {
			w.Stop()
		}
		return "", wl.refused(from, err), ctx.Err()
	}
	if w == nil {
		return "", fallBack, nil
	}
	defer w.Stop()
	emitted := false
	// giveUp ends the request without the end bookmark: a replay begun
	// starts over.
	giveUp := func(next watchListEnd) (string, watchListEnd, error) {
		if emitted {
			if err := emit(restartMarker(from)); err != nil {
				return "", fallBack, err
			}
		}
		return "", next, nil
	}
	ch := w.ResultChan()
	for {
		var (
			ev watch.Event
			ok bool
		)
		select {
		case ev, ok = <-ch:
		case <-ctx.Done():
			return "", fallBack, ctx.Err()
		}
		switch {
		case !ok:
			return giveUp(fallBack)
		case ev.Type == watch.Added:
			if err := emit(ev); err != nil {
				return "", fallBack, err
			}
			emitted = true
		case ev.Type == watch.Bookmark && isInitialEventsEnd(ev):
			m, err := meta.Accessor(ev.Object)
			if err != nil || m.GetResourceVersion() == "" {
				return giveUp(fallBack)
			}
			return m.GetResourceVersion(), streamed, nil
		case ev.Type == watch.Error:
			return giveUp(wl.refused(from, apierrors.FromObject(ev.Object)))
		default:
			// A plain bookmark, or a change, before the end bookmark: the
			// server is watching, not sending initial events.
			wl.unsupported.Store(true)
			return giveUp(fallBack)
		}
	}
}

// refused decides what follows a WatchList request from from that failed
// with err.
func (wl *watchLister) refused(from string, err error) watchListEnd {
	switch {
	case from != "" && (isExpired(err) || isTooLargeResourceVersion(err)):
		return retryConsistent
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
		// The server does not know the request (the WatchList feature is
		// off, or it predates it).
		wl.unsupported.Store(true)
	}
	return fallBack
}

func isInitialEventsEnd(ev watch.Event) bool {
	return isAnnotatedBookmark(ev, metav1.InitialEventsAnnotationKey)
}

// NewRetryWatcherFromNow lists through lw only to learn the current resource
// version (a consistent read limited to one item: the list's resource
// version is what matters), then watches from it as
// [NewRetryWatcherWithContext] does, with ctx bounding both. Events from
// before the call are not delivered; to get the current state too, list
// yourself and start from the list's resource version.
func NewRetryWatcherFromNow(ctx context.Context, lw cache.ListerWatcher, opts ...Option) (*RetryWatcher, error) {
	if lw == nil {
		return nil, errNilClient
	}
	lwc := cache.ToListerWatcherWithContext(lw)
	list, err := lwc.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: listing to learn the current resource version: %w", err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: the list is not a list: %w", err)
	}
	rv := lm.GetResourceVersion()
	if err := checkInitialRV(rv); err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: the list returned no usable resource version: %w", err)
	}
	return NewRetryWatcherWithContext(ctx, rv, lwc, opts...)
}
