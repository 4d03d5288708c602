package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/internal/testio"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the demo as `go run ./examples/sse` does, with a few seeds,
// and asserts that its end check passed.
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
			if !strings.Contains(out.String(), "ok: all 100 events arrived exactly once and in order") {
				t.Errorf("run() output lacks the end check's verdict:\n%s", out.String())
			}
			if !strings.Contains(out.String(), "reconnect after") {
				t.Errorf("run() output shows no reconnect:\n%s", out.String())
			}
		})
	}
}

func TestRunBadFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-events", "0"}); err == nil {
		t.Errorf("run(-events 0) = nil, want an error")
	}
}

// TestChecker shows that the end check catches what it must.
func TestChecker(t *testing.T) {
	ev := func(n int) sse.Event { return sse.Event{ID: strconv.Itoa(n), Type: "tick", Data: payload(n)} }
	tests := []struct {
		name   string
		events []sse.Event
		ok     bool
	}{
		{name: "all in order", events: []sse.Event{ev(1), ev(2), ev(3)}, ok: true},
		{name: "duplicate", events: []sse.Event{ev(1), ev(2), ev(2), ev(3)}},
		{name: "gap", events: []sse.Event{ev(1), ev(3)}},
		{name: "missing tail", events: []sse.Event{ev(1), ev(2)}},
		{name: "reordered", events: []sse.Event{ev(2), ev(1), ev(3)}},
		{name: "wrong data", events: []sse.Event{ev(1), {ID: "2", Type: "tick", Data: "tick 2"}, ev(3)}},
		{name: "bad id", events: []sse.Event{ev(1), ev(2), {ID: "x"}, ev(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checker{total: 3}
			for _, e := range tt.events {
				c.add(e)
			}
			if err := c.verify(); (err == nil) != tt.ok {
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
	out := &testio.CancelAt{Marker: "event 10 ", Cancel: cancel}
	if err := run(ctx, out, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run() = %v, want %v; output:\n%s", err, context.Canceled, out.String())
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, io.Discard, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("run(cancelled) = %v, want %v", err, context.Canceled)
	}
}
