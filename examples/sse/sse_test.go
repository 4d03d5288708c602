package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

func TestParser(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		lastID    string
		want      []Event
		wantErr   error // what Next returns after the events
		wantRetry time.Duration
		noRetry   bool
	}{
		{
			name:    "id event data",
			input:   "id: 1\nevent: tick\ndata: hello\n\n",
			want:    []Event{{ID: "1", Type: "tick", Data: "hello"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "type defaults to message",
			input:   "data: x\n\n",
			want:    []Event{{Type: "message", Data: "x"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "multi-line data",
			input:   "data: a\ndata: b\ndata\ndata:\n\n",
			want:    []Event{{Type: "message", Data: "a\nb\n\n"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "one leading space is dropped, no more",
			input:   "data:x\n\ndata:  y\n\n",
			want:    []Event{{Type: "message", Data: "x"}, {Type: "message", Data: " y"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "value keeps later colons",
			input:   "data: a: b\n\n",
			want:    []Event{{Type: "message", Data: "a: b"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "comments",
			input:   ": hello\ndata: x\n: between fields\n\n:\n\n: heartbeat\n\n",
			want:    []Event{{Type: "message", Data: "x"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "CRLF",
			input:   "id: 1\r\ndata: a\r\ndata: b\r\n\r\n",
			want:    []Event{{ID: "1", Type: "message", Data: "a\nb"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "CR",
			input:   "id: 1\rdata: a\rdata: b\r\rdata: c\r\r",
			want:    []Event{{ID: "1", Type: "message", Data: "a\nb"}, {ID: "1", Type: "message", Data: "c"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "mixed line endings",
			input:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want:    []Event{{Type: "message", Data: "a\nb\nc"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "CR CR is two lines",
			input:   "data: a\r\r\n",
			want:    []Event{{Type: "message", Data: "a"}},
			wantErr: io.EOF, noRetry: true, // the LF is the CR's, as in CRLF
		},
		{
			name:    "BOM skipped",
			input:   "\xEF\xBB\xBFdata: x\n\n",
			want:    []Event{{Type: "message", Data: "x"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "only one BOM skipped",
			input:   "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n",
			want:    []Event{{Type: "message", Data: "y"}}, // "\uFEFFdata" is an unknown field
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "BOM in data kept",
			input:   "data: \xEF\xBB\xBFx\n\n",
			want:    []Event{{Type: "message", Data: "\uFEFFx"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "id persists and NUL id ignored",
			input:   "id: 1\ndata: a\n\ndata: b\n\nid: 2\x003\ndata: c\n\n",
			want:    []Event{{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"}, {ID: "1", Type: "message", Data: "c"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "empty id resets",
			input:   "id: 1\ndata: a\n\nid\ndata: b\n\n",
			want:    []Event{{ID: "1", Type: "message", Data: "a"}, {Type: "message", Data: "b"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "last id from the connection",
			input:   "data: a\n\n",
			lastID:  "41",
			want:    []Event{{ID: "41", Type: "message", Data: "a"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:      "retry",
			input:     "retry: 1500\n\n",
			wantErr:   io.EOF,
			wantRetry: 1500 * time.Millisecond,
		},
		{
			name:    "retry non-digits ignored",
			input:   "retry: 1.5\nretry: 12a\nretry: -1\nretry: +3\nretry:  7\nretry:\nretry\n\n",
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:      "retry non-digits keep the last good value",
			input:     "retry: 10\n\nretry: x\n\n",
			wantErr:   io.EOF,
			wantRetry: 10 * time.Millisecond,
		},
		{
			name:    "event without data not dispatched",
			input:   "event: tick\nid: 3\n\ndata: x\n\n",
			want:    []Event{{ID: "3", Type: "message", Data: "x"}}, // the type was reset, the id kept
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "unknown fields ignored",
			input:   "foo: bar\nData: no\ndata: x\nid : no\n\n",
			want:    []Event{{Type: "message", Data: "x"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "incomplete event at end discarded",
			input:   "data: a\n\nid: 2\ndata: b\n",
			want:    []Event{{Type: "message", Data: "a"}},
			wantErr: io.ErrUnexpectedEOF, noRetry: true,
		},
		{
			name:    "cut line at end discarded",
			input:   "data: a\n\ndata: b",
			want:    []Event{{Type: "message", Data: "a"}},
			wantErr: io.ErrUnexpectedEOF, noRetry: true,
		},
		{
			name:    "comment at end is a clean end",
			input:   "data: a\n\n: bye\n",
			want:    []Event{{Type: "message", Data: "a"}},
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "empty input",
			input:   "",
			wantErr: io.EOF, noRetry: true,
		},
		{
			name:    "line too long",
			input:   "data: " + strings.Repeat("x", MaxEventSize) + "\n\n",
			wantErr: ErrTooLarge, noRetry: true,
		},
		{
			name:    "event too large",
			input:   strings.Repeat("data: "+strings.Repeat("x", 1<<16)+"\n", 16) + "\n",
			wantErr: ErrTooLarge, noRetry: true,
		},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{name: "whole", wrap: func(r io.Reader) io.Reader { return r }},
		{name: "byte by byte", wrap: iotest.OneByteReader},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				p := NewParser(rd.wrap(strings.NewReader(tt.input)), tt.lastID)
				var got []Event
				var err error
				for {
					var ev Event
					if ev, err = p.Next(); err != nil {
						break
					}
					got = append(got, ev)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Next() = %v, want %v", err, tt.wantErr)
				}
				retry, ok := p.Retry()
				if ok == tt.noRetry || retry != tt.wantRetry {
					t.Errorf("Retry() = %v, %v; want %v, %v", retry, ok, tt.wantRetry, !tt.noRetry)
				}
			})
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header string
		want   time.Duration
		ok     bool
	}{
		{name: "empty", header: ""},
		{name: "seconds", header: "3", want: 3 * time.Second, ok: true},
		{name: "zero", header: "0", ok: true},
		{name: "date", header: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second, ok: true},
		{name: "past date", header: now.Add(-time.Hour).Format(http.TimeFormat), ok: true},
		{name: "negative", header: "-1"},
		{name: "fraction", header: "1.5"},
		{name: "garbage", header: "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.header, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// newServer starts a test server; it is closed when the test ends.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestSourceOpenStatus(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		wantEnd    bool
		wantDecide errclass.Decision
	}{
		{name: "204 ends the stream", status: http.StatusNoContent, wantEnd: true},
		{name: "400 is permanent", status: http.StatusBadRequest, wantDecide: errclass.Decision{Action: errclass.Fail}},
		{name: "401 is permanent", status: http.StatusUnauthorized, wantDecide: errclass.Decision{Action: errclass.Fail}},
		{name: "404 is permanent", status: http.StatusNotFound, wantDecide: errclass.Decision{Action: errclass.Fail}},
		{name: "408 is retried", status: http.StatusRequestTimeout, wantDecide: errclass.Decision{Action: errclass.Retry}},
		{name: "429 is retried", status: http.StatusTooManyRequests, wantDecide: errclass.Decision{Action: errclass.Retry}},
		{
			name: "429 with Retry-After", status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "2"},
			wantDecide: errclass.Decision{Action: errclass.Retry, After: 2 * time.Second},
		},
		{name: "500 is retried", status: http.StatusInternalServerError, wantDecide: errclass.Decision{Action: errclass.Retry}},
		{
			name: "503 with Retry-After", status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "3"},
			wantDecide: errclass.Decision{Action: errclass.Retry, After: 3 * time.Second},
		},
		{
			name: "200 that is not an event stream", status: http.StatusOK, header: map[string]string{"Content-Type": "text/plain"},
			wantDecide: errclass.Decision{Action: errclass.Fail},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
			})
			src := &Source{URL: srv.URL, Client: srv.Client()}
			conn, err := src.Open(context.Background(), "")
			if err == nil {
				_ = conn.Close()
				t.Fatalf("Open() = nil error, want one")
			}
			if tt.wantEnd {
				if !errors.Is(err, stream.ErrEndOfStream) {
					t.Errorf("Open() = %v, want %v", err, stream.ErrEndOfStream)
				}
				return
			}
			if got := errclass.Default().Classify(err); got != tt.wantDecide {
				t.Errorf("Default().Classify(%v) = %v, want %v", err, got, tt.wantDecide)
			}
		})
	}
}

func TestSourceHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	src := &Source{URL: srv.URL, Client: srv.Client(), Header: http.Header{"Authorization": {"Bearer t"}}}
	for _, after := range []string{"", "41"} {
		if _, err := src.Open(context.Background(), after); !errors.Is(err, stream.ErrEndOfStream) {
			t.Fatalf("Open(%q) = %v, want %v", after, err, stream.ErrEndOfStream)
		}
		h := <-got
		id, sent := h["Last-Event-Id"]
		if want := after != ""; sent != want || (sent && id[0] != after) {
			t.Errorf("Open(%q) sent Last-Event-ID %q (present %v), want %q", after, id, sent, after)
		}
		if h.Get("Accept") != "text/event-stream" || h.Get("Authorization") != "Bearer t" {
			t.Errorf("Open(%q) sent headers %v, want Accept and Authorization", after, h)
		}
	}
}

// TestSourceConnectionEnds covers how a connection ends and the retry: floor.
func TestSourceConnectionEnds(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantErr   error
		wantAfter time.Duration
	}{
		{name: "clean end", body: "id: 1\ndata: x\n\n", wantErr: io.EOF},
		{name: "cut inside an event", body: "id: 1\ndata: x\n\nid: 2\ndata: y", wantErr: io.ErrUnexpectedEOF},
		{name: "clean end after retry", body: "retry: 250\n\nid: 1\ndata: x\n\n", wantErr: io.EOF, wantAfter: 250 * time.Millisecond},
		{name: "cut after retry", body: "retry: 250\nid: 1\ndata: x\n\ndata: y\n", wantErr: io.ErrUnexpectedEOF, wantAfter: 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, tt.body)
			})
			src := &Source{URL: srv.URL, Client: srv.Client()}
			ctx := context.Background()
			conn, err := src.Open(ctx, "")
			if err != nil {
				t.Fatalf("Open() = %v, want nil", err)
			}
			defer conn.Close()
			ev, err := conn.Recv(ctx)
			if want := (Event{ID: "1", Type: "message", Data: "x"}); err != nil || ev != want {
				t.Fatalf("Recv() = %+v, %v; want %+v, nil", ev, err, want)
			}
			_, err = conn.Recv(ctx)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Recv() = %v, want %v", err, tt.wantErr)
			}
			if after := errclass.Markers().Classify(err).After; after != tt.wantAfter {
				t.Errorf("Markers().Classify(%v).After = %v, want %v", err, after, tt.wantAfter)
			}
			if got, want := errclass.Default().Classify(err), (errclass.Decision{Action: errclass.Retry, After: tt.wantAfter}); got != want {
				t.Errorf("Default().Classify(%v) = %v, want %v", err, got, want)
			}
		})
	}
}

// TestSourceRetryFloorPersists: the server's reconnection time outlives its
// connection and floors the next Open's failures, under a longer Retry-After.
func TestSourceRetryFloorPersists(t *testing.T) {
	answers := []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "retry: 1500\n\n")
		},
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) },
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		},
	}
	n := 0
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		answers[n](w)
		n++
	})
	src := &Source{URL: srv.URL, Client: srv.Client()}
	ctx := context.Background()
	conn, err := src.Open(ctx, "")
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	if _, err := conn.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv() = %v, want %v", err, io.EOF)
	}
	_ = conn.Close()
	for _, want := range []time.Duration{1500 * time.Millisecond, 2 * time.Second} {
		_, err := src.Open(ctx, "")
		if got := errclass.Default().Classify(err); got != (errclass.Decision{Action: errclass.Retry, After: want}) {
			t.Errorf("Default().Classify(%v) = %v, want retry after %v", err, got, want)
		}
	}
}

// blockingServer answers 200 with an event stream and then sends nothing
// until the request ends or the test is over.
func blockingServer(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

func TestConnCloseUnblocksRecv(t *testing.T) {
	srv := blockingServer(t)
	src := &Source{URL: srv.URL, Client: srv.Client()}
	conn, err := src.Open(context.Background(), "")
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Recv(context.Background())
		done <- err
	}()
	if err := conn.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("Recv() after Close = nil, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv() still blocked 10s after Close")
	}
}

func TestConnRecvHonoursContext(t *testing.T) {
	srv := blockingServer(t)
	src := &Source{URL: srv.URL, Client: srv.Client()}
	conn, err := src.Open(context.Background(), "")
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := conn.Recv(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Recv() = %v, want %v", err, context.Canceled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recv() still blocked 10s after its context ended")
	}
}
