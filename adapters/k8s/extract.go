package k8s

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/cursor"
)

// resourceVersionGetter is client-go's RetryWatcher's test for a resource
// version.
type resourceVersionGetter interface {
	GetResourceVersion() string
}

// ResourceVersion is a [cursor.Extractor] for watch events: an event's
// cursor is its object's resource version. A Bookmark's comes with
// [cursor.ProgressOnly] (the stream moves past it without delivering it).
// An object without a resource version, or an event of another type, gives
// an error (an apierrors.APIStatus, InternalError) that stops a stream, as
// in client-go. It allocates nothing for a valid event.
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

// invalidEventError is [ResourceVersion]'s error: Err has client-go's
// message; Status is the InternalError a [RetryWatcher] delivers last.
type invalidEventError struct {
	Event watch.Event
	Err   error
}

// Error returns Err's message.
func (e *invalidEventError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *invalidEventError) Unwrap() error { return e.Err }

// Status makes an invalidEventError an apierrors.APIStatus.
func (e *invalidEventError) Status() metav1.Status {
	return apierrors.NewInternalError(e.Err).ErrStatus
}
