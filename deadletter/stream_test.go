package deadletter_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

var errPoison = errors.New("poison")

// poisonHandler fails for good on the events whose value is "poison", and
// records the others.
func poisonHandler(handled *[]int64) func(context.Context, event) error {
	return func(_ context.Context, e event) error {
		if e.Value == "poison" {
			return errclass.Permanent(errPoison)
		}
		*handled = append(*handled, e.Seq)
		return nil
	}
}

// A Park that fails (here: the File was closed) stops Run with the event
// uncommitted; the next run, with a working File, parks it.
func TestStreamStopsWhenParkFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	src := streamtest.NewSource([]string{"a", "b", "poison", "d"})
	store := cursor.NewMemory[int64](0)
	var handled []int64

	closed := mustOpen(t, path)
	mustClose(t, closed)
	r, err := stream.New(src, streamtest.Extract[string], store,
		stream.WithBackoff(backoff.Constant(0)), stream.WithDeadLetter(closed.Park))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), poisonHandler(&handled))
	if !errors.Is(err, fs.ErrClosed) || !errors.Is(err, errPoison) {
		t.Fatalf("Run() = %v, want an error matching fs.ErrClosed and the handler's", err)
	}
	if c, _ := store.Load(context.Background()); c != 2 {
		t.Errorf("saved cursor = %d, want 2: the poison event uncommitted", c)
	}
	if recs := mustReadAll(t, path); len(recs) != 0 {
		t.Errorf("Read() = %v, want nothing parked", recs)
	}

	f := mustOpen(t, path)
	r, err = stream.New(src, streamtest.Extract[string], store,
		stream.WithBackoff(backoff.Constant(0)), stream.WithDeadLetter(f.Park))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), poisonHandler(&handled)); err != nil {
		t.Fatalf("second Run() = %v, want nil", err)
	}
	mustClose(t, f)
	if diff := cmp.Diff([]int64{1, 2, 4}, handled); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	want := []record{{Cursor: 3, Tries: 1, Err: "poison", Event: event{Seq: 3, Value: "poison"}}}
	if diff := cmp.Diff(want, mustReadAll(t, path), ignoreTime); diff != "" {
		t.Errorf("Read() (-want +got):\n%s", diff)
	}
}

// Handlers running at once park through one File: each poison event is
// parked once, as a whole line, with the number of tries made.
func TestStreamConcurrentParks(t *testing.T) {
	const events = 400
	log := make([]string, events)
	for i := range log {
		switch {
		case i%10 == 3:
			log[i] = "poison" // permanent: one try
		case i%10 == 7:
			log[i] = "flaky" // fails every try: three
		default:
			log[i] = "ok"
		}
	}
	path := filepath.Join(t.TempDir(), "parked.jsonl")
	f := mustOpen(t, path)
	r, err := stream.New(streamtest.NewSource(log), streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)),
		stream.WithConcurrency(4),
		stream.WithOrderKey(func(e event) int64 { return e.Seq % 8 }),
		stream.WithHandlerRetry(3, backoff.Constant(0)),
		stream.WithDeadLetter(f.Park))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(_ context.Context, e event) error {
		switch e.Value {
		case "poison":
			return errclass.Permanent(errPoison)
		case "flaky":
			return errors.New("flaky")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	mustClose(t, f)
	if st := r.Stats(); st.Parked != events/5 || st.HandlerRetries != 2*events/10 {
		t.Errorf("Stats: Parked = %d, HandlerRetries = %d; want %d, %d", st.Parked, st.HandlerRetries, events/5, 2*events/10)
	}
	seen := make(map[int64]bool)
	for _, rec := range mustReadAll(t, path) {
		want := record{Cursor: rec.Cursor, Tries: 1, Err: "poison", Event: event{Seq: rec.Cursor, Value: "poison"}}
		if rec.Event.Value == "flaky" {
			want.Tries, want.Err, want.Event.Value = 3, "flaky", "flaky"
		}
		if diff := cmp.Diff(want, rec, ignoreTime); diff != "" || seen[rec.Cursor] {
			t.Errorf("record of cursor %d (seen before: %v) (-want +got):\n%s", rec.Cursor, seen[rec.Cursor], diff)
		}
		seen[rec.Cursor] = true
	}
	if len(seen) != events/5 {
		t.Errorf("%d events parked, want %d", len(seen), events/5)
	}
}
