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
	"github.com/resumable-go/resumable/internal/badarg"
)

// pageSize is client-go's informers'.
const pageSize = 500

// watchListTimeoutSeconds bounds a WatchList request, so that a server
// that ignores SendInitialEvents cannot hold a resync forever.
const watchListTimeoutSeconds = 10 * 60

type lister struct {
	l   cache.ListerWithContext
	err error // a bad argument, returned by every call
}

func newLister(name string, lw cache.ListerWatcher) *lister {
	if lw == nil {
		return &lister{err: errclass.Permanent(badarg.New("k8s: "+name, "lw", nil, "must not be nil"))}
	}
	return &lister{l: cache.ToListerWithContext(lw)}
}

// ListResync returns a [ResyncFunc] that lists through lw in pages of 500
// and emits every object as an Added event, one page in memory at a time.
// The first page is asked "not older than" the expired resource version,
// from the API server's watch cache; only on 410 or "too large resource
// version" does it read etcd (ResourceVersion ""). An expired continue
// token starts the replay over once (a new start marker); a second fails
// the resync, which is retried. See docs/kubernetes.md in the repository.
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
			// Not an expiry, which would stop the watcher: retried.
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

// emitPage emits one page's items, each in its own allocation so that a
// consumer keeping one object does not keep the page.
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

func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeResourceVersion: the resource version is newer than the
// server knows (a server behind its peers), as client-go's reflector tells.
func isTooLargeResourceVersion(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// WatchListResync returns a [ResyncFunc] that streams the state with a
// WatchList request (SendInitialEvents, from the expired resource version):
// the server sends each object as an Added event from its watch cache, then
// a Bookmark annotated k8s.io/initial-events-end at the resource version to
// continue from. Neither side holds the whole list.
//
// When the server or lw does not serve WatchList, or the request fails, it
// falls back to [ListResync] (a new start marker if objects were emitted);
// after a 400 or 422, or a server that ignored SendInitialEvents, it lists
// at every later resync. The cases: docs/kubernetes.md in the repository.
func WatchListResync(lw cache.ListerWatcher) ResyncFunc {
	wl := &watchLister{list: newLister("WatchListResync", lw)}
	if lw != nil {
		wl.w = cache.ToWatcherWithContext(lw)
		wl.unsupported.Store(watchlist.DoesClientNotSupportWatchListSemantics(lw))
	}
	return wl.resync
}

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

type watchListEnd int

const (
	streamed        watchListEnd = iota // every initial event arrived
	retryConsistent                     // the resource version asked for cannot be served: ask from ""
	fallBack                            // list instead
)

// watchList runs one WatchList request. An error (ctx's, or emit's) is one
// the resync must return.
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
	// giveUp: without the end bookmark, a replay begun starts over.
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
			// The server is watching, not sending initial events.
			wl.unsupported.Store(true)
			return giveUp(fallBack)
		}
	}
}

// refused decides what follows a failed WatchList request.
func (wl *watchLister) refused(from string, err error) watchListEnd {
	switch {
	case from != "" && (isExpired(err) || isTooLargeResourceVersion(err)):
		return retryConsistent
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
		// The WatchList feature is off, or the server predates it.
		wl.unsupported.Store(true)
	}
	return fallBack
}

func isInitialEventsEnd(ev watch.Event) bool {
	return isAnnotatedBookmark(ev, metav1.InitialEventsAnnotationKey)
}

// NewRetryWatcherFromNow lists one item through lw to learn the current
// resource version, then watches from it as [NewRetryWatcherWithContext]
// does, ctx bounding both. To get the current state too, list yourself and
// start from the list's resource version.
func NewRetryWatcherFromNow(ctx context.Context, lw cache.ListerWatcher, opts ...Option) (*RetryWatcher, error) {
	at := site{"k8s: NewRetryWatcherFromNow", "lw"}
	var lwc cache.ListerWatcherWithContext
	var w cache.WatcherWithContext
	if lw != nil {
		lwc = cache.ToListerWatcherWithContext(lw)
		w = lwc
	}
	// Every argument is checked before the list, at a stand-in version.
	if _, _, err := build(at, "1", w, opts); err != nil {
		return nil, err
	}
	list, err := lwc.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: listing to learn the current resource version: %w", err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: the list is not a list: %w", err)
	}
	rv := lm.GetResourceVersion()
	if rv == "" || rv == "0" {
		return nil, fmt.Errorf("k8s: NewRetryWatcherFromNow: the list returned resource version %q, from which no watch can start", rv)
	}
	return start(ctx, at, rv, lwc, opts)
}
