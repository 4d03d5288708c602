package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/errclass"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the demo as `go run ./examples/classifier` does, with a few
// seeds, and asserts that its end check passed.
func TestRun(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, []string{"-seed", strconv.FormatUint(seed, 10)}); err != nil {
				t.Fatalf("run() = %v, want nil; output:\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "ok: total") {
				t.Errorf("run() output lacks the end check's verdict:\n%s", out.String())
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, io.Discard, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run(cancelled) = %v, want %v", err, context.Canceled)
	}
}

func TestClassifier(t *testing.T) {
	retry := errclass.Decision{Action: errclass.Retry}
	tests := []struct {
		name      string
		err       error
		want      errclass.Decision
		wantStale bool
	}{
		{name: "401 refreshes the token", err: &StatusError{Code: 401}, want: retry, wantStale: true},
		{name: "401 wrapped", err: fmt.Errorf("stream: resync after x failed: %w", &StatusError{Code: 401}), want: retry, wantStale: true},
		{name: "401 on a fresh token fails", err: &StatusError{Code: 401, FreshToken: true}, want: errclass.Decision{Action: errclass.Fail}},
		{name: "410 expires the cursor", err: &StatusError{Code: 410}, want: errclass.Decision{Action: errclass.Expired}},
		{name: "429 waits", err: &StatusError{Code: 429, RetryAfter: time.Second}, want: errclass.Decision{Action: errclass.Retry, After: time.Second}},
		{name: "503 waits", err: &StatusError{Code: 503, RetryAfter: 2 * time.Second}, want: errclass.Decision{Action: errclass.Retry, After: 2 * time.Second}},
		{name: "500 retries", err: &StatusError{Code: 500}, want: retry},
		{name: "408 retries", err: &StatusError{Code: 408}, want: retry},
		{name: "404 fails", err: &StatusError{Code: 404}, want: errclass.Decision{Action: errclass.Fail}},
		{name: "marked permanent fails", err: errclass.Permanent(errors.New("bad URL")), want: errclass.Decision{Action: errclass.Fail}},
		{name: "marker beats status", err: errclass.Permanent(&StatusError{Code: 500}), want: errclass.Decision{Action: errclass.Fail}},
		{name: "malformed fails", err: fmt.Errorf("%w: line 3", ErrMalformed), want: errclass.Decision{Action: errclass.Fail}},
		{name: "cut page retries", err: fmt.Errorf("api: reading items: %w", io.ErrUnexpectedEOF), want: retry},
		{name: "unknown is left to Default", err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, want: errclass.Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens := &Tokens{}
			if got := NewClassifier(tokens).Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if got := tokens.stale.Load(); got != tt.wantStale {
				t.Errorf("after Classify(%v), token stale = %v, want %v", tt.err, got, tt.wantStale)
			}
		})
	}
}

// TestVerify shows that the end check catches what it must.
func TestVerify(t *testing.T) {
	final := Item{Seq: 4, Total: 10, Snapshot: true}
	allSeen := map[string]int{"401 retry": 1, "410 expired": 1, "429 retry": 1, "500 retry": 1, "cut retry": 1}
	good := []Item{{Seq: 1, Delta: 1}, {Seq: 3, Total: 6, Snapshot: true}, {Seq: 4, Delta: 4}}
	tests := []struct {
		name      string
		items     []Item
		seen      map[string]int
		refreshes int64
		ok        bool
	}{
		{name: "good", items: good, seen: allSeen, refreshes: 1, ok: true},
		{name: "repeat", items: append(good[:3:3], Item{Seq: 4, Delta: 4}), seen: allSeen, refreshes: 1},
		{name: "gap", items: []Item{{Seq: 1, Delta: 1}, {Seq: 3, Total: 6, Snapshot: true}, {Seq: 5}}, seen: allSeen, refreshes: 1},
		{name: "wrong total", items: []Item{{Seq: 1, Delta: 1}, {Seq: 3, Total: 7, Snapshot: true}, {Seq: 4, Delta: 4}}, seen: allSeen, refreshes: 1},
		{name: "no resync", items: []Item{{Seq: 1, Delta: 1}, {Seq: 2, Delta: 2}, {Seq: 3, Delta: 3}, {Seq: 4, Delta: 4}}, seen: allSeen, refreshes: 1},
		{name: "snapshot behind", items: []Item{{Seq: 1, Delta: 1}, {Seq: 2, Delta: 2}, {Seq: 1, Total: 1, Snapshot: true}}, seen: allSeen, refreshes: 1},
		{name: "no refresh", items: good, seen: allSeen},
		{name: "a rule never fired", items: good, seen: map[string]int{"401 retry": 1}, refreshes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st state
			for _, it := range tt.items {
				st.apply(it)
			}
			if err := st.verify(final, tt.seen, tt.refreshes); (err == nil) != tt.ok {
				t.Errorf("verify() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestRunCancelledMidStream: cancelling in the middle of the stream returns
// the context's error, and goleak (TestMain) shows that the server, its
// handlers and the client's connections are all gone.
func TestRunCancelledMidStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer // run writes from one goroutine
	cancelAtMarker := writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("item 10:")) {
			cancel()
		}
		return out.Write(p)
	})
	if err := run(ctx, cancelAtMarker, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run() = %v, want %v; output:\n%s", err, context.Canceled, out.String())
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
