package k8s

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// ResyncFunc is called when the resource version has expired (410 Gone /
// Expired), whether at watch open or in the stream. It streams the state of
// the collection through emit, one event per object, and returns the
// resource version the watch continues from: that of its list.
//
// emit hands the event to the consumer (the watcher delivers it on
// ResultChan) and returns an error only when the watcher is stopping; f
// must then return that error at once. Nothing holds the whole replay: f
// should emit as it reads, page by page.
//
// It is called on the watcher's goroutine with the watcher's context, which
// it should honour, and from, the resource version that expired. Without
// [WithResyncDiff] its events are delivered as they are, between the two
// resync markers (see [IsResyncMarker]); they should be
// Added events of the watched type. With it they are the listing the
// watcher compares with what it delivered (see [WithResyncDiff]). To start
// its replay over (its list's continue token expired, say) f emits a resync
// marker, an event for which [IsResyncMarker] reports true: the watcher then
// delivers a new start marker and the replay that follows.
//
// An error is classified like any other failure: retried by default (the
// watch is reopened at the expired resource version after the usual delay,
// fails again, and f is called again: the consumer sees a new start marker
// and the whole replay again); mark it with errclass.Permanent to stop the
// watcher instead. An error the classifier calls expired (a 410) stops the
// watcher. A resource version of "" or "0" is a permanent error.
type ResyncFunc func(ctx context.Context, from string, emit func(watch.Event) error) (resourceVersion string, err error)

// resyncAnnotation and resyncEndAnnotation, with the value "true", mark the
// Bookmark events a [RetryWatcher] delivers before and after a resync's
// replay.
const (
	resyncAnnotation    = "resumable.io/resync"
	resyncEndAnnotation = "resumable.io/resync-end"
)

// IsResyncMarker reports whether ev is the start marker a [RetryWatcher]
// with [WithResync] delivers before a resync's replay: a Bookmark annotated
// resumable.io/resync: "true", carrying the resource version that expired
// (the last the consumer received). [IsResyncEnd] tells the end marker,
// which carries the one the watch continues from. A marker's object has no
// other content; its Go type is that of the objects watched, or
// *metav1.PartialObjectMetadata when none is known, so that a consumer
// asserting the watched type does not panic.
//
// The start marker says: events may have been missed since the previous
// event. Without [WithResyncDiff], the events between the two markers are
// the whole state as of the end marker's resource version (replace your
// state with them); with it, they are the changes that bring what you
// received up to that state (apply them as usual). A start marker that
// comes before the end marker of the previous one means that replay was
// cut short (the resync failed half-way, or restarted its list): forget
// what it delivered and start over. A consumer that needs none of this can
// skip Bookmark events, which a RetryWatcher delivers for nothing else.
func IsResyncMarker(ev watch.Event) bool {
	return isAnnotatedBookmark(ev, resyncAnnotation)
}

// IsResyncEnd reports whether ev is the end marker a [RetryWatcher]
// delivers after a resync's replay (a Bookmark annotated
// resumable.io/resync-end: "true", see [IsResyncMarker]); its resource
// version is the one the watch continues from.
func IsResyncEnd(ev watch.Event) bool {
	return isAnnotatedBookmark(ev, resyncEndAnnotation)
}

func isAnnotatedBookmark(ev watch.Event, annotation string) bool {
	if ev.Type != watch.Bookmark || ev.Object == nil {
		return false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return false
	}
	return m.GetAnnotations()[annotation] == "true"
}

// resyncState is what a watcher with a resync hook keeps. Only the
// watcher's goroutine uses it.
type resyncState struct {
	f        ResyncFunc
	diff     *tracker // nil without WithResyncDiff
	kind     objectKind
	replayed int // events the last completed resync delivered, for OnResync hooks
}

// objectKind is the Go type and the group, version and kind of the objects
// watched, taken from the last one delivered: the markers and the Deleted
// events of a diff are made of it.
type objectKind struct {
	typ reflect.Type
	gvk schema.GroupVersionKind
}

// observe records the kind of obj. It reads obj only when its Go type
// changed, which after the first event is never, and must be called before
// the object is handed over (the consumer owns it afterwards).
func (k *objectKind) observe(obj runtime.Object) {
	if obj == nil {
		return
	}
	if t := reflect.TypeOf(obj); t != k.typ {
		k.typ = t
		k.gvk = obj.GetObjectKind().GroupVersionKind()
	}
}

// new returns an empty object of the kind, or a PartialObjectMetadata when
// the kind is unknown or not a pointer to a struct with object metadata.
func (k objectKind) new() (runtime.Object, metav1.Object) {
	if k.typ != nil && k.typ.Kind() == reflect.Pointer && k.typ.Elem().Kind() == reflect.Struct {
		if obj, ok := reflect.New(k.typ.Elem()).Interface().(runtime.Object); ok {
			if m, err := meta.Accessor(obj); err == nil {
				if !k.gvk.Empty() {
					obj.GetObjectKind().SetGroupVersionKind(k.gvk)
				}
				return obj, m
			}
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	return obj, obj
}

// marker returns a Bookmark of the kind at rv with annotation set to "true".
func (k objectKind) marker(annotation, rv string) watch.Event {
	obj, m := k.new()
	m.SetResourceVersion(rv)
	m.SetAnnotations(map[string]string{annotation: "true"})
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// restartMarker is what ListResync and WatchListResync emit to start their
// replay over: any start marker does.
func restartMarker(rv string) watch.Event {
	return objectKind{}.marker(resyncAnnotation, rv)
}

// resync is the watcher's stream resync hook: it runs the user's
// ResyncFunc, delivering its replay (or, with a tracker, the difference)
// between the two markers.
func (rw *RetryWatcher) resync(ctx context.Context, _ error, emit func(watch.Event) error) (string, error) {
	rs := rw.rs
	from := rw.LastResourceVersion()
	p := &replay{rs: rs, emit: emit, from: from}
	if rs.diff != nil {
		rs.diff.begin()
	}
	rv, err := rs.f(ctx, from, p.receive)
	if err != nil {
		return "", err
	}
	if rv == "" || rv == "0" {
		return "", errclass.Permanent(fmt.Errorf("k8s: the ResyncFunc returned resource version %q; it must return the resource version of its list, which the watch continues from", rv))
	}
	if rs.diff != nil {
		if err := rs.diff.sweep(rs.kind, p.deliver); err != nil {
			return "", err
		}
	}
	if err := p.start(rs.kind); err != nil {
		return "", err
	}
	if err := emit(rs.kind.marker(resyncEndAnnotation, rv)); err != nil {
		return "", err
	}
	rs.replayed = p.n
	return rv, nil
}

// replay is one resync's delivery: the start marker goes out before the
// first event (or before the end marker of an empty replay).
type replay struct {
	rs      *resyncState
	emit    func(watch.Event) error
	from    string
	started bool
	n       int // events delivered since the start marker
}

// receive takes an event from the ResyncFunc.
func (p *replay) receive(ev watch.Event) error {
	if IsResyncMarker(ev) {
		// The ResyncFunc starts over: the next event gets a new marker.
		p.started, p.n = false, 0
		if p.rs.diff != nil {
			p.rs.diff.begin()
		}
		return nil
	}
	if p.rs.diff != nil {
		return p.rs.diff.listed(ev, p.rs.kind, p.deliver)
	}
	return p.deliver(ev)
}

// deliver hands ev to the consumer, after the start marker.
func (p *replay) deliver(ev watch.Event) error {
	if !p.started {
		k := p.rs.kind
		k.observe(ev.Object)
		if err := p.start(k); err != nil {
			return err
		}
	}
	if err := p.emit(ev); err != nil {
		return err
	}
	p.n++
	return nil
}

// start delivers the start marker unless it was.
func (p *replay) start(k objectKind) error {
	if p.started {
		return nil
	}
	if err := p.emit(k.marker(resyncAnnotation, p.from)); err != nil {
		return err
	}
	p.started = true
	return nil
}

// resynced wraps a user's OnResync hook: it is told the failure itself
// (not the Resumer's expired mark on it) and the replay's length without
// its markers.
func (rw *RetryWatcher) resynced(f func(stream.ResyncEvent[string])) func(stream.ResyncEvent[string]) {
	return func(ev stream.ResyncEvent[string]) {
		var ee *eventError
		if errors.As(ev.Cause, &ee) {
			ev.Cause = ee
		} else if u := errors.Unwrap(ev.Cause); u != nil && errors.Is(ev.Cause, errclass.ErrExpired) && !errors.Is(u, errclass.ErrExpired) {
			ev.Cause = u
		}
		ev.Replayed = rw.rs.replayed
		f(ev)
	}
}
