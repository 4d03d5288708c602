package k8s_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// expiredServer answers 410 Gone to every watch call, as an HA API server
// whose caches disagree can answer to the resource version a resync
// returned, and counts the calls.
type expiredServer struct{ watches atomic.Int64 }

func (s *expiredServer) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.watches.Add(1)
	return nil, apierrors.NewResourceExpired("too old resource version")
}

// drain reads ch until it is closed.
func drain(ch <-chan watch.Event) (done <-chan struct{}) {
	c := make(chan struct{})
	go func() {
		defer close(c)
		for range ch {
		}
	}()
	return c
}

// TestResyncThenExpiredAgainNoStorm runs a watcher whose every watch
// answers 410 for ten (fake) seconds: each 410 resyncs, and the watch from
// the resync's resource version meets 410 again. The watcher must keep to
// one watch (and so one resync) per second, the minimum restart delay,
// instead of looping between LIST and WATCH.
func TestResyncThenExpiredAgainNoStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &expiredServer{}
		var resyncs atomic.Int64
		rw, err := k8s.NewRetryWatcherWithContext(t.Context(), "5", srv,
			k8s.WithResync(func(_ context.Context, _ string, emit func(watch.Event) error) (string, error) {
				resyncs.Add(1)
				return "20", emit(added(19))
			}))
		if err != nil {
			t.Fatal(err)
		}
		done := drain(rw.ResultChan())
		const run = 10 * time.Second
		time.Sleep(run)
		rw.Stop()
		<-done
		<-rw.Done()
		max := int64(run/k8s.DefaultMinRestartDelay) + 1
		if n := srv.watches.Load(); n < 2 || n > max {
			t.Errorf("%d watch calls in %v, want between 2 and %d", n, run, max)
		}
		if n := resyncs.Load(); n < 2 || n > max {
			t.Errorf("%d resyncs in %v, want between 2 and %d", n, run, max)
		}
	})
}

// ticking is a watch that sends a bookmark every period until stopped.
type ticking struct {
	ch     chan watch.Event
	stop   chan struct{}
	once   sync.Once
	period time.Duration
}

func newTicking(period time.Duration) *ticking {
	w := &ticking{ch: make(chan watch.Event), stop: make(chan struct{}), period: period}
	go func() {
		defer close(w.ch)
		for rv := 100; ; rv++ {
			select {
			case <-time.After(period):
			case <-w.stop:
				return
			}
			select {
			case w.ch <- bookmark(rv):
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *ticking) ResultChan() <-chan watch.Event { return w.ch }
func (w *ticking) Stop()                          { w.once.Do(func() { close(w.stop) }) }

// tickingServer opens ticking watches and counts them.
type tickingServer struct {
	period  time.Duration
	watches atomic.Int64
}

func (s *tickingServer) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.watches.Add(1)
	return newTicking(s.period), nil
}

func TestWithIdleTimeout(t *testing.T) {
	tests := []struct {
		name        string
		bookmarks   time.Duration // the period of the server's bookmarks; 0: a watch that sends nothing
		wantWatches func(n int64) bool
		want        string
	}{
		{name: "a silent watch is reopened", wantWatches: func(n int64) bool { return n >= 4 }, want: "at least 4"},
		{name: "bookmarks count as life", bookmarks: 30 * time.Second, wantWatches: func(n int64) bool { return n == 1 }, want: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var w interface {
					WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error)
				}
				srv := &tickingServer{period: tc.bookmarks}
				silent := newScripted()
				w = srv
				if tc.bookmarks == 0 {
					w = silent
				}
				rw, err := k8s.NewRetryWatcherWithContext(t.Context(), "5", w, k8s.WithIdleTimeout(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				done := drain(rw.ResultChan())
				time.Sleep(5 * time.Minute)
				rw.Stop()
				<-done
				<-rw.Done()
				n := srv.watches.Load()
				if tc.bookmarks == 0 {
					n = int64(len(silent.rvs(t)))
				}
				if !tc.wantWatches(n) {
					t.Errorf("%d watch calls in 5 minutes with an idle timeout of 1 minute, want %s", n, tc.want)
				}
			})
		})
	}
}

// gate is a stream.Limiter that lets calls through once opened, and counts
// them.
type gate struct {
	calls atomic.Int64
	open  chan struct{}
}

func (g *gate) Wait(ctx context.Context) error {
	g.calls.Add(1)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestWithOpenLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		lw := newScripted(step{events: []watch.Event{added(6)}})
		rw, err := k8s.NewRetryWatcherWithContext(t.Context(), "5", lw, k8s.WithOpenLimiter(g))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n, calls := len(lw.rvs(t)), g.calls.Load(); n != 0 || calls != 1 {
			t.Fatalf("before the limiter let it: %d watch calls, %d Wait calls; want 0 and 1", n, calls)
		}
		close(g.open)
		receive(t, rw, 1)
		// The first watch ended; the second waits the minimum restart
		// delay, then on the limiter, then opens.
		time.Sleep(k8s.DefaultMinRestartDelay)
		synctest.Wait()
		if n, calls := len(lw.rvs(t)), g.calls.Load(); n != 2 || calls != 2 {
			t.Errorf("after: %d watch calls, %d Wait calls; want 2 and 2", n, calls)
		}
		stop(t, rw)
	})
}

// TestWithOpenLimiterStop checks that a watcher blocked on its limiter
// stops at once.
func TestWithOpenLimiterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{open: make(chan struct{})}
		lw := newScripted()
		rw, err := k8s.NewRetryWatcherWithContext(t.Context(), "5", lw, k8s.WithOpenLimiter(g))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		rw.Stop()
		synctest.Wait()
		select {
		case <-rw.Done():
		default:
			t.Fatal("Done not closed after Stop while the watcher waited on its limiter")
		}
		if n := len(lw.rvs(t)); n != 0 {
			t.Errorf("%d watch calls, want 0", n)
		}
	})
}
