package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A stream parks the event its handler can never handle, and goes on; once
// the cause is fixed, the parked events are read back and handled.
func Example() {
	dir, err := os.MkdirTemp("", "deadletter-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "parked.jsonl")

	dl, err := deadletter.Open(path, streamtest.Extract[string])
	if err != nil {
		fmt.Println(err)
		return
	}
	src := streamtest.NewSource([]string{"alice", "mallory", "bob"})
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithHandlerRetry(3, backoff.Constant(0)),
		stream.WithDeadLetter(dl.Park))
	if err != nil {
		fmt.Println(err)
		return
	}
	known := map[string]bool{"alice": true, "bob": true}
	handle := func(_ context.Context, e streamtest.Event[string]) error {
		if !known[e.Value] {
			return errclass.Permanent(errors.New("no customer " + e.Value))
		}
		fmt.Println("handled", e.Value)
		return nil
	}
	ctx := context.Background()
	err = r.Run(ctx, handle)
	fmt.Println("run:", err, "parked:", r.Stats().Parked)
	if err := dl.Close(); err != nil {
		fmt.Println(err)
	}

	known["mallory"] = true // the cause is fixed: replay what was parked
	for rec, err := range deadletter.Read[streamtest.Event[string], int64](path) {
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("replaying cursor %d, parked after %d try: %s\n", rec.Cursor, rec.Tries, rec.Err)
		if err := handle(ctx, rec.Event); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// handled alice
	// handled bob
	// run: <nil> parked: 1
	// replaying cursor 2, parked after 1 try: no customer mallory
	// handled mallory
}

// Park records the event, its cursor, the handler's last error and the
// number of tries from a [stream.HandlerError]; Read gives them back.
func ExampleFile_Park() {
	dir, err := os.MkdirTemp("", "deadletter-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "parked.jsonl")

	type order struct {
		ID    string
		Total int
	}
	dl, err := deadletter.Open(path, func(o order) (string, error) { return o.ID, nil })
	if err != nil {
		fmt.Println(err)
		return
	}
	failed := &stream.HandlerError{Err: errors.New("payment service: 503"), Tries: 5}
	if err := dl.Park(context.Background(), order{ID: "A-17", Total: 42}, failed); err != nil {
		fmt.Println(err)
	}
	if err := dl.Close(); err != nil {
		fmt.Println(err)
	}
	for rec, err := range deadletter.Read[order, string](path) {
		fmt.Printf("%s: %+v after %d tries: %s (error: %v, UTC: %v)\n",
			rec.Cursor, rec.Event, rec.Tries, rec.Err, err, rec.Time.Location() == time.UTC)
	}
	// Output:
	// A-17: {ID:A-17 Total:42} after 5 tries: payment service: 503 (error: <nil>, UTC: true)
}
