package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream"
)

func ExampleCompare() {
	ids := []string{"1733000000001-0", "1733000000000-10", "1733000000000-2"}
	slices.SortFunc(ids, redis.Compare)
	fmt.Println(ids)
	// Output: [1733000000000-2 1733000000000-10 1733000000001-0]
}

func ExampleExtract() {
	id, err := redis.Extract(redis.Entry{ID: "1733000000000-2", Values: map[string]any{"amount": "12.50"}})
	fmt.Println(id, err)
	// Output: 1733000000000-2 <nil>
}

// Every bad argument of a call is reported at once, each naming the
// argument and its value, and the error matches stream.ErrInvalidOption.
func ExampleNewSource_badArguments() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"}) // nothing is sent before Open
	defer rdb.Close()
	_, err := redis.NewSource(rdb, "", redis.WithCount(0), redis.WithMaxDeliveries(3))
	fmt.Println(err)
	fmt.Println(errors.Is(err, stream.ErrInvalidOption))
	// Output:
	// redis: NewSource: key = "": must not be empty
	// redis: NewSource: WithMaxDeliveries = 3: an option of a Group, not of a Source
	// redis: WithCount: n = 0: must be at least 1
	// true
}

// A consumer of the group "billing" on the stream "orders": entries that
// fail five times are parked in a file, then acknowledged. (It needs a
// Redis server, so it is compiled, not run; examples/redis runs one.)
func ExampleNewGroupResumer() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	g, err := redis.NewGroup(rdb, "orders", "billing", "worker-1", redis.WithMaxDeliveries(5))
	if err != nil {
		panic(err)
	}
	dl, err := deadletter.Open("orders.parked.jsonl", redis.Extract)
	if err != nil {
		panic(err)
	}
	defer dl.Close()
	r, err := redis.NewGroupResumer(g, stream.WithDeadLetter(dl.Park), stream.WithConcurrency(8))
	if err != nil {
		panic(err)
	}
	err = r.Run(context.Background(), g.Handler(func(ctx context.Context, e redis.Entry) error {
		fmt.Println("order", e.ID, e.Values["amount"])
		return nil
	}))
	fmt.Println(err)
}

// A single reader of the stream "orders", its cursor (the last entry ID
// handled) in a file. (It needs a Redis server, so it is compiled, not
// run.)
func ExampleNewResumer() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	src, err := redis.NewSource(rdb, "orders")
	if err != nil {
		panic(err)
	}
	store, err := cursor.NewFile("orders.cursor", "", cursor.String())
	if err != nil {
		panic(err)
	}
	r, err := redis.NewResumer(src, store)
	if err != nil {
		panic(err)
	}
	err = r.Run(context.Background(), func(ctx context.Context, e redis.Entry) error {
		fmt.Println("order", e.ID, e.Values["amount"])
		return nil
	})
	fmt.Println(err)
}
