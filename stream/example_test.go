package stream_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A Resumer over a source whose connections break: the handler sees every
// event once, in order, and each reconnect asks for the last cursor.
func ExampleNew() {
	log := []string{"a", "b", "c", "d", "e"}
	src := streamtest.NewSource(log,
		streamtest.Step{Kind: streamtest.BreakAfter, K: 2}, // drop the connection after 2 events
		streamtest.Step{Kind: streamtest.FailOpen},         // the reopen fails once
		streamtest.Step{Kind: streamtest.EndAfter, K: 1},   // a clean end (a server timeout)
	)
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(context.Background(), func(ctx context.Context, e streamtest.Event[string]) error {
		fmt.Println(e.Seq, e.Value)
		return nil
	})
	fmt.Println("run:", err)
	for _, o := range src.Opens() {
		fmt.Printf("opened after %d (%v)\n", o.After, o.Step)
	}
	// Output:
	// 1 a
	// 2 b
	// 3 c
	// 4 d
	// 5 e
	// run: <nil>
	// opened after 0 (break-after(2))
	// opened after 2 (fail-open(streamtest: injected failure))
	// opened after 2 (end-after(1))
	// opened after 3 (deliver(0))
}

// All turns the stream into a range-over-func loop; breaking out leaves the
// event it broke on uncommitted, so the next loop starts with it.
func ExampleResumer_All() {
	src := streamtest.NewSource([]string{"a", "b", "c", "d"})
	r, _ := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0))
	ctx := context.Background()
	for e, err := range r.All(ctx) {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println("first loop:", e.Value)
		if e.Value == "b" {
			break
		}
	}
	fmt.Println("cursor:", r.Cursor())
	for e, err := range r.All(ctx) {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println("second loop:", e.Value)
	}
	// Output:
	// first loop: a
	// first loop: b
	// cursor: 1
	// second loop: b
	// second loop: c
	// second loop: d
}

// A classifier of your own goes first; what it has no opinion on falls
// through to errclass.Default.
func ExampleWithClassifier() {
	errUnauthorized := errors.New("401 unauthorized")
	src := streamtest.NewSource([]string{"a", "b"},
		streamtest.Step{Kind: streamtest.FailOpen, Err: errors.New("503 unavailable")},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errUnauthorized},
	)
	classify := errclass.Chain(
		errclass.Is(errUnauthorized, errclass.Decision{Action: errclass.Fail}),
	)
	r, _ := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithClassifier(classify),
		stream.WithBackoff(backoff.Constant(0)),
		stream.WithHooks(stream.Hooks[int64]{
			OnDisconnect: func(e stream.DisconnectEvent[int64]) {
				fmt.Printf("%v -> %v\n", e.Err, e.Decision)
			},
		}),
	)
	err := r.Run(context.Background(), func(ctx context.Context, e streamtest.Event[string]) error {
		fmt.Println("event", e.Value)
		return nil
	})
	fmt.Println("run:", err, "cursor:", r.Cursor())
	// Output:
	// 503 unavailable -> retry
	// event a
	// 401 unauthorized -> fail
	// run: 401 unauthorized cursor: 1
}

// The delay before a reopen is the largest of the backoff step, the server's
// Retry-After and the minimum restart delay; a hook sees which one won.
func ExampleWithHooks() {
	src := streamtest.NewSource([]string{"a"},
		streamtest.Step{Kind: streamtest.DelayAfter, K: 0, Delay: 20 * time.Millisecond},
	)
	r, _ := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(time.Millisecond)),
		stream.WithHooks(stream.Hooks[int64]{
			OnRetry: func(e stream.RetryEvent[int64]) {
				fmt.Printf("retry %d after %v (%v), from cursor %d\n", e.Attempt, e.Delay, e.Reason, e.After)
			},
		}),
	)
	_ = r.Run(context.Background(), func(context.Context, streamtest.Event[string]) error { return nil })
	fmt.Println("events:", r.Stats().Events)
	// Output:
	// retry 1 after 20ms (server), from cursor 0
	// events: 1
}

// Pages turns a polled API (GET /changes?after=N answering up to a page of
// items) into a Source; WithPollInterval sets the wait after an empty page,
// and a handler returning ErrStop commits its event and ends Run cleanly.
func ExamplePages() {
	feed := []string{"created", "paid", "packed", "shipped", "delivered"}
	type change struct {
		Seq    int64
		Status string
	}
	polls := 0
	fetch := func(ctx context.Context, after int64) ([]change, error) {
		polls++
		if polls == 2 {
			return nil, nil // nothing new yet: an empty page
		}
		var page []change
		for s := after + 1; s <= int64(len(feed)) && len(page) < 2; s++ {
			page = append(page, change{Seq: s, Status: feed[s-1]})
		}
		return page, nil
	}
	store := cursor.NewMemory[int64](0)
	r, err := stream.New(stream.Pages(fetch), func(c change) (int64, error) { return c.Seq, nil }, store,
		stream.WithPollInterval(time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(context.Background(), func(_ context.Context, c change) error {
		fmt.Println(c.Seq, c.Status)
		if c.Status == "shipped" {
			return stream.ErrStop
		}
		return nil
	})
	saved, _ := store.Load(context.Background())
	fmt.Println("run:", err, "saved cursor:", saved, "polls:", polls)
	// Output:
	// 1 created
	// 2 paid
	// 3 packed
	// 4 shipped
	// run: <nil> saved cursor: 4 polls: 3
}

// A resync hook streams the current state through emit when the cursor has
// expired (the server compacted its history), and returns the cursor to go
// on from.
func ExampleWithResync() {
	src := streamtest.NewSource([]string{"a", "b", "c", "d", "e"}, streamtest.Step{Kind: streamtest.ExpireAfter, K: 1})
	resync := func(ctx context.Context, cause error, emit func(streamtest.Event[string]) error) (int64, error) {
		fmt.Println("expired:", errors.Is(cause, errclass.ErrExpired))
		// The state as of event 3, as a server's snapshot would give it.
		if err := emit(streamtest.Event[string]{Value: "snapshot of a, b, c"}); err != nil {
			return 0, err // the handler's error: return it at once
		}
		return 3, nil
	}
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)), stream.WithResync(resync))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(context.Background(), func(_ context.Context, e streamtest.Event[string]) error {
		fmt.Println(e.Value)
		return nil
	})
	fmt.Println("run:", err, "cursor:", r.Cursor())
	// Output:
	// a
	// expired: true
	// snapshot of a, b, c
	// d
	// e
	// run: <nil> cursor: 5
}

// RunBatch hands the handler up to three events at once, and a source
// transaction's end marker ends a batch early; each batch commits the
// cursor of its last event.
func ExampleResumer_RunBatch() {
	log := []string{"a", "b", "c", "d", "e.", "f", "g"} // "e." ends a transaction
	src := streamtest.NewSource(log)
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBatch(3, time.Second),
		stream.WithBatchEnd(func(e streamtest.Event[string]) bool { return e.Value == "e." }))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.RunBatch(context.Background(), func(ctx context.Context, events []streamtest.Event[string]) error {
		var values []string
		for _, e := range events {
			values = append(values, e.Value)
		}
		fmt.Println(values)
		return nil
	})
	fmt.Println("run:", err, "cursor:", r.Cursor())
	// Output:
	// [a b c]
	// [d e.]
	// [f g]
	// run: <nil> cursor: 7
}
