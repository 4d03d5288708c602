package redis_test

import (
	"context"
	"fmt"
	"slices"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/adapters/redis"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/deadletter"
	"github.com/resumable-go/resumable/stream"
)

func ExampleCompareIDs() {
	ids := []string{"1733000000001-0", "1733000000000-10", "1733000000000-2"}
	slices.SortFunc(ids, redis.CompareIDs)
	fmt.Println(ids)
	// Output: [1733000000000-2 1733000000000-10 1733000000001-0]
}

// A consumer of the group "billing" on the stream "orders": entries that
// fail five times are parked in a file, then acknowledged.
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
// handled) in a file.
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
