package sse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// fastBackoff keeps the tests' reconnects short.
var fastBackoff = stream.WithBackoff(backoff.Constant(time.Millisecond))

// flaky serves events 1..total, resuming after Last-Event-ID, and drops
// every connection after a random number of bytes, often inside an event;
// after the last event it answers 204.
type flaky struct {
	total int

	mu  sync.Mutex
	rng *rand.Rand
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	last := 0
	if h := r.Header.Get("Last-Event-ID"); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 || n > f.total {
			http.Error(w, "bad Last-Event-ID "+strconv.Quote(h), http.StatusBadRequest)
			return
		}
		last = n
	}
	if last == f.total {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	f.mu.Lock()
	budget := f.rng.IntN(300)
	eol := []string{"\n", "\r\n", "\r"}[f.rng.IntN(3)]
	f.mu.Unlock()
	var b strings.Builder
	for n := last + 1; n <= f.total; n++ {
		fmt.Fprintf(&b, "id: %d%sdata: event %d%sdata: line 2%s: comment%s%s", n, eol, n, eol, eol, eol, eol)
	}
	body := b.String()
	w.Header().Set("Content-Type", "text/event-stream")
	if budget >= len(body) {
		_, _ = io.WriteString(w, body) // the rest, and a clean end
		return
	}
	_, _ = io.WriteString(w, body[:budget])
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler) // drop the connection, wherever the budget ran out
}

// TestResumeExactlyOnce: across connections dropped anywhere, every event
// arrives once, in order, with its data whole.
func TestResumeExactlyOnce(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			const total = 200
			src := serve(t, (&flaky{total: total, rng: rand.New(rand.NewPCG(seed, 0))}).ServeHTTP)
			r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), fastBackoff)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
				got = append(got, ev.ID+": "+ev.Data)
				if ev.ID != strconv.Itoa(len(got)) {
					return fmt.Errorf("event %q arrived as number %d", ev.ID, len(got))
				}
				return nil
			}); err != nil {
				t.Fatalf("Run() = %v, want nil", err)
			}
			want := make([]string, total)
			for i := range want {
				want[i] = fmt.Sprintf("%d: event %d\nline 2", i+1, i+1)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got)\n%s", diff)
			}
			if st := r.Stats(); st.Opens < 10 {
				t.Errorf("Stats().Opens = %d, want the server to have dropped many connections", st.Opens)
			}
		})
	}
}

// TestUnsendableIDStopsTheStream: an id that net/http cannot send back
// stops the stream before its event is handled, with the last good cursor
// saved; before this rule every reconnect failed in the client, forever.
func TestUnsendableIDStopsTheStream(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: a\n\nid: 2\x013\ndata: b\n\n")
	})
	store := cursor.NewMemory("")
	r, err := stream.New(src, sse.EventID, store, fastBackoff)
	if err != nil {
		t.Fatal(err)
	}
	var handled []string
	err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
		handled = append(handled, ev.Data)
		return nil
	})
	if !errors.Is(err, sse.ErrUnsendableID) {
		t.Errorf("Run() = %v, want it to match %v", err, sse.ErrUnsendableID)
	}
	if saved, _ := store.Load(context.Background()); saved != "1" || len(handled) != 1 {
		t.Errorf("after Run: saved cursor %q, handled %q; want \"1\" and [a]", saved, handled)
	}
	if diff := cmp.Diff([]string{""}, sent); diff != "" {
		t.Errorf("Last-Event-ID of each request (-want +got)\n%s", diff)
	}
}

// TestEndOfStream: a 204 ends Run with nil after the events before it.
func TestEndOfStream(t *testing.T) {
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") == "2" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: a\n\nid: 2\ndata: b\n\n")
	})
	r, err := stream.New(src, sse.EventID, cursor.NewMemory(""), fastBackoff)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := r.Run(context.Background(), func(context.Context, sse.Event) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("Run() = %v after %d events, want nil after 2", err, n)
	}
}

// TestFileStoreEmptyID: with the durable store the docs recommend
// (cursor.File with cursor.String), a stream whose cursor is "" (a
// heartbeat before the first id) and then returns to "" (an empty id:)
// saves it, and the next run starts from it; before cursor.String could
// store "", the first such save ended Run for good.
func TestFileStoreEmptyID(t *testing.T) {
	var mu sync.Mutex
	var lastIDs [][]string // the Last-Event-ID of each request
	src := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Values("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		if n > 1 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": ping\n\n")
		_ = http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "id: 1\ndata: a\n\nid:\ndata: b\n\n")
	})
	path := filepath.Join(t.TempDir(), "cursor")
	run := func() ([]string, error) {
		store, err := cursor.NewFile(path, "", cursor.String())
		if err != nil {
			t.Fatal(err)
		}
		r, err := stream.New(src, sse.EventID, store, fastBackoff)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
			got = append(got, ev.ID+":"+ev.Data)
			return nil
		})
		return got, err
	}
	got, err := run()
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"1:a", ":b"}, got); diff != "" {
		t.Errorf("events (-want +got)\n%s", diff)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != "quoted\n\"\"\n" {
		t.Errorf("cursor file = %q, %v, want the empty cursor in the quoted form", data, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([][]string{nil, nil}, lastIDs); diff != "" {
		t.Errorf("Last-Event-ID of each request (-want +got)\n%s", diff)
	}
}
