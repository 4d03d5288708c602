package sse_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// The tests in this file run an HTTP server and client over in-memory
// connections (net.Pipe) inside a testing/synctest bubble, where time is
// fake: minutes of heartbeats and timeouts pass at once, and "nothing
// happens for 30 seconds" is exact.

// pipeNet is a listener whose connections are net.Pipe pairs made by its
// dial, which synctest sees block like any channel.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeNet() *pipeNet {
	return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeNet) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (l *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// servePipe serves h over a pipeNet in the current bubble and returns a
// Source for it; the server and the client's connections are closed when
// the test ends.
func servePipe(t *testing.T, h http.HandlerFunc) *sse.Source {
	l := newPipeNet()
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	})
	return &sse.Source{URL: "http://pipe/events", Client: &http.Client{Transport: tr}}
}

// disconnects records the errors that ended connections.
type disconnects struct {
	mu   sync.Mutex
	errs []error
}

func (d *disconnects) hooks() stream.Option {
	return stream.WithHooks(stream.Hooks[string]{OnDisconnect: func(e stream.DisconnectEvent[string]) {
		d.mu.Lock()
		d.errs = append(d.errs, e.Err)
		d.mu.Unlock()
	}})
}

func (d *disconnects) idle() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, err := range d.errs {
		if errors.Is(err, stream.ErrIdleTimeout) {
			n++
		}
	}
	return n
}

// writeFlush writes s and flushes it to the client.
func writeFlush(w http.ResponseWriter, s string) {
	_, _ = io.WriteString(w, s)
	_ = http.NewResponseController(w).Flush()
}

// TestHeartbeatsKeepAQuietStreamAlive: a server that sends one event, then
// only a comment every 10s for ten minutes, then an event, is never taken
// for stalled by a 30s idle timeout.
func TestHeartbeatsKeepAQuietStreamAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := servePipe(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("Last-Event-ID") {
			case "2":
				w.WriteHeader(http.StatusNoContent)
				return
			case "1":
				http.Error(w, "the client took a quiet stream for a stalled one", http.StatusConflict)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			writeFlush(w, "id: 1\ndata: a\n\n")
			for range 60 {
				select {
				case <-time.After(10 * time.Second):
				case <-r.Context().Done():
					return
				}
				writeFlush(w, ": ping\n")
			}
			writeFlush(w, "id: 2\ndata: b\n\n")
		})
		var d disconnects
		r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), stream.WithIdleTimeout(30*time.Second), d.hooks())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var got []string
		if err := r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
			got = append(got, ev.Data)
			return nil
		}); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if d.idle() != 0 || len(got) != 2 {
			t.Errorf("%d idle timeouts, events %q; want 0 and [a b]", d.idle(), got)
		}
		st := r.Stats()
		if st.Opens != 1 || st.Progress != 60 {
			t.Errorf("Stats() = %d opens, %d progress-only events; want 1 (then a 204) and 60 heartbeats", st.Opens, st.Progress)
		}
		if elapsed := time.Since(start); elapsed != 10*time.Minute {
			t.Errorf("the stream lasted %v of fake time, want 10m0s", elapsed)
		}
	})
}

// TestIdleTimeoutDetectsASilentServer: a server that stops writing without
// closing (a half-open connection, seen from the client) is closed after the
// idle timeout, and the stream resumes after the last event.
func TestIdleTimeoutDetectsASilentServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lastIDs []string
		src := servePipe(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
			if r.Header.Get("Last-Event-ID") == "1" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			writeFlush(w, "id: 1\ndata: a\n\n")
			<-r.Context().Done() // silent until the client gives up
		})
		var d disconnects
		r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), stream.WithIdleTimeout(30*time.Second), d.hooks())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := r.Run(context.Background(), func(context.Context, sse.Event) error { return nil }); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		if d.idle() != 1 {
			t.Errorf("%d idle timeouts (disconnects: %v), want 1", d.idle(), d.errs)
		}
		if elapsed := time.Since(start); elapsed < 30*time.Second || elapsed > 3*time.Minute {
			t.Errorf("the silent connection was closed after %v of fake time, want between the idle timeout and a few minutes", elapsed)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lastIDs) != 2 || lastIDs[1] != "1" {
			t.Errorf("Last-Event-ID of each request = %q, want [\"\" \"1\"]", lastIDs)
		}
	})
}

// TestServerDelayCapped: a retry: too long for a time.Duration saturates,
// and stream.WithMaxServerDelay (or its default) caps the wait.
func TestServerDelayCapped(t *testing.T) {
	tests := []struct {
		name string
		opts []stream.Option
		want time.Duration
	}{
		{name: "WithMaxServerDelay(1m)", opts: []stream.Option{stream.WithMaxServerDelay(time.Minute)}, want: time.Minute},
		{name: "the default cap", want: 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := servePipe(t, func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Last-Event-ID") == "1" {
						w.WriteHeader(http.StatusNoContent)
						return
					}
					w.Header().Set("Content-Type", "text/event-stream")
					writeFlush(w, "retry: 999999999999999\nid: 1\ndata: a\n\n")
				})
				var delays []time.Duration
				opts := append(tt.opts, stream.WithHooks(stream.Hooks[string]{OnRetry: func(e stream.RetryEvent[string]) {
					delays = append(delays, e.Delay)
				}}))
				r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), opts...)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if err := r.Run(context.Background(), func(context.Context, sse.Event) error { return nil }); err != nil {
					t.Fatalf("Run() = %v, want nil", err)
				}
				if len(delays) != 1 || delays[0] != tt.want || time.Since(start) != tt.want {
					t.Errorf("reopen delays %v, run lasted %v; want [%v] and %v", delays, time.Since(start), tt.want, tt.want)
				}
			})
		})
	}
}

// TestOpenErrorBodyNeverSent: a server that sends an error status and then
// no body holds Open for a moment only.
func TestOpenErrorBodyNeverSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := servePipe(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		})
		start := time.Now()
		_, err := src.Open(context.Background(), "")
		var serr *errclass.StatusError
		if !errors.As(err, &serr) || serr.Code != http.StatusServiceUnavailable {
			t.Errorf("Open() = %v, want a *StatusError with code 503", err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("Open() returned after %v of fake time, want at most 5s", elapsed)
		}
	})
}

// TestIdleCloseKeepsTheServersRetry: after retry: 60000 and a server that
// goes silent, the idle watchdog's close does not drop the server's
// reconnection time: the reconnect waits the minute.
func TestIdleCloseKeepsTheServersRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var opened []time.Time
		src := servePipe(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			opened = append(opened, time.Now())
			mu.Unlock()
			if r.Header.Get("Last-Event-ID") == "1" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			writeFlush(w, "retry: 60000\nid: 1\ndata: a\n\n")
			<-r.Context().Done() // silent until the client gives up
		})
		var d disconnects
		r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), stream.WithIdleTimeout(10*time.Second), d.hooks())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Run(context.Background(), func(context.Context, sse.Event) error { return nil }); err != nil {
			t.Fatalf("Run() = %v, want nil", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(opened) != 2 || d.idle() != 1 {
			t.Fatalf("%d opens and %d idle timeouts, want 2 and 1", len(opened), d.idle())
		}
		if gap := opened[1].Sub(opened[0]); gap < time.Minute {
			t.Errorf("reconnected %v after the first open, want at least the server's 1m retry", gap)
		}
	})
}
