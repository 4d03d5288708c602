package k8s

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// ResyncFunc is called when the resource version has expired (410 Gone /
// Expired), whether at watch open or in the stream. It returns the resource
// version to continue from and the events to deliver before continuing.
//
// It is called on the watcher's goroutine with the watcher's context, and
// should honour it. The replay is delivered as it is, after the resync
// marker, without being checked; its events should be Added (or Modified)
// events of the watched type. An error is classified like any other failure (retried
// by default: the watch is reopened at the expired resource version, fails
// again, and f is called again); mark it with errclass.Permanent to stop the
// watcher instead. A resource version of "" or "0" is a permanent error.
type ResyncFunc func(ctx context.Context) (resourceVersion string, replay []watch.Event, err error)

// ResyncInfo describes a completed resync, for [WithOnResync].
type ResyncInfo struct {
	// Cause is the failure that showed the resource version had expired:
	// an [*EventError] for a 410 in the stream, the error of the watch call
	// for one at open.
	Cause error
	// From is the expired resource version; To the one the resync returned.
	From, To string
	// Replayed is how many events of the ResyncFunc's replay were delivered
	// (the resync marker not counted).
	Replayed int
}

// ResyncAnnotation is the annotation that marks the Bookmark event a
// [RetryWatcher] with [WithResync] delivers right before a resync's replay,
// with the value "true". The marker's object has the resource version the
// watch continues from and no other content than this annotation; its Go
// type is that of the replay's first object, or of the last object
// delivered, or *metav1.PartialObjectMetadata when neither is known, so that
// a consumer asserting the watched type does not panic. Test for it with
// [IsResyncMarker].
//
// The marker says: events may have been missed since the previous event;
// the replay that follows is the state as of the marker's resource version.
// A consumer that needs no such signal can skip Bookmark events, which a
// RetryWatcher delivers for nothing else.
const ResyncAnnotation = "resumable.io/resync"

// IsResyncMarker reports whether ev is the marker a [RetryWatcher] delivers
// before a resync's replay (see [ResyncAnnotation]).
func IsResyncMarker(ev watch.Event) bool {
	if ev.Type != watch.Bookmark || ev.Object == nil {
		return false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return false
	}
	return m.GetAnnotations()[ResyncAnnotation] == "true"
}

// resyncFunc adapts f to the Resumer: it prepends the marker to the replay.
func (rw *RetryWatcher) resyncFunc(f ResyncFunc) stream.ResyncFunc[watch.Event, string] {
	return func(ctx context.Context, _ error, emit func(watch.Event) error) (string, error) {
		rv, replay, err := f(ctx)
		if err != nil {
			return "", err
		}
		if rv == "" || rv == "0" {
			return "", errclass.Permanent(fmt.Errorf("k8s: the ResyncFunc returned resource version %q; it must return the resource version of its list, which the watch continues from", rv))
		}
		typ := rw.rs.lastType
		if len(replay) > 0 && replay[0].Object != nil {
			typ = reflect.TypeOf(replay[0].Object)
		}
		if err := emit(watch.Event{Type: watch.Bookmark, Object: newMarker(typ, rv)}); err != nil {
			return "", err
		}
		for _, ev := range replay {
			if err := emit(ev); err != nil {
				return "", err
			}
		}
		if n := len(replay); n > 0 && replay[n-1].Object != nil {
			rw.rs.lastType = reflect.TypeOf(replay[n-1].Object)
		}
		return rv, nil
	}
}

// newMarker returns an empty object of type typ (a pointer to a struct) with
// only its resource version and the resync annotation set, or a
// PartialObjectMetadata when typ is unknown or unsuitable.
func newMarker(typ reflect.Type, rv string) runtime.Object {
	annotations := map[string]string{ResyncAnnotation: "true"}
	if typ != nil && typ.Kind() == reflect.Pointer && typ.Elem().Kind() == reflect.Struct {
		if obj, ok := reflect.New(typ.Elem()).Interface().(runtime.Object); ok {
			if m, err := meta.Accessor(obj); err == nil {
				m.SetResourceVersion(rv)
				m.SetAnnotations(annotations)
				return obj
			}
		}
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Annotations: annotations}}
}

// resynced is the Resumer's OnResync hook.
func (rw *RetryWatcher) resynced(ev stream.ResyncEvent[string]) {
	cause := ev.Cause
	// The Resumer marks the cause expired; hand the user the failure itself.
	var ee *EventError
	if errors.As(cause, &ee) {
		cause = ee
	} else if u := errors.Unwrap(cause); u != nil && errors.Is(cause, errclass.ErrExpired) && !errors.Is(u, errclass.ErrExpired) {
		cause = u
	}
	replayed := ev.Replayed - 1 // the marker
	if replayed < 0 {
		replayed = 0
	}
	rw.rs.onResync(ResyncInfo{Cause: cause, From: ev.From, To: ev.To, Replayed: replayed})
}

// ListResync returns a [ResyncFunc] that lists through lw (a consistent read
// of the whole collection: ResourceVersion "" and no limit), replays every
// listed item as an Added event, and continues from the list's resource
// version. Deletions that happened while the watch was expired are not
// replayed: a consumer that keeps state should drop what the list lacks
// (the marker before the replay, see [ResyncAnnotation], says when).
func ListResync(lw cache.ListerWatcher) ResyncFunc {
	l := cache.ToListerWithContext(lw)
	return func(ctx context.Context) (string, []watch.Event, error) {
		list, err := l.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: ""})
		if err != nil {
			return "", nil, err
		}
		lm, err := meta.ListAccessor(list)
		if err != nil {
			return "", nil, errclass.Permanent(fmt.Errorf("k8s: ListResync: the list is not a list: %w", err))
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return "", nil, errclass.Permanent(fmt.Errorf("k8s: ListResync: %w", err))
		}
		events := make([]watch.Event, len(items))
		for i, item := range items {
			events[i] = watch.Event{Type: watch.Added, Object: item}
		}
		return lm.GetResourceVersion(), events, nil
	}
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
