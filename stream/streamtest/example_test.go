package streamtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A fault script played against a Resumer; the record of Opens shows that
// every reopen asked for the cursor of the last event handled.
func ExampleNewSource() {
	src := streamtest.NewSource([]string{"a", "b", "c", "d", "e"},
		streamtest.Step{Kind: streamtest.BreakAfter, K: 2},                    // the connection resets after 2 events
		streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Millisecond}, // Open answers "retry after 1ms"
		streamtest.Step{Kind: streamtest.ExpireAfter, K: 1},                   // the server forgot the cursor
		streamtest.Step{Kind: streamtest.EndAfter, K: 1},                      // a server timeout: a clean end
	)
	var r *stream.Resumer[streamtest.Event[string], int64]
	resync := func(ctx context.Context, cause error, _ func(streamtest.Event[string]) error) (int64, error) {
		fmt.Println("resync:", cause)
		return r.Cursor(), nil // nothing was missed: go on from here
	}
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)), stream.WithResync(resync))
	if err != nil {
		fmt.Println(err)
		return
	}
	var got []string
	err = r.Run(context.Background(), func(_ context.Context, e streamtest.Event[string]) error {
		got = append(got, e.Value)
		return nil
	})
	fmt.Println("handled:", got, "run:", err)
	for _, o := range src.Opens() {
		fmt.Printf("Open after %d: %v\n", o.After, o.Step)
	}
	fmt.Println("open connections:", src.Live())
	// Output:
	// resync: streamtest: cursor 3 has expired: streamtest: injected failure
	// handled: [a b c d e] run: <nil>
	// Open after 0: break-after(2)
	// Open after 2: delay-after(0, 1ms)
	// Open after 2: expire-after(1)
	// Open after 3: end-after(1)
	// Open after 4: deliver(0)
	// open connections: 0
}

// A random fault script drawn from a seed: the same seed plays the same
// faults, so a failing seed can be replayed.
func ExampleRandomScript() {
	const seed = 1
	script := streamtest.RandomScript(rand.New(rand.NewPCG(seed, seed)), 50, 30, 0)
	src := streamtest.NewSource(make([]int, 1000), script...)
	var r *stream.Resumer[streamtest.Event[int], int64]
	resync := func(context.Context, error, func(streamtest.Event[int]) error) (int64, error) {
		return r.Cursor(), nil
	}
	r, err := stream.New(src, streamtest.Extract[int], cursor.NewMemory[int64](0),
		stream.WithBackoff(backoff.Constant(0)), stream.WithResync(resync))
	if err != nil {
		fmt.Println(err)
		return
	}
	var last int64
	inOrder := true
	err = r.Run(context.Background(), func(_ context.Context, e streamtest.Event[int]) error {
		inOrder = inOrder && e.Seq == last+1
		last = e.Seq
		return nil
	})
	faults := 0
	for _, o := range src.Opens() {
		if o.Step.Kind != streamtest.Deliver {
			faults++
		}
	}
	fmt.Println("run:", err)
	fmt.Printf("handled %d events, each once and in order: %v\n", last, inOrder)
	fmt.Println("faults played:", faults)
	// Output:
	// run: <nil>
	// handled 1000 events, each once and in order: true
	// faults played: 50
}

// Cancelling a Resumer stuck on a Recv that ignores its context: the
// Resumer closes the connection, and Run returns the context's error.
func ExampleSource_AwaitBlocked() {
	src := streamtest.NewSource([]string{"a", "b", "c"},
		streamtest.Step{Kind: streamtest.BlockAfter, K: 2})
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(_ context.Context, e streamtest.Event[string]) error {
			fmt.Println("handled", e.Value)
			return nil
		})
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := src.AwaitBlocked(wait); err != nil {
		fmt.Println(err)
	}
	cancel()
	fmt.Println("run:", <-done)
	fmt.Println("cursor:", r.Cursor(), "open connections:", src.Live())
	// Output:
	// handled a
	// handled b
	// run: context canceled
	// cursor: 2 open connections: 0
}
