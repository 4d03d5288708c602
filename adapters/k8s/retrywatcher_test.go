package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

func internalError(err error) watch.Event {
	return statusEvent(apierrors.NewInternalError(err).ErrStatus)
}

func TestNewRetryWatcher(t *testing.T) {
	t.Parallel()
	lw := newScripted()
	tests := []struct {
		name    string
		rv      string
		client  cache.WatcherWithContext
		opts    []k8s.Option
		wantErr string
	}{
		{name: "empty RV", rv: "", client: lw, wantErr: `initial RV "" is not supported due to issues with underlying WATCH`},
		{name: "RV 0", rv: "0", client: lw, wantErr: `initial RV "0" is not supported due to issues with underlying WATCH`},
		{name: "RV checked before the client", rv: "", client: nil, wantErr: `initial RV "" is not supported due to issues with underlying WATCH`},
		{name: "nil client", rv: "1", client: nil, wantErr: "k8s: NewRetryWatcherWithContext: watcherClient = nil"},
		{name: "negative minimum restart delay", rv: "1", client: lw, opts: []k8s.Option{k8s.WithMinRestartDelay(-1)}, wantErr: "k8s: WithMinRestartDelay: d = -1ns"},
		{name: "invalid backoff", rv: "1", client: lw, opts: []k8s.Option{k8s.WithBackoff(backoff.Exponential(backoff.WithMultiplier(0.5)))}, wantErr: "multiplier"},
		{name: "negative idle timeout", rv: "1", client: lw, opts: []k8s.Option{k8s.WithIdleTimeout(-1)}, wantErr: "k8s: WithIdleTimeout: d = -1ns"},
		{name: "nil limiter pointer", rv: "1", client: lw, opts: []k8s.Option{k8s.WithOpenLimiter((*gate)(nil))}, wantErr: "WithOpenLimiter: the Limiter is a nil *k8s_test.gate"},
		{name: "diff without resync", rv: "1", client: lw, opts: []k8s.Option{k8s.WithResyncDiff()}, wantErr: "k8s: WithResyncDiff: WithResync = nil: is required"},
		{name: "diff of an object without metadata", rv: "1", client: lw, opts: []k8s.Option{k8s.WithResync(k8s.ListResync(nil)), k8s.WithResyncDiff(&noRV{})}, wantErr: "k8s: WithResyncDiff: known = *k8s_test.noRV: is no list and has no object metadata"},
		{name: "every argument at once", rv: "0", client: nil, opts: []k8s.Option{k8s.WithIdleTimeout(-1), k8s.WithResyncDiff()},
			wantErr: "initial RV \"0\" is not supported due to issues with underlying WATCH\nk8s: NewRetryWatcherWithContext: watcherClient = nil: must not be nil\nk8s: WithResyncDiff: WithResync = nil: is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), tc.rv, tc.client, tc.opts...)
			if err == nil {
				stop(t, rw)
				t.Fatalf("NewRetryWatcherWithContext() = nil error, want %q", tc.wantErr)
			}
			if !errors.Is(err, stream.ErrInvalidOption) {
				t.Errorf("NewRetryWatcherWithContext() = %v, want an error matching %v", err, stream.ErrInvalidOption)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewRetryWatcherWithContext() = %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}

	// The deprecated constructor refuses the same, with client-go's
	// message, word for word, for the resource versions.
	for _, rv := range []string{"", "0"} {
		_, err := k8s.NewRetryWatcher(rv, watchOnly{lw})
		want := fmt.Sprintf("initial RV %q is not supported due to issues with underlying WATCH", rv)
		if err == nil || err.Error() != want || !errors.Is(err, stream.ErrInvalidOption) {
			t.Errorf("NewRetryWatcher(%q) = %v, want %q matching %v", rv, err, want, stream.ErrInvalidOption)
		}
	}
	if _, err := k8s.NewRetryWatcher("1", nil); err == nil {
		t.Error("NewRetryWatcher(\"1\", nil) = nil error, want an error")
	}
}

// TestRetryWatcher drives the watcher through a scripted watch client, one
// case of client-go's contract per row.
func TestRetryWatcher(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("too old resource version: 5 (10)").ErrStatus)
	emptyRV := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "no-rv"}}
	unstructuredStatus := func(code int64) watch.Event {
		return watch.Event{Type: watch.Error, Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
		}}}
	}
	tests := []struct {
		name    string
		steps   []step
		want    []watch.Event
		wantRVs []string // the resource versions of the watch calls
		stops   bool     // the watcher stops after want; otherwise it reopens after the script
	}{
		// Opening the watch.
		{name: "open: io.EOF is retried", steps: []step{{err: io.EOF}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: unexpected EOF is retried", steps: []step{{err: io.ErrUnexpectedEOF}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: probable EOF is retried", steps: []step{{err: errors.New("read tcp 10.0.0.1:443: connection reset by peer")}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: timeout is retried", steps: []step{{err: timeoutError{}}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: other errors are retried", steps: []step{{err: errTest}, {err: apierrors.NewInternalError(errTest)}, {err: apierrors.NewTooManyRequests("slow down", 0)}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "5", "5", "6"}},
		{name: "open: 410 Gone is retried", steps: []step{{err: newGone("too old")}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: Expired is retried", steps: []step{{err: apierrors.NewResourceExpired("too old resource version: 5 (10)")}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{name: "open: a nil watch is retried", steps: []step{{nilWatch: true}, {events: []watch.Event{added(6)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "5", "6"}},
		{
			name:    "open: Forbidden is delivered, then the watcher stops",
			steps:   []step{{err: apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no RBAC"))}},
			want:    []watch.Event{statusEvent(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no RBAC")).ErrStatus)},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "open: Unauthorized is delivered, then the watcher stops",
			steps:   []step{{err: apierrors.NewUnauthorized("expired token")}},
			want:    []watch.Event{statusEvent(apierrors.NewUnauthorized("expired token").ErrStatus)},
			wantRVs: []string{"5"},
			stops:   true,
		},

		// Events in the stream.
		{name: "stream: Added, Modified and Deleted are delivered; the next watch starts after the last", steps: []step{{events: []watch.Event{added(6), modified(7), deleted(9)}}}, want: []watch.Event{added(6), modified(7), deleted(9)}, wantRVs: []string{"5", "9"}},
		{name: "stream: a closed watch is reopened after the last event", steps: []step{{events: []watch.Event{added(6)}}, {events: []watch.Event{added(7), added(8)}}, {}}, want: []watch.Event{added(6), added(7), added(8)}, wantRVs: []string{"5", "6", "8", "8"}},
		{name: "stream: a bookmark advances the resource version and is not delivered", steps: []step{{events: []watch.Event{added(6), bookmark(9)}}, {events: []watch.Event{bookmark(12)}}}, want: []watch.Event{added(6)}, wantRVs: []string{"5", "9", "12"}},
		{
			name:    "stream: an object without GetResourceVersion stops the watcher",
			steps:   []step{{events: []watch.Event{added(6), {Type: watch.Added, Object: &noRV{Name: "x"}}, added(7)}}},
			want:    []watch.Event{added(6), internalError(errors.New("retryWatcher: doesn't support resourceVersion"))},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: a nil object stops the watcher",
			steps:   []step{{events: []watch.Event{{Type: watch.Modified}}}},
			want:    []watch.Event{internalError(errors.New("retryWatcher: doesn't support resourceVersion"))},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: an empty resource version stops the watcher",
			steps:   []step{{events: []watch.Event{added(6), {Type: watch.Added, Object: emptyRV}, added(7)}}},
			want:    []watch.Event{added(6), internalError(fmt.Errorf("retryWatcher: object %#v doesn't support resourceVersion", emptyRV))},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: a bookmark with an empty resource version stops the watcher",
			steps:   []step{{events: []watch.Event{{Type: watch.Bookmark, Object: emptyRV}}}},
			want:    []watch.Event{internalError(fmt.Errorf("retryWatcher: object %#v doesn't support resourceVersion", emptyRV))},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: an unknown event type stops the watcher",
			steps:   []step{{events: []watch.Event{added(6), {Type: "SURPRISE", Object: added(7).Object}}}},
			want:    []watch.Event{added(6), internalError(errors.New(`retryWatcher failed to recognize Event type "SURPRISE"`))},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: 410 Gone is forwarded, then the watcher stops",
			steps:   []step{{events: []watch.Event{added(6), gone, added(7)}}},
			want:    []watch.Event{added(6), gone},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{
			name:    "stream: 410 Gone as unstructured is forwarded, then the watcher stops",
			steps:   []step{{events: []watch.Event{unstructuredStatus(410)}}},
			want:    []watch.Event{unstructuredStatus(410)},
			wantRVs: []string{"5"},
			stops:   true,
		},
		{name: "stream: 500 is retried", steps: []step{{events: []watch.Event{added(6), statusEvent(apierrors.NewInternalError(errTest).ErrStatus), added(7)}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(6), added(7)}, wantRVs: []string{"5", "6", "7"}},
		{name: "stream: 504 is retried", steps: []step{{events: []watch.Event{added(6), statusEvent(apierrors.NewTimeoutError("etcd", 0).ErrStatus)}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(6), added(7)}, wantRVs: []string{"5", "6", "7"}},
		{name: "stream: an unexpected code is retried", steps: []step{{events: []watch.Event{statusEvent(metav1.Status{Code: 666})}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(7)}, wantRVs: []string{"5", "5", "7"}},
		{name: "stream: Forbidden is retried", steps: []step{{events: []watch.Event{statusEvent(apierrors.NewForbidden(schema.GroupResource{}, "", errTest).ErrStatus)}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(7)}, wantRVs: []string{"5", "5", "7"}},
		{name: "stream: an unstructured 500 is retried", steps: []step{{events: []watch.Event{unstructuredStatus(500)}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(7)}, wantRVs: []string{"5", "5", "7"}},
		{name: "stream: an error object that is not a Status is retried", steps: []step{{events: []watch.Event{added(6), {Type: watch.Error, Object: &notStatus{Reason: "odd"}}}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(6), added(7)}, wantRVs: []string{"5", "6", "7"}},
		{name: "stream: an error event with no object is retried", steps: []step{{events: []watch.Event{{Type: watch.Error}}}, {events: []watch.Event{added(7)}}}, want: []watch.Event{added(7)}, wantRVs: []string{"5", "5", "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lw := newScripted(tc.steps...)
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, k8s.WithMinRestartDelay(0))
			if err != nil {
				t.Fatalf("NewRetryWatcherWithContext() = %v", err)
			}
			got := receive(t, rw, len(tc.want))
			if tc.stops {
				waitClosed(t, rw)
			} else {
				lw.waitIdle(t)
				stop(t, rw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRVs, lw.rvs(t)); diff != "" {
				t.Errorf("watch resource versions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryWatcherForwardsTheSameEvent checks that a 410 in the stream is
// forwarded as received, object included.
func TestRetryWatcherForwardsTheSameEvent(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("too old").ErrStatus)
	lw := newScripted(step{events: []watch.Event{gone}})
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 1)
	waitClosed(t, rw)
	if len(got) == 1 && got[0].Object != gone.Object {
		t.Errorf("forwarded object %p, want the received %p", got[0].Object, gone.Object)
	}
}

// TestRetryWatcherAdvancesOnReceive checks that the resource version moves
// only once the consumer has received the event.
func TestRetryWatcherAdvancesOnReceive(t *testing.T) {
	t.Parallel()
	lw := newScripted(step{events: []watch.Event{added(6), added(7)}, keepOpen: true})
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, rw)
	if got := rw.LastResourceVersion(); got != "5" {
		t.Errorf("LastResourceVersion() before any event = %q, want 5", got)
	}
	receive(t, rw, 1)
	pollUntil(t, "resource version 6", func() bool { return rw.LastResourceVersion() == "6" })
	// Event 7 is waiting for the consumer: the resource version must not
	// have moved to it.
	if got := rw.LastResourceVersion(); got != "6" {
		t.Errorf("LastResourceVersion() with event 7 not received = %q, want 6", got)
	}
	receive(t, rw, 1)
	pollUntil(t, "resource version 7", func() bool { return rw.LastResourceVersion() == "7" })
}

// TestRetryWatcherStop checks Stop: idempotent, concurrent, and not waiting
// for a consumer.
func TestRetryWatcherStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "blocked sending an event nobody reads", steps: []step{{events: []watch.Event{added(6), added(7)}, keepOpen: true}}},
		{name: "idle on an empty watch"},
		{name: "waiting for a reopen", steps: []step{{err: errTest}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lw := newScripted(tc.steps...)
			// The default one-second restart delay: Stop must cut the wait.
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw)
			if err != nil {
				t.Fatal(err)
			}
			pollUntil(t, "the first watch", func() bool { return len(lw.rvs(t)) > 0 })
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rw.Stop()
				}()
			}
			wg.Wait()
			rw.Stop()
			select {
			case <-rw.Done():
			case <-time.After(deadline):
				t.Fatal("Done not closed after Stop")
			}
			// Once Done is closed the result channel is closed already.
			select {
			case _, ok := <-rw.ResultChan():
				if ok {
					t.Error("ResultChan delivered an event after Done was closed")
				}
			default:
				t.Error("ResultChan not closed when Done was closed")
			}
		})
	}
}

// TestRetryWatcherContextCancel checks that cancelling the constructor's
// context stops the watcher as Stop does.
func TestRetryWatcherContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	lw := newScripted(step{events: []watch.Event{added(6)}, keepOpen: true})
	rw, err := k8s.NewRetryWatcherWithContext(ctx, "5", lw)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, rw, 1)
	cancel()
	waitClosed(t, rw)
}

// libraryGoroutines counts the goroutines the library started: those
// created by a function of one of its (non-test) packages. Goroutines of
// other tests still ending do not count, so the number is exact.
func libraryGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, line := range strings.Split(string(buf), "\n") {
		if strings.HasPrefix(line, "created by github.com/resumable-go/resumable/") && !strings.Contains(line, "_test.") {
			count++
		}
	}
	return count
}

// TestRetryWatcherOneGoroutine checks that a watcher runs exactly one
// goroutine, which has ended when Done is closed. It is not parallel: it
// counts the goroutines the library started.
func TestRetryWatcherOneGoroutine(t *testing.T) {
	const n = 50
	before := libraryGoroutines()
	var ws []*k8s.RetryWatcher
	var lws []*scripted
	for range n {
		lw := newScripted()
		rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, rw)
		lws = append(lws, lw)
	}
	for _, lw := range lws {
		lw.waitIdle(t) // blocked on an empty watch
	}
	if got := libraryGoroutines() - before; got != n {
		t.Errorf("%d watchers run %d goroutines, want %d", n, got, n)
	}
	for _, rw := range ws {
		stop(t, rw)
	}
	pollUntil(t, "the goroutines to end", func() bool { return libraryGoroutines() == before })
}

// TestRetryWatcherDelays checks, through the log, which delay a reopen waits
// for; no clock is read.
func TestRetryWatcherDelays(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		opts       []k8s.Option
		steps      []step
		wantDelay  time.Duration
		wantReason string
	}{
		{
			name:       "the default minimum restart delay is one second",
			steps:      []step{{err: errTest}},
			wantReason: "min-restart",
		},
		{
			name:       "a 500 in the stream without RetryAfterSeconds is retried at once",
			opts:       []k8s.Option{k8s.WithMinRestartDelay(0)},
			steps:      []step{{events: []watch.Event{statusEvent(apierrors.NewInternalError(errTest).ErrStatus)}}},
			wantDelay:  0,
			wantReason: "none",
		},
		{
			name: "RetryAfterSeconds of an unexpected code in the stream",
			opts: []k8s.Option{k8s.WithMinRestartDelay(0)},
			steps: []step{{events: []watch.Event{statusEvent(metav1.Status{
				Code: 429, Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
			})}}},
			wantDelay:  time.Second,
			wantReason: "server",
		},
		{
			name:       "a backoff policy",
			opts:       []k8s.Option{k8s.WithMinRestartDelay(0), k8s.WithBackoff(backoff.Constant(time.Millisecond))},
			steps:      []step{{err: errTest}},
			wantDelay:  time.Millisecond,
			wantReason: "backoff",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.InfoLevel)
			lw := newScripted(tc.steps...)
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, append(tc.opts, k8s.WithLogger(zap.New(core)))...)
			if err != nil {
				t.Fatal(err)
			}
			lw.waitIdle(t)
			stop(t, rw)
			entries := logs.FilterMessage("stream failed; retrying").AllUntimed()
			if len(entries) == 0 {
				t.Fatalf("no retry logged; log: %v", logs.AllUntimed())
			}
			fields := entries[0].ContextMap()
			if got := fields["reason"]; got != tc.wantReason {
				t.Errorf("reason = %v, want %v", got, tc.wantReason)
			}
			if tc.wantReason != "min-restart" {
				if got := fields["delay"]; got != tc.wantDelay {
					t.Errorf("delay = %v, want %v", got, tc.wantDelay)
				}
			}
		})
	}
}

// TestRetryWatcherFailures checks what the options that stop a watcher
// client-go's would retry deliver.
func TestRetryWatcherFailures(t *testing.T) {
	t.Parallel()
	failOnTest := errclass.Is(errTest, errclass.Decision{Action: errclass.Fail})
	retryForbidden := errclass.Func(func(err error) errclass.Decision {
		if apierrors.IsForbidden(err) {
			return errclass.Decision{Action: errclass.Retry}
		}
		return errclass.Decision{}
	})
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no RBAC yet"))
	tests := []struct {
		name        string
		opts        []k8s.Option
		steps       []step
		want        []watch.Event
		wantMessage string // in the final Error event's Status
		stops       bool
	}{
		{
			name:        "a classifier that gives up",
			opts:        []k8s.Option{k8s.WithClassifier(failOnTest)},
			steps:       []step{{events: []watch.Event{added(6)}}, {err: errTest}},
			want:        []watch.Event{added(6)},
			wantMessage: errTest.Error(),
			stops:       true,
		},
		{
			name:  "a classifier that retries Forbidden",
			opts:  []k8s.Option{k8s.WithClassifier(retryForbidden)},
			steps: []step{{err: forbidden}, {events: []watch.Event{added(6)}}},
			want:  []watch.Event{added(6)},
		},
		{
			name:        "a backoff policy that gives up",
			opts:        []k8s.Option{k8s.WithBackoff(backoff.Exponential(backoff.WithMaxRetries(2), backoff.WithInitialInterval(time.Millisecond)))},
			steps:       []step{{err: errTest}, {err: errTest}, {err: errTest}},
			wantMessage: "retries exhausted",
			stops:       true,
		},
		{
			name:        "a backoff policy that gives up on a server error event forwards it",
			opts:        []k8s.Option{k8s.WithBackoff(backoff.Exponential(backoff.WithMaxRetries(1), backoff.WithInitialInterval(time.Millisecond)))},
			steps:       []step{{err: errTest}, {events: []watch.Event{statusEvent(metav1.Status{Code: 503, Message: "etcd is sad"})}}},
			wantMessage: "etcd is sad",
			stops:       true,
		},
		{
			name:        "a marked error gives up",
			steps:       []step{{err: errclass.Permanent(errTest)}},
			wantMessage: errTest.Error(),
			stops:       true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.WarnLevel)
			lw := newScripted(tc.steps...)
			opts := append([]k8s.Option{k8s.WithMinRestartDelay(0), k8s.WithLogger(zap.New(core))}, tc.opts...)
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, opts...)
			if err != nil {
				t.Fatal(err)
			}
			n := len(tc.want)
			if tc.stops {
				n++
			}
			got := receive(t, rw, n)
			if tc.stops {
				waitClosed(t, rw)
				last := got[len(got)-1]
				st, ok := last.Object.(*metav1.Status)
				if last.Type != watch.Error || !ok {
					t.Fatalf("last event = %v %T, want an Error with a Status", last.Type, last.Object)
				}
				if !strings.Contains(st.Message, tc.wantMessage) {
					t.Errorf("final Status message = %q, want it to contain %q", st.Message, tc.wantMessage)
				}
				if logs.FilterMessage("RetryWatcher stopping after a failure it does not retry").Len() != 1 {
					t.Errorf("the failure was not logged at Warn: %v", logs.AllUntimed())
				}
				got = got[:len(got)-1]
				if len(got) == 0 {
					got = nil
				}
			} else {
				lw.waitIdle(t)
				stop(t, rw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryWatcherWithClientGoFakes drives the watcher through client-go's
// own fakes: a live watch.FakeWatcher behind a cache.ListWatch, closed under
// the watcher's feet, and the deprecated constructor.
func TestRetryWatcherWithClientGoFakes(t *testing.T) {
	t.Parallel()
	fakes := make(chan *watch.FakeWatcher, 10)
	var mu sync.Mutex
	var rvs []string
	lw := watchFunc(func(o metav1.ListOptions) (watch.Interface, error) {
		mu.Lock()
		rvs = append(rvs, o.ResourceVersion)
		mu.Unlock()
		fw := watch.NewFake()
		fakes <- fw
		return fw, nil
	})
	rw, err := k8s.NewRetryWatcher("5", lw, k8s.WithMinRestartDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	fw := <-fakes
	var got []watch.Event
	go func() { // FakeWatcher sends block until received
		fw.Add(added(6).Object)
		fw.Modify(modified(7).Object)
		fw.Action(watch.Bookmark, bookmark(8).Object)
		fw.Stop() // the server ends the watch
	}()
	got = append(got, receive(t, rw, 2)...)
	fw = <-fakes
	go func() {
		fw.Delete(deleted(9).Object)
	}()
	got = append(got, receive(t, rw, 1)...)
	stop(t, rw)
	if diff := cmp.Diff([]watch.Event{added(6), modified(7), deleted(9)}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"5", "8"}, rvs); diff != "" {
		t.Errorf("watch resource versions (-want +got):\n%s", diff)
	}
}

// TestRetryWatcherNilOptions checks that nil options mean the defaults.
func TestRetryWatcherNilOptions(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errTest)
	lw := newScripted(step{events: []watch.Event{added(6), statusEvent(newGone("old").ErrStatus)}}, step{err: forbidden})
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, nil,
		k8s.WithLogger(nil), k8s.WithBackoff(nil), k8s.WithClassifier(nil), k8s.WithResync(nil), k8s.WithHooks(stream.Hooks[string]{}))
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 2)
	waitClosed(t, rw)
	// Without a resync the 410 is forwarded and the watcher stops.
	if got[1].Type != watch.Error || !apierrors.IsGone(apierrors.FromObject(got[1].Object)) {
		t.Errorf("second event = %v %v, want the 410 forwarded", got[1].Type, got[1].Object)
	}
}

// TestRetryWatcherHooks checks that WithHooks follows the watcher's
// Resumer: several sets add up, resource versions are committed as the
// consumer receives events (bookmarks too), and OnStop closes the run.
func TestRetryWatcherHooks(t *testing.T) {
	t.Parallel()
	var commits, commits2 []string
	var stops int
	lw := newScripted(step{events: []watch.Event{added(6), bookmark(7), added(8)}, keepOpen: true})
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithHooks(stream.Hooks[string]{
			OnCommit: func(e stream.CommitEvent[string]) { commits = append(commits, e.Cursor) },
			OnStop:   func(stream.StopEvent[string]) { stops++ },
		}),
		k8s.WithHooks(stream.Hooks[string]{OnCommit: func(e stream.CommitEvent[string]) { commits2 = append(commits2, e.Cursor) }}))
	if err != nil {
		t.Fatal(err)
	}
	receive(t, rw, 2)
	pollUntil(t, "resource version 8", func() bool { return rw.LastResourceVersion() == "8" })
	stop(t, rw)
	<-rw.Done() // the hooks ran on the watcher's goroutine, which has ended
	want := []string{"6", "7", "8"}
	if diff := cmp.Diff(want, commits); diff != "" {
		t.Errorf("committed resource versions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, commits2); diff != "" {
		t.Errorf("the second set's committed resource versions (-want +got):\n%s", diff)
	}
	if stops != 1 {
		t.Errorf("OnStop called %d times, want 1", stops)
	}
}
