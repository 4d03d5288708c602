package interop_test

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	r3sse "github.com/r3labs/sse/v2"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// r3labs/sse's server numbers events from 0 and, given Last-Event-ID n,
// replays every event whose ID is n or more: the event the client last saw
// comes again on every reconnect.

// r3labsRun publishes total events on an r3labs server whose connections
// are cut at random, and runs a Resumer made by newResumer over it until
// the handler saw ID total-1. It returns the IDs the handler saw.
func r3labsRun(t *testing.T, seed uint64, total int, newResumer func(src *sse.Source) (*stream.Resumer[sse.Event, string], error)) []int {
	t.Helper()
	server := r3sse.New()
	server.CreateStream("events")
	defer server.Close() // after ts.Close: its handlers need the server's loop to end
	ts := cuttingServer(server, seed, 3000, 0)
	defer ts.Close()
	published := make(chan struct{})
	defer func() { <-published }()
	go func() {
		defer close(published)
		tick := time.NewTicker(100 * time.Microsecond) // pacing, so events go out live too
		defer tick.Stop()
		for n := range total {
			server.Publish("events", &r3sse.Event{Data: []byte(fmt.Sprint("event ", n))})
			<-tick.C
		}
	}()

	r, err := newResumer(&sse.Source{URL: ts.URL + "?stream=events", Client: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
		n, err := strconv.Atoi(ev.ID)
		if err != nil || ev.Data != fmt.Sprint("event ", n) {
			return fmt.Errorf("event %+v arrived", ev)
		}
		if seen = append(seen, n); n == total-1 {
			return stream.ErrStop
		}
		return nil
	})
	if err != nil || len(seen) == 0 || seen[len(seen)-1] != total-1 {
		t.Fatalf("Run() = %v after %d events, want nil after event %d", err, len(seen), total-1)
	}
	return seen
}

// TestR3labsServerRepeatsTheLastEvent shows the server's inclusive replay
// through the plain extractor: nothing is lost and the order holds, but the
// last event before each reconnect is delivered again.
func TestR3labsServerRepeatsTheLastEvent(t *testing.T) {
	const total = 500
	seen := r3labsRun(t, 1, total, func(src *sse.Source) (*stream.Resumer[sse.Event, string], error) {
		return stream.New(src, sse.EventID, cursor.NewMemory(""), stream.WithBackoff(backoff.Constant(time.Millisecond)))
	})
	repeats, want := 0, 0
	for i, n := range seen {
		switch {
		case n == want:
			want++
		case i > 0 && n == seen[i-1]:
			repeats++ // the last event seen, replayed after a reconnect
		default:
			t.Fatalf("event %d arrived after %v, want %d or a repeat of the last", n, seen[max(0, i-3):i], want)
		}
	}
	if want != total || repeats == 0 {
		t.Errorf("%d events in order with %d repeats, want %d with some repeats", want, repeats, total)
	}
	t.Logf("%d events, %d delivered twice", total, repeats)
}

// byNumber orders decimal event IDs; "" (no id yet) is before any.
func byNumber(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// TestR3labsServerExactlyOnce: with stream.WithSkipRepeats (and the order of
// the IDs), every event arrives exactly once, in order, and the repeats the
// server sent are counted as skipped.
func TestR3labsServerExactlyOnce(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			const total = 500
			var r *stream.Resumer[sse.Event, string]
			seen := r3labsRun(t, seed, total, func(src *sse.Source) (*stream.Resumer[sse.Event, string], error) {
				var err error
				r, err = stream.New(src, sse.EventID, cursor.NewMemory(""),
					stream.WithCursorOrder(byNumber), stream.WithSkipRepeats(),
					stream.WithBackoff(backoff.Constant(time.Millisecond)))
				return r, err
			})
			for i, n := range seen {
				if n != i {
					t.Fatalf("event %d arrived as number %d (after %v)", n, i, seen[max(0, i-3):i])
				}
			}
			if st := r.Stats(); st.Skipped == 0 {
				t.Errorf("Stats().Skipped = 0, want the server's repeats skipped")
			}
		})
	}
}
