package k8s_test

import (
	"context"
	"errors"
	"net/http"
	goruntime "runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait of these tests; it is a guard against a hang,
// never a timing assertion.
const deadline = 10 * time.Second

// cm is a ConfigMap event of type t at resource version rv.
func cm(t watch.EventType, rv int) watch.Event {
	return watch.Event{Type: t, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "cm-" + strconv.Itoa(rv),
		Namespace:       "default",
		ResourceVersion: strconv.Itoa(rv),
	}}}
}

func added(rv int) watch.Event    { return cm(watch.Added, rv) }
func modified(rv int) watch.Event { return cm(watch.Modified, rv) }
func deleted(rv int) watch.Event  { return cm(watch.Deleted, rv) }
func bookmark(rv int) watch.Event { return cm(watch.Bookmark, rv) }

func statusEvent(st metav1.Status) watch.Event {
	return watch.Event{Type: watch.Error, Object: &st}
}

// noRV is an object without GetResourceVersion.
type noRV struct{ Name string }

func (o *noRV) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (o *noRV) DeepCopyObject() runtime.Object   { c := *o; return &c }

// notStatus is an error object that is not a metav1.Status.
type notStatus struct {
	metav1.TypeMeta
	Reason string
}

func (o *notStatus) DeepCopyObject() runtime.Object { c := *o; return &c }

// step is what one watch call of a scripted watcher does.
type step struct {
	err      error         // the call fails with err
	nilWatch bool          // the call returns a nil watch and no error
	events   []watch.Event // the watch delivers these
	keepOpen bool          // the watch stays open after its events (default: it ends)
}

// scripted is a cache.WatcherWithContext that plays one step per watch
// call, records each call's options, and once the script is exhausted
// returns watches that never send (and closes idle).
type scripted struct {
	mu    sync.Mutex
	steps []step
	calls []metav1.ListOptions
	idle  chan struct{}
}

func newScripted(steps ...step) *scripted {
	return &scripted{steps: steps, idle: make(chan struct{})}
}

func (s *scripted) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, opts)
	i := len(s.calls) - 1
	if i >= len(s.steps) {
		if i == len(s.steps) {
			close(s.idle)
		}
		return watch.NewProxyWatcher(make(chan watch.Event)), nil
	}
	st := s.steps[i]
	switch {
	case st.err != nil:
		return nil, st.err
	case st.nilWatch:
		return nil, nil
	}
	ch := make(chan watch.Event, len(st.events))
	for _, ev := range st.events {
		ch <- ev
	}
	if !st.keepOpen {
		close(ch)
	}
	return watch.NewProxyWatcher(ch), nil
}

// rvs returns the resource versions the watch calls asked for, and fails
// the test if one did not allow bookmarks.
func (s *scripted) rvs(t *testing.T) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, o := range s.calls {
		if !o.AllowWatchBookmarks {
			t.Errorf("watch call %d: AllowWatchBookmarks = false, want true", i)
		}
		out = append(out, o.ResourceVersion)
	}
	return out
}

// waitIdle waits until the scripted watcher ran out of steps.
func (s *scripted) waitIdle(t *testing.T) {
	t.Helper()
	select {
	case <-s.idle:
	case <-time.After(deadline):
		t.Fatalf("the watcher did not reopen after the script (calls: %v)", s.rvs(t))
	}
}

// receive reads n events from rw.
func receive(t *testing.T, rw *k8s.RetryWatcher, n int) []watch.Event {
	t.Helper()
	var got []watch.Event
	for len(got) < n {
		select {
		case ev, ok := <-rw.ResultChan():
			if !ok {
				t.Errorf("ResultChan closed after %d events, want %d", len(got), n)
				return got
			}
			got = append(got, ev)
		case <-time.After(deadline):
			t.Fatalf("received %d events, want %d", len(got), n)
		}
	}
	return got
}

// waitClosed waits until ResultChan is closed (failing on any event) and
// Done is closed.
func waitClosed(t *testing.T, rw *k8s.RetryWatcher) {
	t.Helper()
	select {
	case ev, ok := <-rw.ResultChan():
		if ok {
			t.Fatalf("unexpected event %v %v, want ResultChan closed", ev.Type, ev.Object)
		}
	case <-time.After(deadline):
		t.Fatal("ResultChan not closed")
	}
	select {
	case <-rw.Done():
	case <-time.After(deadline):
		t.Fatal("Done not closed")
	}
}

// stop stops rw and waits until it has stopped, reading nothing.
func stop(t *testing.T, rw *k8s.RetryWatcher) {
	t.Helper()
	rw.Stop()
	select {
	case <-rw.Done():
	case <-time.After(deadline):
		t.Fatal("Done not closed after Stop")
	}
	if _, ok := <-rw.ResultChan(); ok {
		t.Fatal("ResultChan delivered an event after Done")
	}
}

// pollUntil polls cond until it holds or the deadline passes, yielding
// the processor between looks (no sleep stands in for synchronisation).
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		goruntime.Gosched()
	}
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var errTest = errors.New("test: injected failure")

// newGone is the 410 Gone an API server answers; apierrors.NewGone builds
// the same, and is deprecated for servers to use.
func newGone(message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone, Message: message,
	}}
}

// watchFunc is a cache.Watcher (the interface of client-go's deprecated
// constructors) made of a function.
type watchFunc func(metav1.ListOptions) (watch.Interface, error)

func (f watchFunc) Watch(o metav1.ListOptions) (watch.Interface, error) { return f(o) }
