package sse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// serve starts h on a loopback httptest server for the test and returns a
// Source for it.
func serve(t *testing.T, h http.HandlerFunc) *sse.Source {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &sse.Source{URL: ts.URL, Client: ts.Client()}
}

// eventStream answers 200 text/event-stream with body.
func eventStream(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

// recvAll reads conn to its end.
func recvAll(t *testing.T, conn stream.Conn[sse.Event]) ([]sse.Event, error) {
	t.Helper()
	defer conn.Close()
	var evs []sse.Event
	for {
		ev, err := conn.Recv(context.Background())
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestOpenRequest(t *testing.T) {
	got := make(chan http.Header, 1)
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	src.Header = http.Header{"Authorization": {"Bearer t"}, "Last-Event-Id": {"stale"}}
	tests := []struct {
		name   string
		after  string
		lastID []string
	}{
		{name: "no cursor, no Last-Event-ID", after: "", lastID: nil},
		{name: "the cursor as Last-Event-ID", after: "42", lastID: []string{"42"}},
		{name: "UTF-8 sent as it is", after: "é✓", lastID: []string{"é✓"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := src.Open(context.Background(), tt.after); !errors.Is(err, stream.ErrEndOfStream) {
				t.Fatalf("Open() = %v, want %v", err, stream.ErrEndOfStream)
			}
			h := <-got
			want := map[string][]string{
				"Accept":        {"text/event-stream"},
				"Cache-Control": {"no-cache"},
				"Authorization": {"Bearer t"},
				"Last-Event-Id": tt.lastID,
			}
			for k, v := range want {
				if diff := cmp.Diff(v, h.Values(k)); diff != "" {
					t.Errorf("request header %s (-want +got)\n%s", k, diff)
				}
			}
		})
	}
	if diff := cmp.Diff(http.Header{"Authorization": {"Bearer t"}, "Last-Event-Id": {"stale"}}, src.Header); diff != "" {
		t.Errorf("Open changed Source.Header (-want +got)\n%s", diff)
	}
}

// TestOpenResponses checks what every kind of response means to the
// Resumer: the decision errclass.Default makes on Open's error.
func TestOpenResponses(t *testing.T) {
	const date = "Mon, 02 Jan 2006 15:04:05 GMT"
	tests := []struct {
		name       string
		code       int
		header     map[string]string
		open       bool // Open succeeds
		end        bool // Open returns stream.ErrEndOfStream
		want       errclass.Decision
		wantInText string // in the error's text
	}{
		{name: "200 event stream", code: 200, header: map[string]string{"Content-Type": "text/event-stream"}, open: true},
		{name: "200 event stream with parameters", code: 200, header: map[string]string{"Content-Type": "Text/Event-Stream; charset=utf-8"}, open: true},
		{name: "200 HTML", code: 200, header: map[string]string{"Content-Type": "text/html"}, want: errclass.Decision{Action: errclass.Fail}, wantInText: `200 OK with Content-Type "text/html", not text/event-stream, body "body\n"`},
		{name: "200 without Content-Type", code: 200, header: map[string]string{"Content-Type": ""}, want: errclass.Decision{Action: errclass.Fail}, wantInText: `Content-Type ""`},
		{name: "204 ends the stream", code: 204, end: true},
		{name: "201", code: 201, want: errclass.Decision{Action: errclass.Fail}, wantInText: "201 Created"},
		{name: "304 not followed", code: 304, want: errclass.Decision{Action: errclass.Fail}, wantInText: "304 Not Modified"},
		{name: "400", code: 400, want: errclass.Decision{Action: errclass.Fail}, wantInText: `400 Bad Request, Content-Type "text/plain; charset=utf-8", body "body\n"`},
		{name: "401", code: 401, want: errclass.Decision{Action: errclass.Fail}},
		{name: "403", code: 403, want: errclass.Decision{Action: errclass.Fail}},
		{name: "404", code: 404, want: errclass.Decision{Action: errclass.Fail}},
		{name: "410 expires the cursor", code: 410, want: errclass.Decision{Action: errclass.Expired}, wantInText: "410 Gone"},
		{name: "425 retried", code: 425, want: errclass.Decision{Action: errclass.Retry}},
		{name: "408 retried", code: 408, want: errclass.Decision{Action: errclass.Retry}},
		{name: "429 retried", code: 429, want: errclass.Decision{Action: errclass.Retry}, wantInText: "429 Too Many Requests"},
		{name: "429 Retry-After seconds", code: 429, header: map[string]string{"Retry-After": "7"}, want: errclass.Decision{Action: errclass.Retry, After: 7 * time.Second}},
		{name: "503 Retry-After HTTP date, from the Date header", code: 503, header: map[string]string{"Date": date, "Retry-After": "Mon, 02 Jan 2006 15:05:35 GMT"}, want: errclass.Decision{Action: errclass.Retry, After: 90 * time.Second}},
		{name: "503 Retry-After date in the past", code: 503, header: map[string]string{"Date": date, "Retry-After": "Mon, 02 Jan 2006 15:00:00 GMT"}, want: errclass.Decision{Action: errclass.Retry}},
		{name: "503 Retry-After RFC 850 date", code: 503, header: map[string]string{"Date": date, "Retry-After": "Monday, 02-Jan-06 15:04:15 GMT"}, want: errclass.Decision{Action: errclass.Retry, After: 10 * time.Second}},
		{name: "503 Retry-After too large saturates", code: 503, header: map[string]string{"Retry-After": "99999999999999999999999"}, want: errclass.Decision{Action: errclass.Retry, After: math.MaxInt64}},
		{name: "503 Retry-After garbage ignored", code: 503, header: map[string]string{"Retry-After": "soon"}, want: errclass.Decision{Action: errclass.Retry}},
		{name: "503 Retry-After negative ignored", code: 503, header: map[string]string{"Retry-After": "-5"}, want: errclass.Decision{Action: errclass.Retry}},
		{name: "500 retried", code: 500, want: errclass.Decision{Action: errclass.Retry}, wantInText: "500 Internal Server Error"},
		{name: "502 retried", code: 502, want: errclass.Decision{Action: errclass.Retry}},
		{name: "504 retried", code: 504, want: errclass.Decision{Action: errclass.Retry}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.code)
				_, _ = io.WriteString(w, "body\n")
			})
			conn, err := src.Open(context.Background(), "")
			if tt.open {
				if err != nil {
					t.Fatalf("Open() = %v, want a connection", err)
				}
				_ = conn.Close()
				return
			}
			if conn != nil {
				_ = conn.Close()
				t.Fatalf("Open() returned a connection, want an error")
			}
			if tt.end {
				if !errors.Is(err, stream.ErrEndOfStream) {
					t.Errorf("Open() = %v, want %v", err, stream.ErrEndOfStream)
				}
				return
			}
			if got := errclass.Default().Classify(err); got != tt.want {
				t.Errorf("Classify(Open()) = %v, want %v; error: %v", got, tt.want, err)
			}
			var serr *errclass.StatusError
			if !errors.As(err, &serr) || serr.Code != tt.code {
				t.Errorf("Open() = %v, want a *StatusError with code %d", err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.wantInText) {
				t.Errorf("Open() = %q, want it to contain %q", err, tt.wantInText)
			}
		})
	}
}

func TestOpenFollowsRedirects(t *testing.T) {
	for _, code := range []int{301, 302, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			src := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/moved" {
					http.Redirect(w, r, "/moved", code)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: after %s\n\n", r.Header.Get("Last-Event-ID"))
			})
			conn, err := src.Open(context.Background(), "7")
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			evs, err := recvAll(t, conn)
			want := []sse.Event{{ID: "7", Type: "message", Data: "after 7"}}
			if diff := cmp.Diff(want, evs); diff != "" || err != io.EOF {
				t.Errorf("Recv() ended with %v, want io.EOF; events (-want +got)\n%s", err, diff)
			}
		})
	}
}

// TestOpenRedirectLoop: a redirect the Client refuses to follow (net/http
// stops after 10) is permanent, as a 3xx not followed, not retried as a
// request that got no response.
func TestOpenRedirectLoop(t *testing.T) {
	var requests atomic.Int64
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	_, err := src.Open(context.Background(), "7")
	if got := errclass.Default().Classify(err); got.Action != errclass.Fail {
		t.Errorf("Classify(Open()) = %v, want fail; error: %v", got, err)
	}
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("Open() = %v, want the Client's redirect error", err)
	}
	if n := requests.Load(); n != 10 {
		t.Errorf("the server got %d requests, want 10", n)
	}
}

// TestOpenRedirectLoopEndsRun: under a Resumer, the loop ends Run at once.
func TestOpenRedirectLoopEndsRun(t *testing.T) {
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"x", http.StatusTemporaryRedirect)
	})
	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(context.Context, sse.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("Run() = %v, want the redirect error", err)
	}
	if st := r.Stats(); st.Retried != 0 || st.Failed != 1 {
		t.Errorf("Stats() Retried, Failed = %d, %d, want 0, 1", st.Retried, st.Failed)
	}
}

// TestOpenBadSettings: settings that cannot work fail at once, marked
// permanent, before any request.
func TestOpenBadSettings(t *testing.T) {
	tests := []struct {
		name   string
		src    *sse.Source
		after  string
		target error
		text   string
	}{
		{name: "negative MaxEventSize", src: &sse.Source{MaxEventSize: -1}, target: stream.ErrInvalidOption, text: "sse: Source: MaxEventSize = -1: must not be negative"},
		{name: "Client with a Timeout", src: &sse.Source{Client: &http.Client{Timeout: time.Minute}}, target: stream.ErrInvalidOption, text: "sse: Source: Client.Timeout = 1m0s: must be zero; it would cut every stream"},
		{name: "header with a newline", src: &sse.Source{Header: http.Header{"X-A": {"a\nb"}}}, target: stream.ErrInvalidOption, text: `sse: Source: Header[X-A] = "a\nb": has a control character`},
		{name: "cursor with a control character", src: &sse.Source{}, after: "a\x01b", target: sse.ErrUnsendableID, text: `sse: event id cannot be sent back in a Last-Event-ID header: id "a\x01b" has byte 0x01 at 1`},
		{name: "cursor with DEL", src: &sse.Source{}, after: "\x7f", target: sse.ErrUnsendableID},
		{name: "bad URL", src: &sse.Source{URL: "http://a b/"}, target: stream.ErrInvalidOption, text: `sse: Source: URL = "http://a b/": does not parse`},
		{name: "relative URL", src: &sse.Source{URL: "/events"}, target: stream.ErrInvalidOption, text: `sse: Source: URL = "/events": must be an absolute URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests := 0
			ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests++ }))
			defer ts.Close()
			if tt.src.URL == "" {
				tt.src.URL = ts.URL
			}
			_, err := tt.src.Open(context.Background(), tt.after)
			if got := errclass.Default().Classify(err).Action; got != errclass.Fail {
				t.Errorf("Classify(Open()) = %v, want fail; error: %v", got, err)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("Open() = %v, want it to match %v", err, tt.target)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.text) {
				t.Errorf("Open() = %q, want it to start with %q", err, tt.text)
			}
			if requests != 0 {
				t.Errorf("the server got %d requests, want 0", requests)
			}
		})
	}
}

func TestEventIDTabAndUnicode(t *testing.T) {
	for _, id := range []string{"", "1", "a\tb", "é✓", "\uFFFD", " x "} {
		if c, err := sse.EventID(sse.Event{ID: id}); c != id || err != nil {
			t.Errorf("EventID(%q) = %q, %v; want %q, nil", id, c, err, id)
		}
	}
	if c, err := sse.EventID(sse.Event{ID: "3", Heartbeat: true}); c != "3" || !errors.Is(err, cursor.ProgressOnly) {
		t.Errorf("EventID(heartbeat 3) = %q, %v; want 3, %v", c, err, cursor.ProgressOnly)
	}
	for _, id := range []string{"\x01", "a\x1fb", "\x7f", "\x0b", "\x00"} {
		if _, err := sse.EventID(sse.Event{ID: id}); !errors.Is(err, sse.ErrUnsendableID) {
			t.Errorf("EventID(%q) = %v, want %v", id, err, sse.ErrUnsendableID)
		}
	}
}

// TestRetryFloor: once the server set a reconnection time, every end of a
// connection and every failed Open carries it as a floor, across
// connections, until another retry: changes it.
func TestRetryFloor(t *testing.T) {
	var mu sync.Mutex
	next := []http.HandlerFunc{
		eventStream("retry: 5000\n\ndata: a\n\n"), // sets 5s, ends cleanly
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) },
		func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Retry-After", "10"); w.WriteHeader(503) },
		eventStream("data: b\n\ndata: cut"),    // ends inside an event
		eventStream("retry: 0\n\ndata: c\n\n"), // clears it
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) },
		eventStream("retry: 999999999999999\n\n"), // 15 digits
	}
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := next[0]
		next = next[1:]
		mu.Unlock()
		h(w, r)
	})
	end := func() error { // the error that ends the next Open or connection
		conn, err := src.Open(context.Background(), "")
		if err != nil {
			return err
		}
		_, err = recvAll(t, conn)
		return err
	}
	tests := []struct {
		name  string
		clean bool
		after time.Duration
		has   bool
	}{
		{name: "clean end after retry: 5000", clean: true, after: 5 * time.Second, has: true},
		{name: "500 on the next Open", after: 5 * time.Second, has: true},
		{name: "503 asking for longer", after: 10 * time.Second, has: true},
		{name: "a cut connection", after: 5 * time.Second, has: true},
		{name: "clean end after retry: 0", clean: true},
		{name: "500 with no reconnection time, marked by errclass.FromHTTP", after: 0, has: true},
		{name: "a retry: longer than a Duration holds saturates", clean: true, after: math.MaxInt64, has: true},
	}
	for _, tt := range tests {
		err := end()
		if got := errors.Is(err, io.EOF); got != tt.clean {
			t.Errorf("%s: end = %v, want clean %v", tt.name, err, tt.clean)
		}
		d := errclass.Markers().Classify(err) // Retry with After for a RetryAfter mark, Unknown without one
		if has := d.Action == errclass.Retry; d.After != tt.after || has != tt.has {
			t.Errorf("%s: Markers().Classify(%v) = %v; want a RetryAfter mark: %v, after %v", tt.name, err, d, tt.has, tt.after)
		}
	}
}

func TestEventTooLarge(t *testing.T) {
	src := serve(t, eventStream("data: small\n\ndata: "+strings.Repeat("x", 100)+"\n\n"))
	src.MaxEventSize = 64
	conn, err := src.Open(context.Background(), "")
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	evs, err := recvAll(t, conn)
	if len(evs) != 1 || !errors.Is(err, sse.ErrEventTooLarge) {
		t.Fatalf("Recv() = %d events then %v, want 1 then %v", len(evs), err, sse.ErrEventTooLarge)
	}
	if got := errclass.Default().Classify(err).Action; got != errclass.Fail {
		t.Errorf("Classify(%v) = %v, want fail", err, got)
	}
}

// TestCutInsideEvent: a server that drops the connection inside an event
// ends it with a retried failure, not a clean end, and the partial event is
// not delivered.
func TestCutInsideEvent(t *testing.T) {
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: whole\n\nid: 2\ndata: hal")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	conn, err := src.Open(context.Background(), "")
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	evs, err := recvAll(t, conn)
	want := []sse.Event{{ID: "1", Type: "message", Data: "whole"}}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got)\n%s", diff)
	}
	if err == nil || errors.Is(err, io.EOF) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Recv() = %v, want a failure matching io.ErrUnexpectedEOF", err)
	}
	if got := errclass.Default().Classify(err).Action; got != errclass.Retry {
		t.Errorf("Classify(%v) = %v, want retry", err, got)
	}
}

// hangingServer answers with headers and then writes nothing until the
// test ends.
func hangingServer(t *testing.T, code int) *sse.Source {
	t.Helper()
	release := make(chan struct{})
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(code)
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return src
}

func TestRecvCancelled(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("Open's context %v", same), func(t *testing.T) {
			src := hangingServer(t, 200)
			openCtx, cancelOpen := context.WithCancel(context.Background())
			defer cancelOpen()
			conn, err := src.Open(openCtx, "")
			if err != nil {
				t.Fatalf("Open() = %v", err)
			}
			defer conn.Close()
			ctx, cancel := openCtx, cancelOpen
			if !same {
				ctx, cancel = context.WithCancel(context.Background())
				defer cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, err := conn.Recv(ctx)
				done <- err
			}()
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Recv() = %v, want %v", err, context.Canceled)
			}
		})
	}
}

func TestCloseUnblocksRecv(t *testing.T) {
	src := hangingServer(t, 200)
	conn, err := src.Open(context.Background(), "")
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Recv(context.Background())
		done <- err
	}()
	if err := conn.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Recv() = %v, want %v", err, net.ErrClosed)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if _, err := conn.Recv(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Recv() after Close = %v, want %v", err, net.ErrClosed)
	}
}

func TestOpenCancelled(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer ts.Close()
	src := &sse.Source{URL: ts.URL, Client: ts.Client()}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if _, err := src.Open(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Open() = %v, want %v", err, context.Canceled)
	}
}
