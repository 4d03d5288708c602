package stream_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// Orders for three customers, handled four at a time: one customer's
// orders go to the handler one after the other, in stream order, while
// different customers' overlap. The committed cursor is the end of the
// prefix of handled events, so when Run returns every order is committed.
func ExampleWithConcurrency() {
	orders := []string{"alice:1", "bob:1", "alice:2", "carol:1", "bob:2", "alice:3", "carol:2", "bob:3"}
	src := streamtest.NewSource(orders)
	customer := func(e streamtest.Event[string]) string {
		name, _, _ := strings.Cut(e.Value, ":")
		return name
	}
	r, err := stream.New(src, streamtest.Extract[string], cursor.NewMemory[int64](0),
		stream.WithConcurrency(4), stream.WithOrderKey(customer))
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	seen := map[string][]string{} // customer → orders, in the order handled
	err = r.Run(context.Background(), func(ctx context.Context, e streamtest.Event[string]) error {
		mu.Lock() // handlers run on several goroutines
		defer mu.Unlock()
		seen[customer(e)] = append(seen[customer(e)], e.Value)
		return nil
	})
	fmt.Println("run:", err)
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		fmt.Println(name, seen[name])
	}
	st := r.Stats()
	fmt.Printf("cursor %d, %d events, %d in flight\n", st.Cursor, st.Events, st.InFlight)
	// Output:
	// run: <nil>
	// alice [alice:1 alice:2 alice:3]
	// bob [bob:1 bob:2 bob:3]
	// carol [carol:1 carol:2]
	// cursor 8, 8 events, 0 in flight
}
