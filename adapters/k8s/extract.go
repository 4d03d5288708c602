package k8s

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/cursor"
)

// resourceVersionGetter is what an event's object must implement to have a
// resource version, as in client-go's RetryWatcher.
type resourceVersionGetter interface {
	GetResourceVersion() string
}

// ResourceVersion is a [cursor.Extractor] for watch events: an event's
// cursor is its object's resource version.
//
//   - Added, Modified and Deleted events give their object's resource
//     version.
//   - A Bookmark gives its resource version together with
//     [cursor.ProgressOnly]: the stream moves past it without delivering it.
//   - An event whose object has no GetResourceVersion method or an empty
//     resource version, and an event of any other type, give an
//     error (an apierrors.APIStatus with an InternalError Status): going on
//     could skip events, so a stream stops.
//
// It allocates nothing for a valid event.
func ResourceVersion(ev watch.Event) (string, error) {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		getter, ok := ev.Object.(resourceVersionGetter)
		if !ok {
			return "", &invalidEventError{Event: ev, Err: errNoResourceVersion}
		}
		rv := getter.GetResourceVersion()
		if rv == "" {
			return "", &invalidEventError{Event: ev, Err: fmt.Errorf("retryWatcher: object %#v doesn't support resourceVersion", ev.Object)}
		}
		if ev.Type == watch.Bookmark {
			return rv, cursor.ProgressOnly
		}
		return rv, nil
	case watch.Error:
		return "", &invalidEventError{Event: ev, Err: errErrorEvent}
	default:
		return "", &invalidEventError{Event: ev, Err: fmt.Errorf("retryWatcher failed to recognize Event type %q", ev.Type)}
	}
}

// The messages of client-go's RetryWatcher, kept so that consumers matching
// on them keep working.
var (
	errNoResourceVersion = errors.New("retryWatcher: doesn't support resourceVersion")
	errErrorEvent        = errors.New("k8s: an ERROR event has no resource version; WatchSource turns it into an error before it reaches the extractor")
)

// invalidEventError is the error [ResourceVersion] returns for an event it
// cannot take a resource version from: Event is the event, Err says why
// (with client-go's RetryWatcher's message). Its Status is the
// InternalError a [RetryWatcher] delivers before it stops, as client-go's
// does.
type invalidEventError struct {
	Event watch.Event
	Err   error
}

// Error returns Err's message.
func (e *invalidEventError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *invalidEventError) Unwrap() error { return e.Err }

// Status returns an InternalError Status carrying Err, which makes an
// invalidEventError an apierrors.APIStatus.
func (e *invalidEventError) Status() metav1.Status {
	return apierrors.NewInternalError(e.Err).ErrStatus
}
