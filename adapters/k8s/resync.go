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

// ResyncFunc is called, on the watcher's goroutine with its context, when
// the resource version from has expired (410 Gone / Expired, at open or in
// the stream). It streams the collection's state through emit, one Added
// event per object of the watched type, as it reads (nothing should hold
// the whole replay), and returns the resource version of its list, which
// the watch continues from.
//
// emit returns an error only when the watcher is stopping; f must then
// return it at once. To start its replay over, f emits an event for which
// [IsResyncMarker] reports true; the consumer then sees a new start marker.
// An error is retried by default (the consumer sees the replay again);
// errclass.Permanent, a 410, or a returned resource version of "" or "0"
// stops the watcher.
type ResyncFunc func(ctx context.Context, from string, emit func(watch.Event) error) (resourceVersion string, err error)

// The annotations, with the value "true", of the resync markers.
const (
	resyncAnnotation    = "resumable.io/resync"
	resyncEndAnnotation = "resumable.io/resync-end"
)

// IsResyncMarker reports whether ev is the start marker a [RetryWatcher]
// delivers before a resync's replay: a Bookmark annotated
// resumable.io/resync: "true" at the resource version that expired. Its
// object is of the watched Go type (else *metav1.PartialObjectMetadata)
// and carries nothing else.
//
// Up to the end marker ([IsResyncEnd]) come the whole state (replace yours
// with it) or, with [WithResyncDiff], the changes (apply them). A new start
// marker before the end marker means the replay was cut short: drop what it
// delivered. A consumer can skip all Bookmarks, which carry nothing else.
func IsResyncMarker(ev watch.Event) bool {
	return isAnnotatedBookmark(ev, resyncAnnotation)
}

// IsResyncEnd reports whether ev is the end marker of a resync's replay
// (resumable.io/resync-end: "true", see [IsResyncMarker]), at the resource
// version the watch continues from.
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

// resyncState is used by the watcher's goroutine only.
type resyncState struct {
	f        ResyncFunc
	diff     *tracker // nil without WithResyncDiff
	kind     objectKind
	replayed int // events the last completed resync delivered, for OnResync hooks
}

// objectKind is the type of the last object delivered, of which markers
// and tombstones are made.
type objectKind struct {
	typ reflect.Type
	gvk schema.GroupVersionKind
}

// observe records obj's kind; call it before the object is handed over.
func (k *objectKind) observe(obj runtime.Object) {
	if obj == nil {
		return
	}
	if t := reflect.TypeOf(obj); t != k.typ {
		k.typ = t
		k.gvk = obj.GetObjectKind().GroupVersionKind()
	}
}

// new returns an empty object of the kind, else a PartialObjectMetadata.
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

func (k objectKind) marker(annotation, rv string) watch.Event {
	obj, m := k.new()
	m.SetResourceVersion(rv)
	m.SetAnnotations(map[string]string{annotation: "true"})
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// restartMarker starts a ResyncFunc's replay over.
func restartMarker(rv string) watch.Event {
	return objectKind{}.marker(resyncAnnotation, rv)
}

// resync is the stream resync hook around the user's ResyncFunc.
func (rw *RetryWatcher) resync(ctx context.Context, _ error, emit func(watch.Event) error) (string, error) {
	rs := rw.rs
	from := rw.LastResourceVersion()
	p := &replay{rs: rs, emit: emit, from: from}
	if rs.diff != nil {
		rs.diff.begin()
	}
	rv, err := rs.f(ctx, from, p.receive)
	if err != nil {
		return "", markOpen(err, false) // a list fails as a watch's open does
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

// replay is one resync's delivery: the start marker goes out just before
// the first event (or the end marker), so a resync that fails before
// delivering anything delivers no marker.
type replay struct {
	rs      *resyncState
	emit    func(watch.Event) error
	from    string
	started bool
	n       int // events delivered since the start marker
}

func (p *replay) receive(ev watch.Event) error {
	if IsResyncMarker(ev) {
		// Starting over: the next event gets a new marker.
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

// resynced wraps an OnResync hook: Cause without the Resumer's expired
// mark, Replayed without the markers.
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
