package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
)

func TestResourceVersion(t *testing.T) {
	t.Parallel()
	emptyRV := &corev1.ConfigMap{}
	tests := []struct {
		name       string
		ev         watch.Event
		want       string
		wantErr    error  // errors.Is
		wantStatus string // the InvalidEventError's Status message
	}{
		{name: "added", ev: added(6), want: "6"},
		{name: "modified", ev: modified(7), want: "7"},
		{name: "deleted", ev: deleted(8), want: "8"},
		{name: "bookmark", ev: bookmark(9), want: "9", wantErr: cursor.ProgressOnly},
		{name: "no GetResourceVersion", ev: watch.Event{Type: watch.Added, Object: &noRV{}}, wantStatus: "Internal error occurred: retryWatcher: doesn't support resourceVersion"},
		{name: "nil object", ev: watch.Event{Type: watch.Deleted}, wantStatus: "Internal error occurred: retryWatcher: doesn't support resourceVersion"},
		{name: "empty resource version", ev: watch.Event{Type: watch.Added, Object: emptyRV}, wantStatus: "Internal error occurred: retryWatcher: object " + fmt.Sprintf("%#v", emptyRV) + " doesn't support resourceVersion"},
		{name: "unknown type", ev: watch.Event{Type: "X", Object: added(1).Object}, wantStatus: `Internal error occurred: retryWatcher failed to recognize Event type "X"`},
		{name: "error event", ev: statusEvent(metav1.Status{Code: 500}), wantStatus: "ERROR event has no resource version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k8s.ResourceVersion(tc.ev)
			if tc.wantStatus != "" {
				var ie *k8s.InvalidEventError
				if !errors.As(err, &ie) {
					t.Fatalf("ResourceVersion() = %q, %v, want an *InvalidEventError", got, err)
				}
				st := ie.Status()
				if st.Code != http.StatusInternalServerError || st.Reason != metav1.StatusReasonInternalError {
					t.Errorf("Status() = %d %s, want 500 InternalError", st.Code, st.Reason)
				}
				if !strings.Contains(st.Message, tc.wantStatus) {
					t.Errorf("Status().Message = %q, want it to contain %q", st.Message, tc.wantStatus)
				}
				if ie.Event.Type != tc.ev.Type || ie.Event.Object != tc.ev.Object {
					t.Errorf("InvalidEventError.Event = %v, want the event given", ie.Event)
				}
				return
			}
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("ResourceVersion() = %q, %v, want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestStatusClassifier(t *testing.T) {
	t.Parallel()
	inStream := func(st metav1.Status) error {
		ev := statusEvent(st)
		return &k8s.EventError{Event: ev, Err: apierrors.FromObject(ev.Object)}
	}
	retry := errclass.Decision{Action: errclass.Retry}
	fail := errclass.Decision{Action: errclass.Fail}
	expired := errclass.Decision{Action: errclass.Expired}
	unknown := errclass.Decision{}
	forbidden := apierrors.NewForbidden(schema.GroupResource{}, "", errTest)
	tests := []struct {
		name       string
		err        error
		want       errclass.Decision
		wantResync errclass.Decision
	}{
		{name: "stream: 410", err: inStream(newGone("old").ErrStatus), want: fail, wantResync: expired},
		{name: "stream: 410 Expired", err: inStream(apierrors.NewResourceExpired("old").ErrStatus), want: fail, wantResync: expired},
		{name: "stream: 500", err: inStream(apierrors.NewInternalError(errTest).ErrStatus), want: retry, wantResync: retry},
		{name: "stream: 504 after 3s", err: inStream(apierrors.NewTimeoutError("etcd", 3).ErrStatus), want: errclass.Decision{Action: errclass.Retry, After: 3 * time.Second}, wantResync: errclass.Decision{Action: errclass.Retry, After: 3 * time.Second}},
		{name: "stream: 429 after 2s", err: inStream(apierrors.NewTooManyRequests("slow", 2).ErrStatus), want: errclass.Decision{Action: errclass.Retry, After: 2 * time.Second}, wantResync: errclass.Decision{Action: errclass.Retry, After: 2 * time.Second}},
		{name: "stream: 403", err: inStream(forbidden.ErrStatus), want: retry, wantResync: retry},
		{name: "stream: not a Status", err: &k8s.EventError{Event: watch.Event{Type: watch.Error, Object: &notStatus{}}, Err: apierrors.FromObject(&notStatus{})}, want: retry, wantResync: retry},
		{name: "open: Forbidden", err: forbidden, want: fail, wantResync: fail},
		{name: "open: Unauthorized", err: apierrors.NewUnauthorized("no"), want: fail, wantResync: fail},
		{name: "open: 410 Gone", err: newGone("old"), want: retry, wantResync: expired},
		{name: "open: Expired", err: apierrors.NewResourceExpired("old"), want: retry, wantResync: expired},
		{name: "open: io.EOF", err: io.EOF, want: unknown, wantResync: unknown},
		{name: "open: a probable EOF", err: errors.New("connection reset by peer"), want: unknown, wantResync: unknown},
		{name: "open: timeout", err: timeoutError{}, want: unknown, wantResync: unknown},
		{name: "open: 500", err: apierrors.NewInternalError(errTest), want: unknown, wantResync: unknown},
		{name: "open: other", err: errTest, want: unknown, wantResync: unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := k8s.StatusClassifier(false).Classify(tc.err); got != tc.want {
				t.Errorf("StatusClassifier(false).Classify() = %v, want %v", got, tc.want)
			}
			if got := k8s.StatusClassifier(true).Classify(tc.err); got != tc.wantResync {
				t.Errorf("StatusClassifier(true).Classify() = %v, want %v", got, tc.wantResync)
			}
		})
	}
}

// stopCounter is a watch that counts its Stop calls.
type stopCounter struct {
	watch.Interface
	stops int
}

func (s *stopCounter) Stop() { s.stops++; s.Interface.Stop() }

func TestWatchSource(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("old").ErrStatus)
	ch := make(chan watch.Event, 3)
	ch <- added(6)
	ch <- gone
	ch <- modified(7)
	close(ch)
	w := &stopCounter{Interface: watch.NewProxyWatcher(ch)}
	var opts []metav1.ListOptions
	src := k8s.WatchSource(&cache.ListWatch{WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
		opts = append(opts, o)
		return w, nil
	}})
	ctx := context.Background()
	conn, err := src.Open(ctx, "5")
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if diff := cmp.Diff([]metav1.ListOptions{{ResourceVersion: "5", AllowWatchBookmarks: true}}, opts); diff != "" {
		t.Errorf("watch options (-want +got):\n%s", diff)
	}
	if ev, err := conn.Recv(ctx); err != nil || ev.Type != watch.Added {
		t.Errorf("Recv() = %v, %v, want the Added event", ev.Type, err)
	}
	_, err = conn.Recv(ctx)
	var ee *k8s.EventError
	if !errors.As(err, &ee) || ee.Event.Object != gone.Object || !apierrors.IsGone(err) {
		t.Errorf("Recv() = %v, want an *EventError for the 410 event, matching apierrors.IsGone", err)
	}
	if _, err := conn.Recv(ctx); err != nil {
		t.Errorf("Recv() after an error event = %v, want the next event", err)
	}
	if _, err := conn.Recv(ctx); err != io.EOF {
		t.Errorf("Recv() on a closed watch = %v, want io.EOF", err)
	}
	for range 3 {
		if err := conn.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	if w.stops != 1 {
		t.Errorf("the watch was stopped %d times, want 1", w.stops)
	}

	// A cancelled context unblocks Recv.
	blocked := &stopCounter{Interface: watch.NewProxyWatcher(make(chan watch.Event))}
	src = k8s.WatchSource(&cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return blocked, nil }})
	conn, err = src.Open(ctx, "5")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := conn.Recv(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv() with a cancelled context = %v, want context.Canceled", err)
	}
	_ = conn.Close()

	// An error with a watch stops the watch; a nil watch is a nil Conn.
	leftover := &stopCounter{Interface: watch.NewProxyWatcher(make(chan watch.Event))}
	src = k8s.WatchSource(&cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return leftover, errTest }})
	if conn, err := src.Open(ctx, "5"); conn != nil || !errors.Is(err, errTest) || leftover.stops != 1 {
		t.Errorf("Open() = %v, %v with %d stops, want nil, %v, and the watch stopped", conn, err, leftover.stops, errTest)
	}
	src = k8s.WatchSource(&cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, nil }})
	if conn, err := src.Open(ctx, "5"); conn != nil || err != nil {
		t.Errorf("Open() of a nil watch = %v, %v, want nil, nil", conn, err)
	}
}
